"""Preflight against real published sglang releases (downloaded wheels, patched in the test the
way a user patches): the verdicts the issue names, case by case."""
import json
import subprocess
import sys

import pytest

pytestmark = pytest.mark.wheels

DYNSPEC = [sys.executable, "-m", "dynspec_cli"]
SPEC = ["--model-path", "/m", "--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", "/d",
        "--speculative-num-steps", "3", "--speculative-num-draft-tokens", "4", "--speculative-disable-batch-threshold", "5"]


def preflight(python, *flags, env=()):
    cmd = DYNSPEC + ["preflight", "--python", python, "--json"] + [f"--env={e}" for e in env] + ["--"] + list(flags)
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
    assert r.stdout, r.stderr
    doc = json.loads(r.stdout)
    assert r.returncode == doc["exit_code"]
    doc["codes"] = [f["code"] for f in doc["findings"]]
    return doc


def test_059_patch_in_v2_env_unset_is_dead_with_the_fix(sglang_python):
    py, _, rec = sglang_python("0.5.9")
    d = preflight(py, *SPEC, "--speculative-eagle-topk", "4")
    assert d["verdict"] == "dead" and d["exit_code"] == 1
    assert d["sglang_version"] == "0.5.9"
    assert d["worker"]["class"] == "EAGLEWorker" and d["worker"]["file"].endswith("speculative/eagle_worker.py")
    (f,) = [f for f in d["findings"] if f["code"] == "DS201"]
    assert "SGLANG_ENABLE_SPEC_V2=True" in f["fix"] and "--speculative-eagle-topk 1" in f["fix"]
    (p,) = d["patched"]
    assert p["class"] == "EAGLEWorkerV2" and p["function"] == "__init__"
    assert p["line"] == next(i.line for i in rec.insertions if i.what == "marker")


def test_059_env_true_topk1_is_reachable(sglang_python):
    py, _, _ = sglang_python("0.5.9")
    d = preflight(py, *SPEC, "--speculative-eagle-topk", "1", env=["SGLANG_ENABLE_SPEC_V2=True"])
    assert d["verdict"] == "reachable" and d["exit_code"] == 0
    assert d["worker"]["class"] == "EAGLEWorkerV2" and d["overlap_schedule"] is True


def test_059_env_true_topk4_is_dead_valueerror(sglang_python):
    py, _, _ = sglang_python("0.5.9")
    d = preflight(py, *SPEC, "--speculative-eagle-topk", "4", env=["SGLANG_ENABLE_SPEC_V2=True"])
    assert d["verdict"] == "dead" and "DS107" in d["codes"]


def test_059_patch_in_v1_with_env_true_is_dead(sglang_python):
    py, _, _ = sglang_python("0.5.9", patch="v1")
    d = preflight(py, *SPEC, "--speculative-eagle-topk", "1", env=["SGLANG_ENABLE_SPEC_V2=True"])
    assert d["verdict"] == "dead" and d["worker"]["class"] == "EAGLEWorkerV2" and "DS201" in d["codes"]
    assert d["patched"][0]["class"] == "EAGLEWorker"


def test_0511_defaults_run_v2(sglang_python):
    py, _, _ = sglang_python("0.5.11")
    d = preflight(py, *SPEC, "--speculative-eagle-topk", "1")
    assert d["verdict"] == "reachable" and d["worker"]["class"] == "EAGLEWorkerV2"


def test_0512post1_topk4_falls_back_to_v1(sglang_python):
    py, _, _ = sglang_python("0.5.12.post1")
    d = preflight(py, *SPEC, "--speculative-eagle-topk", "4")
    assert d["verdict"] == "dead" and d["worker"]["class"] == "EAGLEWorker"
    assert {"DS106", "DS201"} <= set(d["codes"])


@pytest.mark.parametrize("version", ["0.5.13", "0.5.23"])
@pytest.mark.parametrize("env", [[], ["SGLANG_ENABLE_SPEC_V2=False"]])
def test_0513_and_later_run_v2_whatever_the_env(sglang_python, version, env):
    py, _, _ = sglang_python(version)
    d = preflight(py, *SPEC, "--speculative-eagle-topk", "1", env=env)
    assert d["worker"]["class"] == "EAGLEWorkerV2"
    if version == "0.5.23":
        assert d["verdict"] == "reachable"
        assert ("DS104" in d["codes"]) == bool(env)


def test_0523_patch_in_removed_v1_worker_cannot_exist(sglang_python):
    py, site, _ = sglang_python("0.5.23", patch=None)
    d = preflight(py, *SPEC, "--speculative-eagle-topk", "1")
    assert d["verdict"] == "dead" and "DS204" in d["codes"]  # the marker is nowhere in this install


def test_flag_missing_is_dead(sglang_python):
    py, _, _ = sglang_python("0.5.9", patch="marker-only")
    d = preflight(py, *SPEC, "--speculative-eagle-topk", "1", env=["SGLANG_ENABLE_SPEC_V2=True"])
    assert d["verdict"] == "dead" and "DS101" in d["codes"]


def test_syntax_error_in_patched_file_is_reported_with_its_line(sglang_python):
    py, _, ins = sglang_python("0.5.9", patch="syntax")
    d = preflight(py, *SPEC, "--speculative-eagle-topk", "1", env=["SGLANG_ENABLE_SPEC_V2=True"])
    (f,) = [f for f in d["findings"] if f["code"] == "DS205"]
    assert f"eagle_worker_v2.py:{ins.line}" in f["message"]
    assert d["verdict"] == "dead"


def test_054post1_env_switch_for_eagle(sglang_python):
    py, _, _ = sglang_python("0.5.4.post1")
    base = [a if a != "EAGLE3" else "EAGLE" for a in SPEC]
    off = preflight(py, *base)
    on = preflight(py, *base, env=["SGLANG_ENABLE_SPEC_V2=1"])
    assert off["worker"]["class"] == "EAGLEWorker" and off["verdict"] == "dead"
    assert on["worker"]["class"] == "EAGLEWorkerV2" and on["verdict"] == "reachable"


def test_threshold_unreachable_without_max_running_requests(sglang_python):
    py, _, _ = sglang_python("0.5.9")
    flags = [a if a != "5" else "64" for a in SPEC]
    d = preflight(py, *flags, "--speculative-eagle-topk", "1", env=["SGLANG_ENABLE_SPEC_V2=True"])
    assert d["verdict"] == "dead" and "DS103" in d["codes"]
    ok = preflight(py, *flags, "--speculative-eagle-topk", "1", "--max-running-requests", "128", env=["SGLANG_ENABLE_SPEC_V2=True"])
    assert ok["verdict"] == "reachable"


def test_unknown_flag_is_dead(sglang_python):
    py, _, _ = sglang_python("0.5.9")
    d = preflight(py, *SPEC, "--speculative-eagle-topk", "1", "--no-such-flag", "3", env=["SGLANG_ENABLE_SPEC_V2=True"])
    assert d["verdict"] == "dead" and "DS109" in d["codes"]


def test_python_without_sglang_is_dead_not_a_traceback():
    d = preflight(sys.executable, *SPEC)
    assert d["verdict"] == "dead" and "DS210" in d["codes"]


# --- SGLang's own --speculative-adaptive: its code is sglang's, logged by a helper class ---------
# (AdaptiveSpeculativeParams, adaptive_spec_params.py) that the worker builds: 0.5.16
# eagle_worker_v2.py:1060 `if server_args.speculative_adaptive: self.adaptive_controller =
# AdaptiveController(...)` inside EAGLEWorkerV2.__init__; 0.5.11 only eagle_worker.py's EAGLEWorker does.
ADAPTIVE = ["--model-path", "/m", "--speculative-algorithm", "EAGLE3", "--speculative-adaptive"]


@pytest.mark.parametrize("version, flags, verdict", [
    ("0.5.16", ["--speculative-eagle-topk", "1"], "reachable"),
    ("0.5.23", ["--speculative-eagle-topk", "1"], "reachable"),
    ("0.5.16", ["--speculative-eagle-topk", "4"], "dead"),  # adaptive_unsupported_reason: only topk=1
    ("0.5.11", ["--speculative-eagle-topk", "1"], "dead"),  # overlap on by default: V2, which has no controller
    ("0.5.11", ["--speculative-eagle-topk", "1", "--disable-overlap-schedule"], "reachable"),  # EAGLEWorker
])
def test_adaptive_on_the_unpatched_wheel(version, flags, verdict):
    from tests.support import wheels

    cmd = DYNSPEC + ["preflight", "--feature", "speculative-adaptive", "--json", "--", *ADAPTIVE, *flags]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=180,
                       env={**__import__("os").environ, "PYTHONPATH": str(wheels.unpacked(version))})
    d = json.loads(r.stdout)
    assert d["sglang_version"] == version
    assert d["verdict"] == verdict, d["findings"]
    codes = {f["code"] for f in d["findings"] if f["severity"] == "error"}
    assert codes == ({"DS112"} if verdict == "dead" else set()), d["findings"]
