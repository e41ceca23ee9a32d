"""Per-step and overall decisions on synthetic observations: the running batch of the Decode batch
lines decides (not the client concurrency), lines spanning a batch change are not judged, and each
outcome has its exit code."""
from dynspec_cli.verdict import decision
from dynspec_cli.verdict.decision import Step, conclude, judge_step
from dynspec_cli.evidence.observation import Decode
from dynspec_cli.prove.observations import mark_stable

TH = 5


def step(index, concurrency, lines, **kw):
    ds = [Decode(r, a) for r, a in lines]
    mark_stable(ds)
    s = Step(index, concurrency, decode=ds, requests_ok=kw.pop("requests_ok", 10), **kw)
    judge_step(s, TH, True)
    return s


def proven_steps():
    return [step(1, 1, [(1, 2.8)] * 5), step(2, 5, [(5, 2.6)] * 5),
            step(3, 6, [(6, 1.0)] * 5), step(4, 10, [(10, 1.0)] * 5)]


def test_behaving_feature_is_proven():
    c = conclude(proven_steps(), TH, True, verdict="live")
    assert (c.outcome, c.exit_code) == ("proven", 0)
    assert "on at running batch 1, 5" in c.message and "off at 6, 10" in c.message


def test_running_batch_not_concurrency_decides():
    # 8 clients, but the server held at most 5 (e.g. max_running_requests): on at 5 is right
    s = step(1, 8, [(5, 2.7)] * 6)
    assert s.outcome == "pass" and s.expected == "on" and s.running_mode == 5


def test_a_line_spanning_a_batch_change_is_not_judged():
    # the 6 right after the 5s still averages steps taken at batch 5
    s = step(3, 6, [(5, 2.7), (5, 2.6), (5, 2.5), (6, 2.2), (6, 1.0), (6, 1.0), (6, 1.0)])
    g6 = next(g for g in s.groups if g.running == 6)
    assert g6.lines == 4 and g6.stable == 3 and g6.on is False
    assert s.outcome == "pass" and s.speculation == "on@5 off@6"


def test_speculation_above_threshold_fails():
    steps = proven_steps()
    steps[3] = step(4, 10, [(10, 2.4)] * 5)
    c = conclude(steps, TH, True, verdict="live")
    assert c.exit_code == 1 and "running batch 10" in c.message and "stayed on" in c.message


def test_no_speculation_at_all_is_named():
    steps = [step(1, 1, [(1, None)] * 4), step(2, 6, [(6, None)] * 4)]
    c = conclude(steps, TH, True, verdict="dead")
    assert c.exit_code == 1 and "never turned on" in c.message
    steps = [step(1, 1, [(1, 1.0)] * 4), step(2, 6, [(6, 1.0)] * 4)]  # accept prob 0: len 1.00
    assert "never turned on" in conclude(steps, TH, True, verdict="live").message


def test_batch_never_above_threshold_is_inconclusive_with_a_hint():
    steps = [step(1, 1, [(1, 2.8)] * 4), step(2, 6, [(5, 2.7)] * 4)]
    c = conclude(steps, TH, True, verdict="live")
    assert c.exit_code == 3 and "never exceeded" in c.message and "largest seen: 5" in c.message
    assert "concurrency" in c.hint
    c = conclude(steps, TH, True, verdict="live", max_running=5)
    assert "--max-running-requests" in c.hint


def test_no_step_below_is_inconclusive():
    c = conclude([step(1, 6, [(6, 1.0)] * 4)], TH, True, verdict="live")
    assert c.exit_code == 3 and "<= 5" in c.message
    # a feature that promises nothing below the threshold needs only the upper side
    s = Step(1, 6, decode=[Decode(6, 1.0), Decode(6, 1.0), Decode(6, 1.0)])
    mark_stable(s.decode)
    judge_step(s, TH, False)
    assert conclude([s], TH, False, verdict="live").exit_code == 0


def test_died_outranks_everything_and_verdict_gates_proven():
    assert conclude(proven_steps(), TH, True, verdict="live", died="gone").exit_code == 4
    assert conclude(proven_steps(), TH, True, verdict="dead").exit_code == 1
    c = conclude(proven_steps(), TH, True, verdict="inconclusive")
    assert c.exit_code == 3 and "not live" in c.message


def test_meta_info_only_judges_steps_that_cannot_exceed_the_threshold():
    below = Step(1, 3, requests_ok=4, tokens_per_verify=2.6)
    judge_step(below, TH, True)
    assert below.outcome == "pass" and below.groups[0].source == "meta_info"
    above = Step(2, 9, requests_ok=4, tokens_per_verify=1.0)
    judge_step(above, TH, True)
    assert above.outcome == "inconclusive" and "unknown" in above.note
    assert conclude([below, above], TH, True, verdict="live").exit_code == 3


def test_epsilon_boundary():
    assert step(1, 1, [(1, 1 + decision.EPS)] * 3).speculation == "off"
    assert step(1, 1, [(1, 1 + decision.EPS + 0.01)] * 3).speculation == "on"


def test_a_mixed_line_above_the_threshold_is_too_little_evidence():
    # a 4 s run of 32-token requests on the stand-in (threshold 5, log interval 40): at batch 6
    # the lines read 1.11, 1.10, 1.32, 1.08 (requests finishing dip the batch to 5, where the
    # feature speculates again), against 2.75 at batch 1
    steps = [step(1, 1, [(1, 2.75), (1, 2.62), (1, 2.67), (1, 2.25)]), step(2, 5, [(5, 2.74), (5, 2.83), (5, 2.67)]),
             step(3, 6, [(6, 1.11), (6, 1.1), (6, 1.32), (6, 1.08)]), step(4, 10, [(10, 1.01), (10, 1.02), (10, 1.0)])]
    c = conclude(steps, TH, True, verdict="live")
    assert (c.outcome, c.exit_code) == ("inconclusive", 3), c.message
    assert c.message.startswith("too little evidence at running batch 6 (> threshold 5): accept len 1.10 is a mix")
    assert "--duration" in c.hint and steps[2].outcome == "inconclusive"
    # a feature that ignores the threshold reads as high at 6 as below it: that is a failure
    steps[2] = step(3, 6, [(6, 2.6), (6, 2.7), (6, 2.55), (6, 2.66)])
    c = conclude(steps, TH, True, verdict="live")
    assert c.exit_code == 1 and "at running batch 6" in c.message and "stayed on" in c.message


def test_one_line_decides_nothing():
    steps = [step(1, 1, [(1, 2.8)] * 4), step(2, 6, [(6, 2.5)]), step(3, 10, [(10, 1.0)] * 4)]
    assert steps[1].groups[0].why == "1 line" and steps[1].outcome == "inconclusive"
    c = conclude(steps, TH, True, verdict="live")
    assert c.exit_code == 3 and c.message.startswith("too little evidence at running batch 6") and "1 line" in c.message
