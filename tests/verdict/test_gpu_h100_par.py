"""Issue 29's matrix on the H100 (tests/fixtures/logs/gpu-h100/0.5.12.post1-par, README there): each case's
server log and the diff's hunks its launch recorded (preflight on the server's interpreter), judged as
launch, watch and prove judge them. The truths come from reading sglang 0.5.12.post1 (gpu/patches/README.md)
and from prove on the same servers, not from dynspec's tables."""
import json
from pathlib import Path

import pytest

from dynspec_cli.knowledge.features import load_feature
from dynspec_cli import engines
from dynspec_cli.run.patchfile import read_diff
from dynspec_cli.verdict.diffclasses import unjudged
from dynspec_cli.verdict.pipeline import Pipeline, record_diff

HERE = Path(__file__).resolve().parents[1] / "fixtures" / "logs" / "gpu-h100" / "0.5.12.post1-par"
PATCHES = Path(__file__).resolve().parents[2] / "gpu" / "patches"


class _Rec:
    def __init__(self, d: dict) -> None:
        self.__dict__.update(d)


def judged(log: str, record: str):
    rec = _Rec(json.loads((HERE / record).read_text()))
    p = Pipeline.for_record(rec, load_feature(rec.feature), engines.get(rec.engine))
    p.feed((HERE / log).read_bytes())
    v = p.final()
    return v, [f.code for f in v.findings]


def test_case_a_marker_and_behaviour_in_the_draft_worker_is_live():
    """The patch sits in EagleDraftWorker.draft, which EAGLEWorkerV2 builds (eagle_worker_v2.py:682): no
    worker class holds it, so the probe's worker line lists it outside the MRO. prove on this server:
    accept 4.00 at batch 1 and 5, 1.00 at 6 and 10 (prove-ma.txt)."""
    v, codes = judged("tiny-ma.log", "record-ma.json")
    assert v.verdict == "live"
    assert "DS310" not in codes
    assert "PROVEN" in (HERE / "prove-ma.txt").read_text()


def test_case_a_first_run_was_stopped_by_a_false_dead_and_is_not_dead_now():
    """The first run of the day: dynspec's launch stopped this working server at the probe's worker line
    (DS310: the draft worker is not in the worker's MRO), 87 s in, before it was ready."""
    v, codes = judged("first-run-tiny-ma.log", "first-run-record-ma.json")
    assert v.verdict != "dead" and "DS310" not in codes


def test_case_c_overridden_announcement_with_its_behaviour_running_is_live():
    """STANDALONE: StandaloneWorkerV2.__init__ never calls EAGLEWorkerV2.__init__ (the marker's method,
    standalone_worker_v2.py:136), but it builds StandaloneDraftWorker(EagleDraftWorker), which inherits
    the patched draft. The probe saw draft called on the scheduler (the warm-up request)."""
    v, codes = judged("tiny-mc.log", "record-mc.json")
    assert v.verdict == "live"
    assert "DS225" in codes and "DS211" not in codes and "DS301" not in codes
    assert v.marker["found"] is False


def test_case_c_first_run_was_called_dead_by_the_marker_method_and_is_not_dead_now():
    v, codes = judged("first-run-tiny-mc.log", "first-run-record-mc.json")
    assert v.verdict != "dead" and "DS211" not in codes


def test_case_e_flags_only_with_its_marker_logged_is_dead():
    """Every hunk in server_args.py: the announcement logs (line 8 of the first run) while nothing acts per
    batch; prove on that server: accept 4.00 at batch 6 and 10 (first-run-prove-me.txt). Launched with
    --no-preflight, so the record's hunks come from the diff's text alone."""
    v, codes = judged("tiny-me.log", "record-me.json")
    assert v.verdict == "dead" and "DS228" in codes
    prove = (HERE / "first-run-prove-me.txt").read_text()
    assert "    6   6           4.00" in prove and "    10   10          4.00" in prove


def test_case_b_with_the_per_hunk_probe_is_live_once_ready():
    """The working patch, launched with --patch: the warm-up request drafts once at batch 1 (below the
    threshold: the branch is not taken), so the function holding the behaviour ran on the scheduler."""
    v, codes = judged("tiny-hunks.log", "record-hunks.json")
    assert v.verdict == "live" and "DS326" in codes and "DS302" in codes


def test_a_record_without_a_diff_judges_as_before():
    rec = json.loads((HERE / "record-hunks.json").read_text())
    assert record_diff(_Rec({**rec, "patch": None})) is None


@pytest.mark.parametrize("name, files", [
    ("e-only-server-args-0.5.12.post1.diff", ["server_args.py"] * 3),
    ("dynamic-spec-disable-0.5.12.post1.diff", ["server_args.py"] * 2 + ["eagle_worker_v2.py"] * 2),
])
def test_hunks_of_a_diff_no_preflight_judged(name, files):
    entries = unjudged(read_diff(str(PATCHES / name)))
    assert [e["file"].rsplit("/", 1)[-1] for e in entries] == files
    assert {(e["role"], e["reach"]) for e in entries} == {("not judged", "unknown")}
    assert entries[0]["file"] == "sglang/srt/server_args.py" and entries[0]["lines"] == [585, 585]


# --- `dynspec verify LOG --patch F.diff` on a machine with the patched sglang installed (the GPU box, where
# benchmark scripts run verify): each hunk is placed against the worker the log shows, as launch's preflight did

def _verify_with_patch(patched_sglang, case: str, log, diff: str):
    import os
    import subprocess
    import sys

    _, site = patched_sglang(case)
    repo = Path(__file__).resolve().parents[2]
    r = subprocess.run([sys.executable, "-m", "dynspec_cli", "verify", "--json", str(HERE / log), "--patch",
                        str(PATCHES / diff)], capture_output=True, text=True, timeout=180, cwd=repo,
                       env=dict(os.environ, PYTHONPATH=f"{repo}{os.pathsep}{site}"))
    d = json.loads(r.stdout.splitlines()[-1] if r.stdout.count("\n{") else r.stdout)
    return r.returncode, d, [f["code"] for f in d["findings"]]


@pytest.fixture(scope="module")
def patched_sglang(tmp_path_factory):
    from tests.preflight.test_preflight_hunks import make_python

    made = {}

    def get(case: str):
        diff = {"a": "a-marker-and-behaviour-in-draft", "c": "dynamic-spec-disable", "d": "d-behaviour-in-v1-draft",
                "e": "e-only-server-args"}[case]
        if case not in made:
            made[case] = make_python(tmp_path_factory.mktemp(f"site-{case}"), "0.5.12.post1",
                                     PATCHES / f"{diff}-0.5.12.post1.diff")
        return made[case]
    return get


@pytest.mark.wheels
def test_verify_with_the_patch_calls_case_c_live_not_dead(patched_sglang):
    rc, d, codes = _verify_with_patch(patched_sglang, "c", "tiny-mc.log", "dynamic-spec-disable-0.5.12.post1.diff")
    assert (rc, d["verdict"]) == (0, "live")
    assert "DS225" in codes and "DS211" not in codes and "DS301" not in codes


@pytest.mark.wheels
def test_verify_with_the_patch_calls_case_e_dead_though_its_marker_logged(patched_sglang):
    rc, d, codes = _verify_with_patch(patched_sglang, "e", "tiny-me.log", "e-only-server-args-0.5.12.post1.diff")
    assert (rc, d["verdict"]) == (1, "dead") and "DS228" in codes


@pytest.mark.wheels
def test_verify_with_the_patch_calls_case_a_live(patched_sglang):
    rc, d, codes = _verify_with_patch(patched_sglang, "a", "tiny-ma.log", "a-marker-and-behaviour-in-draft-0.5.12.post1.diff")
    assert (rc, d["verdict"]) == (0, "live") and "DS310" not in codes


@pytest.mark.wheels
def test_verify_with_the_patch_calls_case_d_dead_from_its_hunks(patched_sglang):
    """Case d of this morning's run (0.5.12.post1-wheel/tiny-md.log): the marker in EAGLEWorkerV2.__init__
    logged, the behaviour sat in EAGLEWorker.draft (V1), which EAGLEWorkerV2 never builds."""
    log = HERE.parent / "0.5.12.post1-wheel" / "tiny-md.log"
    rc, d, codes = _verify_with_patch(patched_sglang, "d", log, "d-behaviour-in-v1-draft-0.5.12.post1.diff")
    assert (rc, d["verdict"]) == (1, "dead") and "DS226" in codes
