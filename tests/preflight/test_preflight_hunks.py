"""Preflight judges each hunk of `--patch`, on the real sglang 0.5.12.post1 wheel patched with the
matrix diffs of gpu/patches/ (applied by gpu/device/apply_patch.py, as on the GPU machine).

Expected values are read from the wheel's source, not from dynspec's tables:
- srt/speculative/spec_info.py create_worker: EAGLE3 with overlap on -> EAGLEWorkerV2; STANDALONE with
  overlap on -> StandaloneWorkerV2; topk > 1 turns overlap off (server_args.py) -> EAGLEWorker (V1).
- eagle_worker_v2.py:682 EAGLEWorkerV2.__init__ builds `EagleDraftWorker(...)`; EagleDraftWorker.draft
  (line 339) is what EAGLEWorkerV2.forward_batch_generation calls (`self.draft_worker.draft(`, line 804).
- standalone_worker_v2.py:136 `class StandaloneWorkerV2(EAGLEWorkerV2)`: its __init__ sets its own
  fields and never calls EAGLEWorkerV2.__init__; line 171 builds `StandaloneDraftWorker(...)`, a
  subclass of EagleDraftWorker (line 38) that overrides __init__ and init_lm_head, not draft.
- eagle_worker.py:91 `class EAGLEWorker(TpModelWorker)`: the V1 worker, its own draft (draft at line 758)."""
import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import wheels

pytestmark = pytest.mark.wheels

REPO = Path(__file__).resolve().parents[2]
PATCHES = REPO / "gpu" / "patches"
B = PATCHES / "dynamic-spec-disable-0.5.12.post1.diff"
SPEC = ["--model-path", "/m", "--speculative-draft-model-path", "/d", "--speculative-num-steps", "3",
        "--speculative-num-draft-tokens", "4", "--speculative-disable-batch-threshold", "5"]
EAGLE3 = [*SPEC, "--speculative-algorithm", "EAGLE3", "--speculative-eagle-topk", "1"]
STANDALONE = [*SPEC, "--speculative-algorithm", "STANDALONE", "--speculative-eagle-topk", "1"]
V2, V1, SA = ("sglang/srt/speculative/eagle_worker_v2.py", "sglang/srt/speculative/eagle_worker.py",
              "sglang/srt/server_args.py")


def _apply_patch():
    spec = importlib.util.spec_from_file_location("apply_patch", REPO / "gpu" / "device" / "apply_patch.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.apply


def make_python(root: Path, version: str, diff: Path | None) -> tuple[str, Path]:
    """A venv whose sglang is a copy of the real wheel with `diff` applied (None: pristine)."""
    site = root / "site"
    shutil.copytree(wheels.unpacked(version), site, symlinks=True)
    if diff is not None:
        _apply_patch()(site, diff)
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    sp = next((venv / "lib").glob("python3*/site-packages"))
    (sp / "patched-sglang.pth").write_text(str(site) + "\n")
    return str(venv / "bin" / "python"), site


@pytest.fixture(scope="module")
def patched(tmp_path_factory):
    made = {}

    def get(name: str, version: str = "0.5.12.post1"):
        key = (name, version)
        if key not in made:
            diff = None if name == "pristine" else B if name == "b" else next(PATCHES.glob(f"{name}-*.diff"))
            made[key] = make_python(tmp_path_factory.mktemp(f"{name}-{version}"), version, diff)
        return made[key]
    return get


def preflight(py, diff, flags, *extra, text=False):
    cmd = [sys.executable, "-m", "dynspec_cli", "preflight", "--python", py, "--patch", str(diff), *extra]
    r = subprocess.run(cmd + ([] if text else ["--json"]) + ["--", *flags], capture_output=True, text=True,
                       timeout=180, cwd=REPO, env=dict(os.environ, PYTHONPATH=str(REPO)))
    if text or r.returncode == 2:
        return r
    assert r.stdout, r.stderr
    d = json.loads(r.stdout)
    assert r.returncode == d["exit_code"]
    d["codes"] = [f["code"] for f in d["findings"]]
    return d


def hunk(d, cls, function):
    (h,) = [h for h in d["hunks"] if h["class"] == cls and h["function"] == function]
    return h


def test_a_marker_and_behaviour_in_one_method_is_reachable(patched):
    py, _ = patched("a")
    d = preflight(py, next(PATCHES.glob("a-*.diff")), EAGLE3)
    assert d["verdict"] == "reachable" and d["worker"]["class"] == "EAGLEWorkerV2"
    h = hunk(d, "EagleDraftWorker", "draft")
    assert h["role"] == "marker+behaviour" and h["reach"] == "reachable" and h["file"] == V2
    assert "EagleDraftWorker is the draft worker" in h["reason"]
    assert {x["role"] for x in d["hunks"]} == {"flag", "marker+behaviour"}
    assert all(x["reach"] == "reachable" for x in d["hunks"] if x["role"] == "flag")
    assert not {"DS225", "DS226", "DS227", "DS211", "DS201"} & set(d["codes"])


def test_a_under_standalone_runs_through_the_inherited_draft(patched):
    py, _ = patched("a")
    d = preflight(py, next(PATCHES.glob("a-*.diff")), STANDALONE)
    assert d["verdict"] == "reachable" and d["worker"]["class"] == "StandaloneWorkerV2"
    h = hunk(d, "EagleDraftWorker", "draft")
    assert h["reach"] == "reachable" and "StandaloneDraftWorker" in h["reason"]
    assert "DS225" not in d["codes"]


def test_b_marker_in_init_behaviour_in_draft_worker(patched):
    py, _ = patched("b")
    d = preflight(py, B, EAGLE3)
    assert d["verdict"] == "reachable" and d["exit_code"] == 0
    b, m = hunk(d, "EagleDraftWorker", "draft"), hunk(d, "EAGLEWorkerV2", "__init__")
    assert (b["role"], b["reach"], b["lines"]) == ("behaviour", "reachable", [402, 407])
    assert (m["role"], m["reach"], m["lines"]) == ("marker", "reachable", [667, 667])
    assert not {"DS225", "DS226", "DS211"} & set(d["codes"])
    assert [p["class"] for p in d["patched"]] == ["EAGLEWorkerV2"]  # (the marker's location, as before)


def test_c_subclass_overrides_the_marker_method_but_inherits_the_behaviour(patched):
    """Issue 29's false DEAD: StandaloneWorkerV2.__init__ never calls EAGLEWorkerV2.__init__ (no marker),
    its StandaloneDraftWorker inherits EagleDraftWorker.draft (the behaviour runs)."""
    py, _ = patched("b")
    d = preflight(py, B, STANDALONE)
    assert d["verdict"] == "reachable" and d["worker"]["class"] == "StandaloneWorkerV2"
    assert "DS211" not in d["codes"] and "DS225" in d["codes"]
    m = hunk(d, "EAGLEWorkerV2", "__init__")
    assert m["reach"] == "not reachable" and "StandaloneWorkerV2.__init__ overrides EAGLEWorkerV2.__init__" in m["reason"]
    assert hunk(d, "EagleDraftWorker", "draft")["reach"] == "reachable"
    (f,) = [f for f in d["findings"] if f["code"] == "DS225"]
    assert f["severity"] == "warning" and "EagleDraftWorker.draft" in f["message"] and "silent" in f["message"]


def test_b_with_topk_4_runs_v1_where_no_hunk_acts(patched):
    # topk 4: server_args.py turns the overlap scheduler off, spec_info.py then creates EAGLEWorker (V1),
    # which builds no EagleDraftWorker: the behaviour hunk cannot run
    py, _ = patched("b")
    d = preflight(py, B, [*SPEC, "--speculative-algorithm", "EAGLE3", "--speculative-eagle-topk", "4"])
    assert d["verdict"] == "dead" and d["worker"]["class"] == "EAGLEWorker" and "DS226" in d["codes"]
    assert hunk(d, "EagleDraftWorker", "draft")["reach"] == "not reachable"


def test_d_behaviour_only_in_v1_while_the_marker_logs_is_dead(patched):
    """Issue 29's false LIVE: the marker in EAGLEWorkerV2.__init__ logs, the behaviour sits in
    EAGLEWorker.draft, which topk 1 on 0.5.12.post1 never runs."""
    py, _ = patched("d")
    d = preflight(py, next(PATCHES.glob("d-*.diff")), EAGLE3)
    assert d["verdict"] == "dead" and d["exit_code"] == 1 and "DS226" in d["codes"]
    b = hunk(d, "EAGLEWorker", "draft")
    assert b["file"] == V1 and b["role"] == "behaviour" and b["reach"] == "not reachable"
    assert "EAGLEWorker is not on the running path" in b["reason"] and "EAGLEWorkerV2" in b["reason"]
    assert hunk(d, "EAGLEWorkerV2", "__init__")["reach"] == "reachable"


def test_e_everything_in_server_args_is_dead(patched):
    py, _ = patched("e")
    d = preflight(py, next(PATCHES.glob("e-*.diff")), EAGLE3)
    assert d["verdict"] == "dead" and "DS228" in d["codes"]
    assert {h["role"] for h in d["hunks"]} == {"flag"} and all(h["file"] == SA for h in d["hunks"])
    assert [h["function"] for h in d["hunks"]] == [None, "_handle_speculative_decoding", "add_cli_args"]


@pytest.mark.parametrize("flags, worker", [(EAGLE3, "EAGLEWorkerV2"), (STANDALONE, "StandaloneWorkerV2")])
def test_f_plugin_hook_on_the_draft_worker_is_reachable(patched, flags, worker):
    # the plugin's entry point is in the site's dsd_plugin-0.1.dist-info; scheduler.py:3999
    # run_scheduler_process calls load_plugins(); the AFTER hook wraps EagleDraftWorker.draft
    py, _ = patched("f")
    d = preflight(py, next(PATCHES.glob("f-*.diff")), flags, "--feature", str(PATCHES / "f-plugin-feature.toml"))
    assert d["verdict"] == "reachable" and d["worker"]["class"] == worker and "DS201" not in d["codes"]
    code = [h for h in d["hunks"] if h["file"] == "dsd_plugin/__init__.py"]
    assert [h["role"] for h in code] == ["plugin"] and code[0]["reach"] == "reachable"
    assert "EagleDraftWorker.draft" in code[0]["reason"]


def test_the_text_report_has_one_line_per_hunk(patched):
    py, _ = patched("b")
    r = preflight(py, B, STANDALONE, text=True)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    hunk_lines = [x for x in lines if x.startswith("    ") and (" flag " in x or " behaviour " in x or " marker " in x)]
    assert len(hunk_lines) == 4
    assert any(x.startswith("    ✗ EAGLEWorkerV2.__init__ (sglang/srt/speculative/eagle_worker_v2.py:667)  marker")
               and x.endswith("not reachable") for x in hunk_lines)
    assert any(x.startswith("    ✓ EagleDraftWorker.draft (") and x.endswith("reachable") for x in hunk_lines)


# --- bad input: one line, exit 2 ------------------------------------------------------------------
def one_line(r, *words):
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert "Traceback" not in r.stderr
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("dynspec: error: "), r.stderr
    for w in words:
        assert w in lines[0], lines[0]


def test_a_diff_not_applied_to_the_install(patched):
    py, site = patched("pristine")
    one_line(preflight(py, B, EAGLE3), "@@ -582,6 +582,7 @@", str(site / SA), "not applied")


def test_a_diff_against_another_release(patched):
    # (b) was made against 0.5.12.post1: on 0.5.9 none of its hunks' text is in server_args.py or eagle_worker_v2.py
    py, _ = patched("pristine", "0.5.9")
    one_line(preflight(py, B, EAGLE3), "none of its 4 hunks matches sglang 0.5.9", "another sglang release")


def test_a_diff_of_a_file_the_release_lacks(patched, tmp_path):
    # frozen_kv_mtp_worker_v2.py is new in 0.5.12 (spec_info.py of 0.5.12 imports it; 0.5.9 has no such file)
    rel = "sglang/srt/speculative/frozen_kv_mtp_worker_v2.py"
    src = (wheels.unpacked("0.5.12.post1") / rel).read_text().splitlines()
    diff = tmp_path / "p.diff"
    diff.write_text(f"--- a/{rel}\n+++ b/{rel}\n@@ -1,1 +1,2 @@\n {src[0]}\n+# local change\n")
    py, _ = patched("pristine", "0.5.9")
    one_line(preflight(py, diff, EAGLE3), f"{rel}: no such file in sglang 0.5.9", "another sglang release")


def test_one_hunk_that_does_not_apply_names_the_hunk_and_the_file(patched, tmp_path):
    py, site = patched("b")
    text = B.read_text().replace("+        # Dynamic speculation disable: above", "+        # Dynamic speculation off: above")
    diff = tmp_path / "p.diff"
    diff.write_text(text)
    one_line(preflight(py, diff, EAGLE3), "hunk @@ -399,6 +399,12 @@", str(site / V2), "line 402",
             "Dynamic speculation off")


def test_a_binary_diff(patched, tmp_path):
    py, _ = patched("b")
    diff = tmp_path / "p.diff"
    diff.write_text("diff --git a/sglang/logo.png b/sglang/logo.png\nindex 1234567..89abcde 100644\n"
                    "GIT binary patch\nliteral 12\nTcmZ?wbhEHbWMt4{_z?g=4\n\nliteral 0\nHcmV?d00001\n\n")
    one_line(preflight(py, diff, EAGLE3), "a binary diff", "GIT binary patch")


def test_a_diff_without_a_hunk(patched, tmp_path):
    py, _ = patched("b")
    diff = tmp_path / "p.diff"
    diff.write_text(f"diff --git a/{V2} b/{V2}\nold mode 100644\nnew mode 100755\n")
    one_line(preflight(py, diff, EAGLE3), "without a hunk")


def test_an_empty_diff(patched, tmp_path):
    py, _ = patched("b")
    diff = tmp_path / "p.diff"
    diff.write_text("")
    one_line(preflight(py, diff, EAGLE3), "not a unified diff (it is empty")


def test_a_diff_of_files_outside_the_engine(patched, tmp_path):
    py, _ = patched("b")
    diff = tmp_path / "p.diff"
    diff.write_text("--- a/docs/notes.md\n+++ b/docs/notes.md\n@@ -1,1 +1,2 @@\n # Notes\n+more\n")
    one_line(preflight(py, diff, EAGLE3), "'docs/notes.md' is not a file of the sglang package")


def test_the_plugin_diff_without_a_plugin_feature_is_outside_the_engine(patched):
    # dsd_plugin/__init__.py is the plugin's own package: only a feature with [plugin] judges it
    py, _ = patched("f")
    one_line(preflight(py, next(PATCHES.glob("f-*.diff")), EAGLE3), "'dsd_plugin/__init__.py' is not a file of the sglang package")
