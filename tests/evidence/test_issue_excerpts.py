"""Real log excerpts quoted from public sglang issue threads (tests/fixtures/logs/issues/):
the facts each excerpt shows, read by a person, must be what dynspec reads.

The labels (`expected` in each JSON) were written by reading the excerpt, never from dynspec's
tables. A claim is compared exactly, null included: dynspec must not claim what the excerpt does
not show (a wrong claim is worse than silence), and must claim what it does show."""
import json
from pathlib import Path

import pytest

from tests.support.logs import judge_text

HERE = Path(__file__).resolve().parent.parent / "fixtures" / "logs" / "issues"
CASES = sorted(HERE.glob("*.json"))
CLAIMS = ("crashed", "server_ready", "speculative_algorithm")


def _load(meta: Path):
    exp = json.loads(meta.read_text())["expected"]
    return exp, judge_text(meta.with_suffix(".log").read_bytes())


def test_there_are_real_excerpts():
    assert len(CASES) >= 67  # 30 from the first collection, 37 from issue 12's
    assert len({json.loads(p.read_text())["source_url"] for p in CASES}) >= 55


@pytest.mark.parametrize("meta", CASES, ids=lambda p: p.stem)
def test_excerpt_facts(meta):
    exp, v = _load(meta)
    if exp.get("crash_exception"):
        names = {v.crash["exception"].rsplit(".", 1)[-1]} if v.crash else set()
        assert exp["crash_exception"].rsplit(".", 1)[-1] in names | {"SchedulerException"}
    if exp.get("has_decode_accept_len") is not None:
        la = v.launch
        has = bool(la.get("last_decode") and "accept_len" in la["last_decode"])
        assert has == exp["has_decode_accept_len"] or (exp["has_decode_accept_len"] and la["decode_lines"] == 0)
    assert v.overlap_schedule == exp.get("overlap_schedule")
    # never live without the marker, and no excerpt carries the feature's marker
    assert v.verdict != "live"


@pytest.mark.parametrize("meta", CASES, ids=lambda p: p.stem)
def test_excerpt_claims(meta):
    exp, v = _load(meta)
    claims = v.to_json()["claims"]
    for name in CLAIMS:
        assert claims[name]["value"] == exp.get(name), f"{name}: {claims[name]}"
    assert claims["worker"]["value"] == exp.get("worker_class"), claims["worker"]
    if "speculative" in exp:  # labelled from issue 19 on
        assert claims["speculative"]["value"] == exp["speculative"], claims["speculative"]
    if exp.get("worker_module"):
        assert v.worker["module"] == exp["worker_module"]
    # a crash that dynspec proves is also the top-level verdict
    if exp.get("crashed"):
        assert v.crashed and v.verdict in ("crashed", "dead")


@pytest.mark.parametrize("meta", CASES, ids=lambda p: p.stem)
def test_every_claim_names_its_line(meta):
    _, v = _load(meta)
    lines = meta.with_suffix(".log").read_bytes().decode("utf-8", "replace").split("\n")
    for name, c in v.to_json()["claims"].items():
        if c["value"] is None:
            continue
        assert isinstance(c["line"], int) and c["basis"], (name, c)
        assert lines[c["line"] - 1].rstrip("\r").startswith(c["text"].rstrip("…")), (name, c)


@pytest.mark.parametrize("meta", [m for m in CASES if json.loads(m.read_text())["expected"].get("requested")],
                         ids=lambda p: p.stem)
def test_launch_command_flags_are_requested(meta):
    exp, v = _load(meta)
    got = v.to_json()["requested"]
    assert got is not None and isinstance(got["line"], int)
    for dest, value in exp["requested"].items():
        assert got["flags"][dest]["requested"] == value


def test_labels_name_every_claim_somewhere():
    """The collection exercises each claim both ways it can be proven."""
    seen = {(k, json.loads(m.read_text())["expected"].get(k)) for m in CASES for k in CLAIMS}
    for want in [("crashed", True), ("crashed", False), ("server_ready", False)]:
        assert want in seen
    algos = {json.loads(m.read_text())["expected"].get("speculative_algorithm") for m in CASES}
    workers = {json.loads(m.read_text())["expected"].get("worker_class") for m in CASES}
    assert {"EAGLE", "STANDALONE", "NGRAM"} <= algos
    assert {"EAGLEWorker", "EAGLEWorkerV2", "NGRAMWorker", "MultiLayerEagleWorkerV2"} <= workers
