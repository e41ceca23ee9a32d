"""Probe lines (DYNSPEC-PROBE, schema v1 of dynspec_cli/engines/sglang/probe/README.md) as evidence."""
import json

from tests.support.logs import MARKER, READY, codes, judge_text, ts, warning_text


def probe(event, pid, role="scheduler", rank=None, **kw):
    doc = {"v": 1, "event": event, "ts": 1.0, "pid": pid, "ppid": 1, "role": role, **kw}
    if rank is not None:
        doc["rank"] = {"tp": rank}
    return "DYNSPEC-PROBE " + json.dumps(doc)


def worker(pid, rank, cls="EAGLEWorkerV2", in_mro=True):
    return probe("worker", pid, rank=rank, **{"class": f"sglang.srt.speculative.eagle_worker_v2.{cls}",
                                              "module": "sglang.srt.speculative.eagle_worker_v2", "mro": [cls, "BaseSpecWorker"],
                                              "patched_in_mro": [{"class": "EAGLEWorkerV2", "in_mro": in_mro}]})


def launch(*, hits=(0, 1), ranks=(0, 1), marker=True, ready=True, in_mro=True):
    lines = [probe("start", 10, role="launcher"), probe("sglang", 10, role="launcher", version="0.5.9"),
             warning_text("spec-v2-on")]
    for r in ranks:
        pid = 100 + r
        lines.append(probe("module", pid, rank=r, module="sglang.srt.speculative.eagle_worker_v2", file="/x.py",
                           targets=[{"target": 0, "status": "instrumented", "function": "EAGLEWorkerV2.__init__"}]))
        lines.append(worker(pid, r, in_mro=in_mro))
        if r in hits:
            lines.append(probe("hit", pid, rank=r, target=0, function="EAGLEWorkerV2.__init__", calls=1))
        if marker:
            lines.append(ts(MARKER, f"TP{r}"))
    if ready:
        lines.append(READY)
    return "\n".join(lines) + "\n"


def test_probe_proof_on_every_rank_is_live_with_per_rank_detail():
    v = judge_text(launch())
    assert v.verdict == "live"
    assert v.engine_version == "0.5.9"  # the server's own process said so
    assert v.probe["proven"] and [r["hits"] for r in v.probe["ranks"] if r["role"] == "scheduler"] == [1, 1]
    assert v.worker["basis"].startswith("probe")


def test_marker_without_probe_hit_on_a_rank_is_not_live():
    v = judge_text(launch(hits=(0,)))
    assert v.verdict == "dead" and "DS312" in codes(v)
    v = judge_text(launch(hits=(0,), ready=False))
    assert v.verdict == "inconclusive"


def test_probe_worker_without_patch_in_mro_is_dead_at_once():
    v = judge_text(launch(in_mro=False, marker=False, ready=False, hits=()))
    assert v.verdict == "dead" and "DS310" in codes(v)


def test_probe_reports_other_file():
    text = launch().replace('"status": "instrumented"', '"status": "other-file", "file": "/patched/eagle_worker_v2.py"', 1)
    v = judge_text(text)
    assert "DS311" in codes(v) and v.verdict == "dead"


def test_uninstrumented_probe_falls_back_to_the_marker():
    text = launch().replace('"status": "instrumented"', '"status": "unresolved"')
    v = judge_text(text.replace('"event": "hit"', '"event": "noop"'))
    assert v.verdict == "live" and "DS313" in codes(v)


def test_malformed_probe_lines_are_ignored():
    v = judge_text("DYNSPEC-PROBE {not json\nDYNSPEC-PROBE [1,2]\n" + warning_text("overlap-off-spec-v2-off") + "\n")
    assert v.verdict == "dead"


def test_probe_line_after_another_process_partial_line_is_read():
    text = launch().replace("DYNSPEC-PROBE {\"v\": 1, \"event\": \"sglang\"", "partial outDYNSPEC-PROBE {\"v\": 1, \"event\": \"sglang\"", 1)
    assert "partial outDYNSPEC-PROBE" in text
    v = judge_text(text)
    assert v.engine_version == "0.5.9" and v.verdict == "live"
