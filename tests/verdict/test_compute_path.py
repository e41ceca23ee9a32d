"""The decode compute path (issue 31): which CUDA graphs a launch captured and which Decode batch
lines ran eager, from real logs; and preflight's prediction of the running batch above which
decode runs eager. Expected values come from reading the logs (grep of `cuda graph:` by
`#running-req`, the capture lines) and sglang's code (cuda_graph_runner.py can_run,
server_args.py _generate_cuda_graph_batch_sizes), never from dynspec's tables."""
import json
from pathlib import Path

import pytest

from dynspec_cli.knowledge.features import load_feature
from dynspec_cli.engines.sglang import preflight
from tests.support.logs import codes, judge_text
from tests.verdict.test_preflight_policy import FLAGS, facts

LOGS = Path(__file__).resolve().parent.parent / "fixtures" / "logs"
H200 = LOGS / "gpu-h200" / "0.5.12.post1"
H100 = LOGS / "gpu-h100" / "0.5.12.post1-adaptive"


def test_a_server_that_decodes_in_graphs():
    """live-probe.log: 'Capture cuda graph bs [1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 14, 16]' (line 40),
    the draft's and draft-extend's capture lines, and every Decode batch line 'cuda graph: True'."""
    v = judge_text((H200 / "live-probe.log").read_bytes())
    cp = v.to_json()["compute_path"]
    assert v.verdict == "live"
    assert (cp["target_captured"], cp["draft_captured"], cp["draft_extend_captured"]) == (True, True, True)
    assert cp["captured_bs"] == [1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 14, 16] and cp["captured_max_bs"] == 16
    assert cp["graph_batches"] == {"1": 39, "4": 78, "5": 30, "6": 45, "10": 41}
    assert cp["eager_batches"] == {} and cp["graphs_disabled"] is False
    assert cp["tokens_per_request_in_verify"] == 4  # speculative_num_draft_tokens=4 in its server_args
    assert not {"DS316", "DS317"} & set(codes(v))


@pytest.mark.parametrize("log, eager", [
    ("tiny-adaptive.log", {"1": 38, "2": 160, "5": 18, "6": 51, "10": 64}),
    ("tiny-pinned.log", {"1": 102, "2": 182, "5": 36, "6": 51, "10": 51}),
])
def test_graphs_disabled_by_the_user_is_info_not_the_eager_finding(log, eager):
    """The H100 adaptive runs passed --disable-cuda-graph (server_args disable_cuda_graph=True): no
    'Capture cuda graph' line for the target (only the piecewise prefill graph), every Decode batch
    line 'cuda graph: False'. That is the user's choice (DS317, info), not graphs unused (DS316)."""
    v = judge_text((H100 / log).read_bytes())
    cp = v.to_json()["compute_path"]
    assert v.verdict == "live"  # unchanged: the compute path never changes the verdict
    assert "DS317" in codes(v) and "DS316" not in codes(v)
    ds317 = next(f for f in v.findings if f.code == "DS317")
    assert ds317.severity == "info" and ds317.line == 12 and "disable_cuda_graph=True" in ds317.message
    assert cp["graphs_disabled"] is True and cp["target_captured"] is False
    assert cp["captured_max_bs"] is None  # server_args still lists sizes; none were captured
    assert cp["eager_batches"] == eager and cp["graph_batches"] == {}


EXCERPTS = sorted(p for p in (LOGS / "issues").glob("*.json") if "expected_compute_path" in json.loads(p.read_text()))


def test_there_are_compute_path_excerpts():
    assert len(EXCERPTS) >= 2


@pytest.mark.parametrize("meta", EXCERPTS, ids=lambda p: p.stem)
def test_excerpt_compute_path(meta):
    exp = json.loads(meta.read_text())["expected_compute_path"]
    v = judge_text(meta.with_suffix(".log").read_bytes())
    cp = v.to_json()["compute_path"]
    for key, value in exp.items():
        assert cp[key] == value, key
    # neither excerpt shows both captured graphs and eager decode: no eager finding
    assert "DS316" not in codes(v)


def test_eager_batches_above_the_captured_maximum():
    """#33483's capture lines (decode graphs up to batch 32) followed by #13023's Decode batch lines
    (eager at 46 and 36, graphs at 28 and below), two real excerpts put together: the eager finding
    names exactly the batches above 32, the largest captured size and where it was read."""
    issues = LOGS / "issues"
    text = (issues / "96-capture-target-decode-graph-bs-list.log").read_text() + \
        (issues / "95-decode-graph-and-eager-by-running-batch.log").read_text()
    alone = judge_text((issues / "95-decode-graph-and-eager-by-running-batch.log").read_bytes())
    v = judge_text(text)
    (f,) = [f for f in v.findings if f.code == "DS316"]
    assert f.severity == "warning"
    assert "at running batch 36, 46, above the largest captured batch size 32" in f.message
    assert "28" not in f.message.split("above")[0]  # the batches that ran in graphs are not named
    assert f.line == 4 and "cuda graph: False" in f.text  # the last eager line (the 36 one)
    assert "--max-running-requests 32" in f.fix
    assert v.verdict == alone.verdict  # the verdict does not move


def test_a_decode_excerpt_without_capture_evidence_is_no_finding():
    """Eager lines alone do not say graphs were captured (the user may have disabled them): no finding."""
    v = judge_text((LOGS / "issues" / "95-decode-graph-and-eager-by-running-batch.log").read_bytes())
    assert not {"DS316", "DS317"} & set(codes(v))


# --- preflight -------------------------------------------------------------------------------
def _preflight(version, extra):
    return preflight.judge(facts(version), load_feature(None), FLAGS + extra, {})


MEASURED = ["--speculative-num-steps", "3", "--speculative-num-draft-tokens", "4", "--cuda-graph-max-bs", "4"]


def test_preflight_predicts_the_measured_eager_threshold():
    """Issue 31's measurement: sglang 0.5.12.post1, EAGLE3 topk 1, 4 draft tokens, --cuda-graph-max-bs 4:
    concurrency 2 decoded in graphs, concurrency 8 eager. 0.5.12.post1 _generate_cuda_graph_batch_sizes
    (speculative: range(1, 9) ... filtered to <= 4) captures [1, 2, 3, 4]; can_run takes bs <= 4."""
    r = _preflight("0.5.12.post1", MEASURED)
    cp = r["compute_path"]
    assert cp["graphs"] == "captured" and cp["captured_bs"] == [1, 2, 3, 4]
    assert cp["eager_above"] == 4 and 2 <= cp["eager_above"] < 8
    assert cp["tokens_per_request_in_verify"] == 4
    (f,) = [f for f in r["findings"] if f["code"] == "DS318"]
    assert "up to 4 running requests" in f["message"] and "above 4 it runs eager" in f["message"]
    assert "verify feeds 4 tokens" in f["message"] and "16 tokens" in f["message"]
    assert r["verdict"] == "reachable"  # a prediction about speed, not about the patch


@pytest.mark.parametrize("version, max_bs, top", [
    ("0.5.9", 50, 48),   # no append: the speculative list ... 40, 44, 48, 52 stops at 48
    ("0.5.10", 50, 50),  # 0.5.10+ appends cuda_graph_max_bs itself
])
def test_a_maximum_between_two_sizes(version, max_bs, top):
    flags = ["--cuda-graph-max-bs", str(max_bs), "--max-running-requests", "64"]
    assert _preflight(version, flags)["compute_path"]["eager_above"] == top


def test_a_capped_running_batch_never_leaves_the_graphs():
    """--max-running-requests 4 with graphs up to 4: the batch cannot exceed them, nothing to warn."""
    r = _preflight("0.5.12.post1", MEASURED + ["--max-running-requests", "4"])
    assert r["compute_path"]["eager_above"] == 4 and "DS318" not in [f["code"] for f in r["findings"]]


def test_preflight_disabled_graphs():
    r = _preflight("0.5.12.post1", ["--disable-cuda-graph"])
    assert r["compute_path"]["graphs"] == "disabled" and r["compute_path"]["eager_above"] == 0
    assert [f["severity"] for f in r["findings"] if f["code"] == "DS317"] == ["info"]


def test_renamed_flags():
    """0.5.16 server_args.py: --cuda-graph-max-bs is DeprecatedAliasStoreAction(dest=cuda_graph_max_bs_decode);
    0.5.23 has no such option and two longer ones (-decode, -prefill): argparse calls it ambiguous."""
    old = _preflight("0.5.16", ["--cuda-graph-max-bs", "4"])
    assert old["compute_path"]["eager_above"] == 4
    assert any(f["code"] == "DS319" and "deprecated alias of --cuda-graph-max-bs-decode" in f["message"] for f in old["findings"])
    new = _preflight("0.5.23", ["--cuda-graph-max-bs", "4"])
    assert new["compute_path"]["eager_above"] is None  # the flag sets nothing: the default applies
    assert any(f["code"] == "DS319" and "ambiguous prefix" in f["message"] for f in new["findings"])
    assert _preflight("0.5.23", ["--cuda-graph-max-bs-decode", "4"])["compute_path"]["eager_above"] == 4


def test_no_maximum_given_is_not_predicted():
    cp = _preflight("0.5.12.post1", [])["compute_path"]
    assert cp["eager_above"] is None and "GPU's memory" in cp["basis"]
