"""Logs of sglang's REAL launcher (pinned releases, run on this CPU-only machine, recorded with
tests/tools/record_real_logs.py). Each fixture's `expect` was written by a person reading the log
and the release's worker dispatch (verdict, worker class, overlap, and the line that settles it);
dynspec's verdict must agree with that reading. Nothing here is computed from dynspec's tables,
so a wrong table row fails these tests."""
import json
from pathlib import Path

import pytest

from tests.support.logs import judge_text

HERE = Path(__file__).resolve().parent.parent / "fixtures" / "logs" / "real-launcher"
CASES = sorted(HERE.glob("*/*.json"))


def test_recorded_real_logs_exist():
    assert len(CASES) >= 7
    assert {p.parent.name for p in CASES} >= {"0.5.9"}
    for p in CASES:
        exp = json.loads(p.read_text()).get("expect")
        assert exp and exp["verdict"] in ("live", "dead", "crashed", "inconclusive") and exp["settled_by"], p


@pytest.mark.parametrize("meta_path", CASES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_real_launcher_log_verdict(meta_path):
    meta = json.loads(meta_path.read_text())
    exp = meta["expect"]
    v = judge_text(meta_path.with_suffix(".log").read_bytes())
    codes = [f.code for f in v.findings]
    assert v.verdict == exp["verdict"], (exp["settled_by"], codes)
    if exp["worker"] is not None:
        assert v.worker["class"] == exp["worker"], (exp["settled_by"], v.worker)
    if exp["overlap"] is not None and v.overlap_schedule is not None:
        assert v.overlap_schedule == exp["overlap"], exp["settled_by"]
    if meta["exit_code"] not in (0, None):
        assert v.crashed  # every recorded run stops for lack of a GPU: the crash is reported
    if not meta["patched"]:
        assert "DS101" in codes
    if exp["verdict"] == "dead" and meta["patched"]:
        assert "DS201" in codes  # the worker named above is not (a subclass of) EAGLEWorkerV2
    if meta["patched"]:  # (an argparse error says nothing about the release)
        assert v.engine_version is not None and in_span(meta["sglang_version"], v.engine_version)


def in_span(version: str, span: str) -> bool:
    """Is `version` inside a reported span like '0.5.7 – 0.5.10.post1' (or one release)?"""
    from packaging.version import Version

    for part in span.split(", "):
        lo, _, hi = part.partition(" – ")
        if Version(lo) <= Version(version) <= Version(hi or lo):
            return True
    return False
