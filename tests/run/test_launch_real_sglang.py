"""sglang's REAL launcher (pinned 0.5.9, patched in the test like the seed: flag in ServerArgs, marker
in EAGLEWorkerV2.__init__) started by `dynspec launch` over the test suite's real sshd. No GPU here:
the launcher resolves its arguments, prints its real warnings, and stops at its first GPU-stack import."""
import json
import time

import pytest

from tests.run.helpers import cleanup, dynspec, free_port, group_alive, record
from tests.support import sglang_env, sglang_patch
from tests.tools.record_real_logs import ensure_model_dir

pytestmark = [pytest.mark.realsglang, pytest.mark.ssh]


@pytest.fixture(scope="module")
def patched_059(tmp_path_factory):
    env = sglang_env.python_for("0.5.9")
    site = env.patched_copy(tmp_path_factory.mktemp("site059"))
    sglang_patch.patch_sglang(site)
    return env, site


def profile(path, name, env, site, *, spec_v2: bool, topk: int) -> str:
    model = ensure_model_dir()
    e = {"PYTHONPATH": env.env(extra_paths=[site])["PYTHONPATH"], "PYTHONNOUSERSITE": "1"}
    if spec_v2:
        e["SGLANG_ENABLE_SPEC_V2"] = "True"
    flags = {"model-path": str(model), "device": "cuda", "speculative-algorithm": "EAGLE3",
             "speculative-draft-model-path": str(model), "speculative-num-steps": 3,
             "speculative-num-draft-tokens": 4, "speculative-eagle-topk": topk,
             "speculative-disable-batch-threshold": 5}
    text = [f'name = "{name}"', 'host = "dut"', f'python = "{env.python}"', f"port = {free_port()}",
            f'log = "{path.parent / (name + ".log")}"', "[env]"]
    text += [f"{k} = {json.dumps(v)}" for k, v in e.items()]
    text += ["[flags]"] + [f'"{k}" = {json.dumps(v)}' for k, v in flags.items()]
    path.write_text("\n".join(text) + "\n")
    return str(path)


def test_real_059_over_ssh_env_unset_is_dead_within_seconds(tmp_path, ssh_lab, patched_059):
    env, site = patched_059
    name = f"real-dead-{int(time.time())}"
    try:
        prof = profile(tmp_path / "p.toml", name, env, site, spec_v2=False, topk=4)
        r = dynspec("launch", prof, "--json", ssh=ssh_lab, timeout=300)
        assert r.returncode == 1, r.stderr[-2000:]
        doc = json.loads(r.stdout.strip().splitlines()[-1])
        if "preflight" in doc:  # refused before launch: the static route already proves it dead
            pre = doc["preflight"]
            assert pre["worker"]["class"] == "EAGLEWorker" and any(f["code"] == "DS201" for f in pre["findings"])
            return
        assert doc["verdict"] == "dead" and doc["worker"]["class"] == "EAGLEWorker"
        assert any("SGLANG_ENABLE_SPEC_V2=True" in (f["fix"] or "") for f in doc["findings"])
        assert not group_alive(record(name)["pgid"])
    finally:
        cleanup(name)


def test_real_059_over_ssh_dead_without_preflight_from_the_real_warning(tmp_path, ssh_lab, patched_059):
    env, site = patched_059
    name = f"real-dead-np-{int(time.time())}"
    try:
        prof = profile(tmp_path / "p.toml", name, env, site, spec_v2=False, topk=4)
        t0 = time.monotonic()
        r = dynspec("launch", prof, "--json", "--no-preflight", ssh=ssh_lab, timeout=300)
        assert r.returncode == 1, r.stderr[-2000:]
        doc = json.loads(r.stdout)
        assert doc["verdict"] == "dead" and doc["worker"]["class"] == "EAGLEWorker"
        (f,) = [f for f in doc["findings"] if f["code"] == "DS201"]
        assert "Overlap scheduler is disabled when spec v2 is off" in f["text"]
        assert "SGLANG_ENABLE_SPEC_V2=True" in f["fix"] and "--speculative-eagle-topk 1" in f["fix"]
        assert doc["run"]["stopped"] or not group_alive(record(name)["pgid"])
        assert not group_alive(record(name)["pgid"])
        assert time.monotonic() - t0 < 240
    finally:
        cleanup(name)


def test_real_059_over_ssh_spec_v2_topk1_crashes_for_lack_of_gpu(tmp_path, ssh_lab, patched_059):
    env, site = patched_059
    name = f"real-crash-{int(time.time())}"
    try:
        prof = profile(tmp_path / "p.toml", name, env, site, spec_v2=True, topk=1)
        r = dynspec("launch", prof, "--json", ssh=ssh_lab, timeout=300)
        assert r.returncode == 4, r.stderr[-2000:] + r.stdout[-2000:]
        doc = json.loads(r.stdout.strip().splitlines()[-1])
        assert doc["verdict"] == "crashed" and doc["crash"]["exception"]
        assert doc["worker"]["class"] == "EAGLEWorkerV2"
        assert not group_alive(record(name)["pgid"])
    finally:
        cleanup(name)
