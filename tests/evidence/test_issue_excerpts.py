"""Real log excerpts quoted from public sglang issue threads (tests/fixtures/logs/issues/):
the facts each excerpt shows, read by a person, must be what dynspec reads."""
import json
from pathlib import Path

import pytest

from tests.support.logs import judge_text

HERE = Path(__file__).resolve().parent.parent / "fixtures" / "logs" / "issues"
CASES = sorted(HERE.glob("*.json"))


def test_there_are_real_excerpts():
    assert len(CASES) >= 15


@pytest.mark.parametrize("meta", CASES, ids=lambda p: p.stem)
def test_excerpt_facts(meta):
    exp = json.loads(meta.read_text())["expected"]
    v = judge_text(meta.with_suffix(".log").read_bytes())
    if exp.get("crashed") is not None:
        assert v.crashed == exp["crashed"]
    if exp.get("server_ready") is not None:
        assert v.server_ready == exp["server_ready"]
    if exp.get("crash_exception"):
        names = {v.crash["exception"].rsplit(".", 1)[-1]} if v.crash else set()
        assert exp["crash_exception"].rsplit(".", 1)[-1] in names | {"SchedulerException"}
    if exp.get("has_decode_accept_len") is not None:
        la = v.launch
        has = bool(la.get("last_decode") and "accept_len" in la["last_decode"])
        assert has == exp["has_decode_accept_len"] or (exp["has_decode_accept_len"] and la["decode_lines"] == 0)
    if v.overlap_schedule is not None and exp.get("overlap_schedule") is not None:
        assert v.overlap_schedule == exp["overlap_schedule"]
    # never live without the marker, and no excerpt carries the feature's marker
    assert v.verdict != "live"
