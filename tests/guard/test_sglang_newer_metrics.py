"""sglang's newer serving evidence as the guard reads it: `sglang:spec_num_steps` (the draft steps active
now, per DP rank) and `sglang:spec_verify_calls_total` (tokens per verify = (generated - finished
requests) / verify calls), on a /metrics sample shaped as sglang 0.5.23 exports it; the names and the
per-request `sglext.spec_tokens_details` fields checked against the published 0.5.23 wheel."""
import pytest

from dynspec_cli.guard import windows as W
from dynspec_cli.guard.watch import Guard, Guarded
from dynspec_cli import engines


def sample(t, gen, reqs, verify, steps):
    lb = {"model_name": "m", "dp_rank": "1"}
    return {"t": t, "metrics": [["sglang:generation_tokens_total", lb, gen], ["sglang:num_requests_total", lb, reqs],
                                ["sglang:spec_verify_calls_total", lb, verify], ["sglang:spec_num_steps", lb, steps]]}


def test_num_steps_per_rank_and_tokens_per_verify():
    g = Guard.__new__(Guard)
    g.ranks, g.prev_sample, g.startup_time = ["DP0", "DP1"], None, None
    g.engine = engines.get("sglang")
    g.serving = g.engine.serving
    w = W.Window(1, 0, 10, ranks={r: W.RankWindow(r) for r in g.ranks})
    # 4 requests finished, 404 tokens: 400 from 100 verify passes (the 4 first tokens come from prefill)
    g.metrics(w, Guarded(None), [sample(1.0, 1000, 10, 300, 3), sample(2.0, 1404, 14, 400, 1)])
    assert w.ranks["DP1"].num_steps == 1 and w.ranks["DP0"].num_steps is None
    assert w.counters["sglang:spec_verify_calls_total"] == 100 and w.tokens_per_verify == 4.0
    assert w.ranks["DP1"].to_json()["spec_num_steps"] == 1


@pytest.mark.wheels
def test_the_names_are_sglang_0_5_23s():
    from tests.support import wheels

    root = wheels.unpacked("0.5.23") / "sglang" / "srt"
    collector = (root / "observability" / "metrics_collector.py").read_text()
    assert 'name="sglang:spec_num_steps"' in collector and 'name="sglang:spec_verify_calls_total"' in collector
    protocol = (root / "entrypoints" / "openai" / "protocol.py").read_text()
    assert "return_spec_tokens_details: bool = False" in protocol
    for f in ("spec_accept_length: float", "spec_verify_ct: int", "spec_num_proposed_drafts: int"):
        assert f in protocol
