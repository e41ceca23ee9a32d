"""The feature's effect is evidence (issue 29 item 4): the server's own `Decode batch` lines, speculation on or off
by `#running-req` against the feature's threshold, decided as `prove` decides a step (verdict/decision.py).

Every log is the real recorded log of a real sglang 0.5.12.post1 server running dynamic-spec-disable with
threshold 5 (tests/fixtures/logs/gpu-h200/0.5.12.post1/live-probe.log: the crafted EAGLE3 draft always agrees
with the target, so speculation on reads `accept len: 4.00, accept rate: 1.00` and off `accept len: 1.00, accept
rate: 0.00`; prove drove it at running batch 1, 5, 6 and 10). Where a test edits it, only what the comment says
is changed. Expected values were read off the lines by a person.
"""
import json
import re
import subprocess
import sys
from pathlib import Path

from dynspec_cli.knowledge.features import load_feature
from dynspec_cli.verdict import decision
from dynspec_cli.prove.observations import LogReader

LIVE = Path(__file__).resolve().parents[1] / "fixtures" / "logs" / "gpu-h200" / "0.5.12.post1" / "live-probe.log"
MARKER = "Dynamic speculation disable enabled: threshold=5"
OFF = "accept len: 1.00, accept rate: 0.00"
ON = "accept len: 4.00, accept rate: 1.00"


def recorded() -> list[str]:
    return LIVE.read_bytes().decode("utf-8").split("\n")  # (bytes: tqdm's \r is not a line end)


def verify(tmp_path, lines: list[str], *args: str) -> tuple[int, dict]:
    log = tmp_path / "server.log"
    log.write_bytes("\n".join(lines).encode("utf-8"))
    p = subprocess.run([sys.executable, "-m", "dynspec_cli", "verify", str(log), "--json", *args],
                       capture_output=True, text=True, timeout=60)
    return p.returncode, json.loads(p.stdout)


def speculating_above_threshold() -> tuple[list[str], list[int]]:
    """Issue 29's false live: the marker in EAGLEWorkerV2.__init__ logged, the behaviour hunk sat in
    EAGLEWorker.draft (not run at topk 1), and the real server printed `#running-req: 10 ... accept len: 4.00`
    with threshold 5. Here: the recorded lines at running batch 6 and 10 with speculation on, i.e. with the
    numbers the same server printed at batch 1-5 (4.00 / 1.00) in place of 1.00 / 0.00. Nothing else changes."""
    out, changed = [], []
    for i, ln in enumerate(recorded(), 1):
        m = re.search(r"Decode batch, #running-req: (\d+),", ln)
        if m and int(m.group(1)) > 5 and OFF in ln:
            ln = ln.replace(OFF, ON)
            changed.append(i)
        out.append(ln)
    return out, changed


def plain(lines: list[str]) -> list[str]:
    """The same server without dynspec's probe: its DYNSPEC-PROBE lines removed (what `--no-probe` writes)."""
    return [ln for ln in lines if not ln.startswith("DYNSPEC-PROBE ")]


def test_the_recorded_log_shows_the_effect_with_its_marker(tmp_path):
    rc, d = verify(tmp_path, recorded())
    assert (rc, d["verdict"]) == (0, "live")
    ev = d["evidence"]
    assert ev["marker"] == "logged" and ev["verdict_from"] == ["marker", "effect", "probe"]
    e = ev["effect"]
    assert (e["state"], e["threshold"], e["threshold_from"]) == ("visible", 5, "marker")
    assert e["speculation_on_at"] == [1, 4, 5] and e["speculation_off_at"] == [6, 10]
    # line 583's single 'accept len: 2.07' at batch 6 (a log interval that mixed batch 5 and 6) decides nothing
    assert e["contradicting"] == []


def test_speculating_above_the_threshold_is_dead_though_the_marker_logged(tmp_path):
    lines, changed = speculating_above_threshold()
    assert len(changed) == 44 + 41  # batch 6: 44 lines at 1.00, batch 10: 41 (the recorded log's counts)
    for text in (lines, plain(lines)):  # with the probe (it saw EAGLEWorkerV2.__init__ run) and without
        changed = [i for i, ln in enumerate(text, 1) if ON in ln and re.search(r"#running-req: (6|10),", ln)]
        rc, d = verify(tmp_path, text)
        assert (rc, d["verdict"]) == (1, "dead"), d["findings"]
        f = next(f for f in d["findings"] if f["code"] == "DS321")
        assert f["severity"] == "error" and "the marker ran, but the behaviour did not" in f["message"]
        assert "> threshold 5" in f["message"] and "accept len 4.00" in f["message"]
        assert f["line"] in changed and f["text"] == text[f["line"] - 1]
        e = d["evidence"]["effect"]
        assert e["state"] == "contradicted" and d["evidence"]["verdict_from"] == ["effect"]
        assert {c["running"] for c in e["contradicting"]} == {6, 10}
        assert all(n in changed for c in e["contradicting"] for n in c["line_numbers"])
        assert d["marker"]["found"] is True  # the marker is still reported as what it is


def test_prove_decides_the_same_lines_the_same_way():
    """verify and prove share the decision: prove's judge_step on the same Decode batch lines fails at the same
    batches (speculation on above the threshold), and passes on the recorded ones."""
    feature = load_feature("dynamic-spec-disable")
    lines, _ = speculating_above_threshold()
    for text, failing in (("\n".join(lines), {6, 10}), ("\n".join(recorded()), set())):
        s = decision.Step(1, 10, decode=LogReader(feature).read(text.encode("utf-8"), 0).decode)
        decision.judge_step(s, 5, True, decision.on_level([s], 5))
        assert {g.running for g in s.evaluated if g.passed is False} == failing


def test_a_silent_marker_with_the_effect_visible_is_live(tmp_path):
    """Issue 29's false dead: the announcement did not run (a worker that overrides its method without calling
    it), the behaviour did. Here: the recorded log without its marker line (54) and without the probe."""
    lines = [ln for ln in plain(recorded()) if MARKER not in ln]
    assert len(lines) == len(recorded()) - 17 - 1
    rc, d = verify(tmp_path, lines)
    assert (rc, d["verdict"]) == (0, "live"), d["findings"]
    codes = [f["code"] for f in d["findings"]]
    assert "DS301" not in codes and "DS322" in codes
    f = next(f for f in d["findings"] if f["code"] == "DS322")
    assert "The announcement is silent" in f["message"] and "off at 6, 10" in f["message"]
    ev = d["evidence"]
    assert ev["marker"] == "not logged" and ev["verdict_from"] == ["effect"]
    # without the marker the threshold comes from the patched server_args dump (line 12)
    assert (ev["effect"]["state"], ev["effect"]["threshold"], ev["effect"]["threshold_from"]) == ("visible", 5, "server_args line")


def test_a_silent_marker_is_dead_when_the_patched_class_cannot_run(tmp_path):
    """The effect does not outweigh proof that the patched class is not on the path: EAGLEWorker (V1) does not
    run at topk 1 on 0.5.12.post1 (DS201)."""
    lines = [ln for ln in plain(recorded()) if MARKER not in ln]
    rc, d = verify(tmp_path, lines, "--patched-class", "EAGLEWorker")
    assert (rc, d["verdict"]) == (1, "dead")
    assert "DS201" in [f["code"] for f in d["findings"]]
    assert d["evidence"]["effect"]["state"] == "visible"


def test_without_a_threshold_no_effect_is_judged(tmp_path):
    """A silent marker and a server_args dump without the patched flag: nothing to judge the batches against,
    so the verdict stays what the marker's absence says (dead, DS301)."""
    lines = [ln.replace("speculative_disable_batch_threshold=5, ", "") for ln in plain(recorded()) if MARKER not in ln]
    lines = [ln for ln in lines if not ln.startswith("DYNSPEC-LAUNCH ")]  # (its argv names the flag too)
    rc, d = verify(tmp_path, lines)
    assert (rc, d["verdict"]) == (1, "dead") and "DS301" in [f["code"] for f in d["findings"]]
    assert d["evidence"]["effect"]["state"] == "none"


def test_an_override_that_silences_the_marker_is_no_dead_verdict_when_the_effect_shows():
    """Issue 29's false dead: STANDALONE on 0.5.16 runs StandaloneWorkerV2, whose __init__ does not call
    EAGLEWorkerV2.__init__ (the marker's method: DS211 alone), but it inherits the drafting that holds the
    behaviour. The start is the dump such a launch writes (tests/support/logs.dump, as
    test_adaptive_and_methods.py builds it, with the patched flag); the decode lines are the recorded ones."""
    from tests.support.logs import READY, dump, judge_text, ts

    head = ts(dump(model_path="/m", speculative_algorithm="STANDALONE", speculative_eagle_topk=1,
                   disable_overlap_schedule=False, enable_multi_layer_eagle=False,
                   speculative_disable_batch_threshold=5)) + "\n" + READY + "\n"
    decode = "\n".join(ln for ln in recorded() if "Decode batch" in ln) + "\n"
    alone = judge_text(head, version="0.5.16")
    assert alone.verdict == "dead" and "DS211" in [f.code for f in alone.findings]  # the override alone: dead
    v = judge_text(head + decode, version="0.5.16")
    codes = [f.code for f in v.findings]
    assert v.verdict == "live" and "DS211" not in codes and "DS301" not in codes, codes
    msg = next(f.message for f in v.findings if f.code == "DS322")
    assert "StandaloneWorkerV2.__init__ does not call EAGLEWorkerV2.__init__" in msg
    assert v.evidence["verdict_from"] == ["effect"] and v.evidence["effect"]["threshold_from"] == "server_args line"
