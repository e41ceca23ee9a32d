"""Logs of sglang's REAL launcher (pinned releases, run on this CPU-only machine, recorded with
tests/tools/record_real_logs.py): dynspec's verdict must be what the release's own behaviour
(the knowledge tables, applied to the recorded command and env) implies."""
import json
from pathlib import Path

import pytest

from dynspec_cli.knowledge.sglang import knowledge
from dynspec_cli.verdict.preflight import flag_values
from tests.support.logs import judge_text

HERE = Path(__file__).resolve().parent.parent / "fixtures" / "logs" / "real-launcher"
CASES = sorted(HERE.glob("*/*.json"))


def test_recorded_real_logs_exist():
    assert len(CASES) >= 7
    assert {p.parent.name for p in CASES} >= {"0.5.9"}


def expected(meta: dict) -> tuple[str, str | None]:
    """(verdict, worker class) that the recorded release must produce for this command."""
    k = knowledge()
    argv = meta["argv"]
    flags = flag_values(argv[argv.index("sglang.launch_server") + 1:])
    if not meta["patched"]:
        return "dead", None  # the feature's flag is rejected: not this sglang's patch
    algo = flags["--speculative-algorithm"]
    topk = int(flags["--speculative-eagle-topk"]) if "--speculative-eagle-topk" in flags else None
    out = k.resolve_overlap(meta["sglang_version"], algo, env=meta["env_delta"], flags=set(),
                            user_disable=bool(flags.get("--disable-overlap-schedule")), topk=topk)
    w = k.worker(meta["sglang_version"], algo, out.overlap, False)
    if "EAGLEWorkerV2" not in k.mro(meta["sglang_version"], w.cls):
        return "dead", w.cls
    return "crashed", w.cls  # on the patched path, then stopped by the missing GPU stack


@pytest.mark.parametrize("meta_path", CASES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_real_launcher_log_verdict(meta_path):
    meta = json.loads(meta_path.read_text())
    log = meta_path.with_suffix(".log").read_bytes()
    v = judge_text(log)
    want_verdict, want_worker = expected(meta)
    assert v.verdict == want_verdict, [f.code for f in v.findings]
    if want_worker is not None and v.worker["class"] is not None:
        assert v.worker["class"] in (want_worker, "EAGLEWorker", "EAGLEWorkerV2")
        k = knowledge()
        # the named class is the expected one or a base class of it (StandaloneWorker is an EAGLEWorker)
        assert v.worker["class"] in k.mro(meta["sglang_version"], want_worker)
    if want_verdict == "crashed" or meta["exit_code"] not in (0, None):
        assert v.crashed  # every recorded run stops for lack of a GPU: the crash is reported
    if not meta["patched"]:
        assert "DS101" in [f.code for f in v.findings]
    if meta["patched"]:  # (an argparse error says nothing about the release)
        assert v.sglang_version is not None and in_span(meta["sglang_version"], v.sglang_version)


def in_span(version: str, span: str) -> bool:
    """Is `version` inside a reported span like '0.5.7 – 0.5.10.post1' (or one release)?"""
    rel = knowledge().releases
    for part in span.split(", "):
        lo, _, hi = part.partition(" – ")
        if rel.index(lo) <= rel.index(version) <= rel.index(hi or lo):
            return True
    return False
