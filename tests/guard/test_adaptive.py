"""The guard's judgement of sglang's adaptive speculation (engines/sglang/adaptive.py), on Decode batch lines
and controller lines shaped as sglang 0.5.23 logs them. Expected tiers, routes and step-up points
are what a person reads in the 0.5.23 wheel: adaptive_spec_params.py (DEFAULT_ADAPTIVE_CONFIG
"1": [1, 3, 5, 7], "8": [0, 1, 3], "32": [0, 1], "64": [0]; step up from s once the EMA exceeds
s - 0.5; from 0 steps a probe at every update) and arg_groups/cuda_graph_hook.py (with speculation
the batch sizes 1-8, then 10-32 by 2, 40-64 by 4, are captured, and a batch is padded up to one)."""
import json

from dynspec_cli.engines.sglang import adaptive as A
from dynspec_cli.guard import windows as W
from dynspec_cli.knowledge.features import load_feature
from dynspec_cli.engines.sglang.knowledge import knowledge
from dynspec_cli import engines
from dynspec_cli.evidence.observation import Decode
from dynspec_cli.transport.local import LocalHost

FEATURE = load_feature("speculative-adaptive")
DSD = load_feature("dynamic-spec-disable")


def config(argv=("--speculative-adaptive", "--decode-log-interval", "2"), first=(1, 3, 5, 7)):
    cfg, note = A.config_of(FEATURE, knowledge(), "0.5.19 – 0.5.23", list(argv), None, list(first))
    assert note is None, note
    return cfg


def rank(running: int, accept: float, n: int = 12, threshold: int = 100) -> W.RankWindow:
    r = W.RankWindow("", decode=[Decode(running, accept, stable=True) for _ in range(n)])
    W.judge_rank(r, True, threshold, True, None)
    return r


def test_tiers_and_routing_are_sglang_0_5_23s():
    cfg = config()
    assert cfg.tiers == {1: [1, 3, 5, 7], 8: [0, 1, 3], 32: [0, 1], 64: [0]}
    # 7 is captured (no padding): tier 1; 31 pads to 32: tier 32; 61-63 pad to 64; 30 is captured: tier 8
    assert [cfg.tier(b) for b in (1, 7, 8, 30, 31, 33, 60, 61, 64, 200)] == [1, 1, 8, 8, 32, 32, 32, 64, 64, 64]
    plain = config(("--speculative-adaptive", "--disable-cuda-graph-padding"))
    assert plain.tier(31) == 8 and plain.tier(63) == 32  # no padding: the batch's own tier
    own = config(("--speculative-adaptive", "--cuda-graph-bs", "1", "2", "64", "--port", "1"))
    assert own.tier(2) == 1 and own.tier(3) == 64  # the user's own sizes: 3 is padded to 64
    # the init line's first tier tells 0.5.19 (1, 3, 7) from 0.5.20+ (1, 3, 5, 7) inside the version span
    assert config(first=(1, 3, 7)).tiers[1] == [1, 3, 7]


def test_held_at_one_step_while_drafts_are_accepted_is_pinned():
    cfg = config()
    r = rank(2, 1.9)  # 0.9 accepted drafts per request at 1 step: sglang steps up above 0.5
    assert r.state == "effective"
    A.judge(r, A.RankSteps(steps=1, moves=0), cfg)
    assert r.state == "pinned" and r.adaptive["tier"] == 1 and r.adaptive["tier_last"] == 7
    assert "held 1 draft step in tier 1 (batches 1–7; draft steps 1, 3, 5, 7)" in A.pinned_message(r)
    assert "0.90 drafts per request" in A.pinned_message(r) and "above 0.50" in A.pinned_message(r)


def test_what_is_not_pinned():
    cfg = config()
    for steps, moves, accept in ((1, 1, 1.9),   # the controller logged a line in the window: it adapts
                                 (1, 0, 1.55),  # 0.55 accepted: within 0.1 of the step-up point, not judged
                                 (7, 0, 7.5),   # the tier's highest: nowhere to go
                                 (3, 0, 3.0),   # 2.0 accepted at 3 steps: below 2.5, sglang stays
                                 (None, 0, 1.9)):  # steps never seen (and no gauge)
        r = rank(2, accept)
        A.judge(r, A.RankSteps(steps=steps, moves=moves), cfg)
        assert r.state == "effective", (steps, moves, accept)
    r = rank(2, 1.9, n=9)  # 9 lines x 2 batches: fewer than warm-up (10) + two updates (2 x 5)
    A.judge(r, A.RankSteps(steps=1), cfg)
    assert r.state == "effective"
    r = rank(2, 1.9)
    r.num_steps = 1.0  # no controller line known, sglang:spec_num_steps says 1
    A.judge(r, None, cfg)
    assert r.state == "pinned"


def test_zero_steps_without_a_probe_is_pinned_and_the_zero_only_tier_is_plain():
    cfg = config()
    r = rank(10, 1.0)  # tier 8, drafting off: the lines alone read as a collapse
    assert r.state == "collapsed"
    A.judge(r, A.RankSteps(steps=0), cfg)
    assert r.state == "pinned" and "held 0 draft steps (drafting off) in tier 8 (batches 8–31" in A.pinned_message(r)
    r = rank(80, 1.0)  # tier 64 only ever runs 0 steps: off by design
    A.judge(r, A.RankSteps(steps=0), cfg)
    assert r.state == "plain"


def test_pinned_windows_in_a_row_make_the_run_invalid_with_ds708():
    cfg = config()
    ws = []
    for i in (1, 2):
        w = W.Window(i, (i - 1) * 10.0, i * 10.0, ranks={"": W.RankWindow("", decode=[Decode(2, 1.9, stable=True)] * 12)})
        W.judge(w, 3, True, 4.4, A.WindowJudge(cfg, {"": A.RankSteps(steps=1)}))
        ws.append(w)
    assert [w.state for w in ws] == ["pinned", "pinned"]
    reasons = W.reasons(ws, 2, 3)
    assert [(x.code, x.window) for x in reasons] == [("DS708", 1)]


def test_on_level_follows_the_steps_a_rank_ran():
    """A run proven at 5 steps (accept len 4.4) and now at 1 step (at most 2 tokens a verify): 1.9 is
    speculation on, not a mix of on and off passes."""
    cfg = config()
    j = A.WindowJudge(cfg, {"": A.RankSteps(steps=1)})
    assert j.level(W.RankWindow(""), 4.4) == 2.0
    assert A.WindowJudge(cfg, {"": A.RankSteps(steps=1, moves=2)}).level(W.RankWindow(""), 4.4) is None
    w = W.Window(1, 0, 10, ranks={"": W.RankWindow("", decode=[Decode(2, 1.9, stable=True)] * 12)})
    W.judge(w, 3, True, 4.4)
    assert w.ranks[""].state == "undecided"  # without the controller's steps: 1.9 looks like a mix at level 4.4


def test_controller_lines_before_the_benchmark_prime_each_rank():
    log = ("[2026-12-05 12:04:16 DP0] AdaptiveSpeculativeParams initialized: steps=3, candidate_steps=[1, 3, 5, 7]\n"
           "[2026-12-05 12:04:16 DP1] AdaptiveSpeculativeParams initialized: steps=3, candidate_steps=[1, 3, 5, 7]\n"
           "[2026-12-05 12:04:25 DP1] Adaptive spec params updated: steps 3 -> 5 (ema_accept_len=2.60)\n"
           "[2026-12-05 12:04:25 DP1] Switch adaptive runtime state: steps 3 -> 5, draft_tokens 4 -> 6\n")
    t = A.Tracker()
    A.prime(t, engines.of(DSD).classifier(DSD), log)
    assert t.first_tier == [1, 3, 5, 7]
    got = t.cut()
    assert (got["DP0"].steps, got["DP1"].steps) == (3, 5) and got["DP1"].moves == 0  # before the benchmark: no moves
    t.feed("DP1", "adaptive-update", {"old": "5", "new": "3"})  # Adaptive spec params updated: steps 5 -> 3
    t.feed("DP1", "adaptive-switch", {"old": "5", "new": "3"})  # Switch adaptive runtime state: steps 5 -> 3
    got = t.cut()
    assert got["DP1"].steps == 3 and got["DP1"].moves == 2 and t.cut()["DP1"].moves == 0


def test_a_config_file_of_the_users_own_is_read_on_the_host(tmp_path):
    cfg_file = tmp_path / "adaptive.json"
    cfg_file.write_text(json.dumps({"1": {"candidate_steps": [2, 4]}, "16": {"candidate_steps": [0, 2],
                                                                            "up_hysteresis": 0.3},
                                    "update_interval": 7}))
    with LocalHost() as h:
        cfg, note = A.config_of(FEATURE, knowledge(), "0.5.23", ["--speculative-adaptive-config", str(cfg_file)], h)
        assert note is None and cfg.tiers == {1: [2, 4], 16: [0, 2]} and cfg.up_hysteresis == {1: 0.0, 16: 0.3}
        assert cfg.rule.update_interval == 7 and cfg.source == f"--speculative-adaptive-config {cfg_file}"
        cfg, note = A.config_of(FEATURE, knowledge(), "0.5.23", ["--speculative-adaptive-config", "/nonexistent.json"], h)
        assert cfg is None and "cannot read --speculative-adaptive-config /nonexistent.json" in note
