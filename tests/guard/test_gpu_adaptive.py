"""The guard's adaptive judgement on logs a real sglang 0.5.12.post1 server wrote on an H100
(tests/fixtures/logs/gpu-h100/0.5.12.post1-adaptive/README.md): the recorded lines are replayed
through dynspec's own classifier, controller tracker and window judgement, in windows of 5 s cut by
the lines' timestamps from the moment the recorded guard started its benchmark. Expected outcomes
are what a person reads in the logs: the healthy controller logged `steps 3 -> 7` before the
benchmark and held 7 (accept len 8.00: 7 accepted drafts a verify, the highest of 0.5.12's [1, 3, 7]);
the starved one held its initial 3 with accept len 4.00 (3 accepted, above sglang's 3 - 0.5 step-up
point) and logged no controller line after start-up."""
import calendar
import json
import re
import time
from pathlib import Path

import pytest

from dynspec_cli.evidence.scan import Feeder
from dynspec_cli.engines.sglang import adaptive as A
from dynspec_cli.guard import windows as W
from dynspec_cli.knowledge.features import load_feature
from dynspec_cli.engines.sglang.knowledge import knowledge
from dynspec_cli import engines

HERE = Path(__file__).resolve().parents[1] / "fixtures" / "logs" / "gpu-h100" / "0.5.12.post1-adaptive"
STAMP = re.compile(rb"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)")
WINDOW = 5.0


def replay(name: str):
    receipt = json.loads((HERE / f"{name}.receipt.json").read_text())
    report = json.loads((HERE / f"guard-{name}.json").read_text())
    started = report["benchmark"]["started_at"]
    ended = report["benchmark"]["ended_at"]
    feature = load_feature(receipt["feature"])
    threshold = receipt["prove"]["threshold"]
    cls = engines.of(feature).classifier(feature)
    tracker, lines = A.Tracker(), engines.get("sglang").decode_lines()
    before, during = [], []
    for raw in (HERE / f"{name}.log").read_bytes().splitlines(keepends=True):
        m = STAMP.match(raw)
        t = calendar.timegm(time.strptime(m.group(1).decode(), "%Y-%m-%d %H:%M:%S")) if m else None
        if t is not None and int(started) <= t <= ended:
            during.append((t, raw))
        elif not during:  # what the server logged before the benchmark (after it: not the guard's)
            before.append((t, raw))
    A.prime(tracker, cls, b"".join(r for _, r in before).decode())
    tracker.config, note = A.config_of(load_feature("speculative-adaptive"), knowledge(), receipt["sglang_version"],
                                       receipt["profile"]["argv"], None, tracker.first_tier)
    assert note is None, note
    tracker.cut()  # lines before the benchmark are no moves of its windows
    windows, last = [], None

    class Sink:
        def __init__(self):
            self.decode = []

        def feed(self, obs):
            got = lines.feed(obs)
            if got is not None:
                d = got[1]
                d.stable = last_running[0] == d.running
                last_running[0] = d.running
                self.decode.append(d)
            elif obs.kind == "landmark" and obs.id in A.LINES:
                tracker.feed("", obs.id, obs.data)

    last_running = [None]
    by_window: dict[int, list[bytes]] = {}
    for t, raw in during:
        by_window.setdefault(int((t - int(started)) // WINDOW), []).append(raw)
    for i in sorted(by_window):
        sink = Sink()
        f = Feeder(cls, sink, numbered=False)
        f.feed(b"".join(by_window[i]))
        f.flush()
        w = W.Window(i + 1, i * WINDOW, (i + 1) * WINDOW, ranks={"": W.RankWindow("", decode=sink.decode)})
        W.judge(w, threshold, True, W.level_of(windows, threshold), A.WindowJudge(tracker.config, tracker.cut()))
        windows.append(w)
        last = w
    assert last is not None
    return windows, report, tracker


def test_healthy_adaptive_server_is_valid():
    ws, report, tracker = replay("tiny-adaptive")
    assert tracker.first_tier == [1, 3, 7]  # "AdaptiveSpeculativeParams initialized: steps=3, candidate_steps=[1, 3, 7]"
    busy = [w for w in ws if w.ranks[""].decode]
    assert len(busy) >= 5 and all(w.state == "effective" for w in busy), [w.state for w in ws]
    assert all(w.ranks[""].adaptive["steps"] == 7 for w in busy)
    vals = sorted(d.accept_len for w in busy for d in w.ranks[""].decode)
    assert vals[len(vals) // 2] == 8.0  # most lines: 7 drafts accepted a verify (a request's last verify, fewer)
    assert W.reasons(ws, 2, 5) == []
    assert report["valid"] is True and report["exit_code"] == 0  # what the guard said on the GPU


def test_starved_controller_is_pinned_from_the_first_window():
    ws, report, _ = replay("tiny-pinned")
    busy = [w for w in ws if w.ranks[""].decode]
    assert len(busy) >= 5 and all(w.state == "pinned" for w in busy), [w.state for w in ws]
    r = busy[0].ranks[""]
    assert r.adaptive["steps"] == 3 and r.adaptive["candidates"] == [1, 3, 7] and r.adaptive["controller_lines"] == 0
    reasons = W.reasons(ws, 2, 5)
    assert [(x.code, x.window) for x in reasons] == [("DS708", busy[0].index)]
    assert "held 3 draft steps in tier 1 (batches 1 and up; draft steps 1, 3, 7)" in reasons[0].message
    # what the guard said on the GPU
    assert report["exit_code"] == 65 and [x["code"] for x in report["reasons"]] == ["DS708"]
    assert {w["state"] for w in report["windows"]} == {"pinned"}


@pytest.mark.parametrize("name", ["tiny-adaptive", "tiny-pinned"])
def test_the_recorded_lines_are_the_rows(name):
    """Every controller line the real server wrote is read by configs/sglang/log_lines.toml's rows,
    with the steps it names."""
    text = (HERE / f"{name}.log").read_text(errors="replace")
    written = [ln for ln in text.splitlines() if re.search(r"\] (Adaptive spec params updated|Switch adaptive runtime "
                                                              r"state|AdaptiveSpeculativeParams initialized)", ln)]
    got = []

    class Sink:
        def feed(self, obs):
            if obs.kind == "landmark" and obs.id in A.LINES:
                got.append((obs.id, obs.data.get("new") or obs.data.get("steps")))

    f = Feeder(engines.get("sglang").classifier(load_feature("dynamic-spec-disable")), Sink(), numbered=False)
    f.feed(("\n".join(written) + "\n").encode())
    f.flush()
    assert len(got) == len(written)
    if name == "tiny-adaptive":
        assert ("adaptive-update", "7") in got and ("adaptive-switch", "7") in got
    else:
        assert got == [("adaptive-init", "3")]  # the starved controller never moved
