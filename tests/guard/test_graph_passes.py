"""sglang:cuda_graph_passes_total read from a real /metrics (the H200 run of sglang 0.5.12.post1,
tests/fixtures/logs/gpu-h200/0.5.12.post1/metrics-after-prove.txt) and a /metrics without it (the
same dump with the counter's lines taken out, which is what releases before 0.5.7 export: their
metrics collector has no such Counter): "not reported", never eager."""
from pathlib import Path

from dynspec_cli import engines
from dynspec_cli.evidence import graph_passes as GP
from dynspec_cli.guard import windows as W
from dynspec_cli.evidence.observation import Decode

REAL = Path(__file__).parents[1] / "fixtures/logs/gpu-h200/0.5.12.post1/metrics-after-prove.txt"
COUNTER = engines.get("sglang").serving.graph_passes  # the counter the engine names


def test_real_metrics_counter_by_mode():
    got = GP.passes(GP.parse_text(REAL.read_text()), COUNTER)
    # read from the file: one scheduler (tp_rank 0, no dp_rank), prefill_none 175, decode_cuda_graph 6232
    assert got == {"": {"prefill_none": 175.0, "decode_cuda_graph": 6232.0}}
    assert GP.decode_split(got[""]) == (6232, 0)


def _without_counter() -> str:
    return "".join(ln for ln in REAL.read_text().splitlines(True) if "cuda_graph_passes" not in ln)


def test_metrics_without_the_counter_is_not_reported():
    series = GP.parse_text(_without_counter())
    assert any(n == "sglang:num_running_reqs" for n, _, _ in series)  # the rest of /metrics is there
    assert GP.passes(series, COUNTER) is None
    assert GP.delta(GP.passes(series, COUNTER), GP.passes(series, COUNTER)) is None
    w = W.Window(1, 0, 10)
    w.ranks = {"": W.RankWindow("")}
    W.judge_graph(w, True)
    assert w.graph["state"] == "not reported" and w.graph["source"] is None
    assert W.reasons([w], 2, 3, claims=False) == []  # no DS709 from missing evidence


def test_deltas_per_rank_and_the_tolerance():
    # issue 31's run: decode_cuda_graph 1764, decode_none 480 at concurrency 8 (21 % eager)
    before = {"": {"decode_cuda_graph": 1000.0, "prefill_none": 10.0}}
    after = {"": {"decode_cuda_graph": 1764.0, "decode_none": 480.0, "prefill_none": 12.0}}
    d = GP.delta(before, after)
    assert d == {"": {"decode_cuda_graph": 764.0, "decode_none": 480.0, "prefill_none": 2.0}}
    w = W.Window(1, 0, 10, passes=d, state="effective")
    W.judge_graph(w, True)
    assert w.graph["state"] == "eager" and w.state == "eager" and w.graph["eager"] == 480
    rs = W.reasons([w], 2, 3, claims=False)
    assert [r.code for r in rs] == ["DS709"] and "480 of 1244 decode passes" in rs[0].message
    assert W.reasons([w], 2, 3, claims=False, accept_eager=True) == []
    # graphs switched off by the user: eager decode is the configured path
    off = W.Window(2, 0, 10, passes=d, state="effective")
    W.judge_graph(off, False)
    assert off.graph["state"] == "eager (graphs off)" and off.state == "effective"
    # a handful of eager passes (the server's own /health_generate) stay within the tolerance
    few = W.Window(3, 0, 10, passes={"": {"decode_cuda_graph": 400.0, "decode_none": 3.0}}, state="effective")
    W.judge_graph(few, True)
    assert few.graph["state"] == "graphs"


def test_log_lines_when_no_counter():
    w = W.Window(1, 0, 10, state="effective")
    w.ranks = {"": W.RankWindow("", decode=[Decode(8, 2.0, cuda_graph=False), Decode(8, 2.0, cuda_graph=False)])}
    W.judge_graph(w, None)  # unknown whether captured, and no graph ran: not a finding
    assert w.graph["state"] == "eager (no graphs seen)" and w.graph["source"] == "log" and w.state == "effective"
    W.judge_graph(w, True)
    assert w.graph["state"] == "eager" and w.graph["unit"] == "lines"
