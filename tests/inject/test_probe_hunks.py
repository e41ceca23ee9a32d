"""The probe watching every hunk of a diff (schema v2): real process trees of the probe's stand-in
package (launcher, one spawned scheduler per TP rank) under each pyenv interpreter: 3.12/3.13 take
the sys.monitoring path, 3.10/3.11 the code-swap fallback. Which lines run is read from the stand-in's
source (its PATCH/RUNS markers), not from the probe."""
from __future__ import annotations

import pytest

from tests.inject.standin_pkg.harness import (injected_env, interpreters, py_id, run, standin_cmd, v1_forward,
                                              v2_forward, v2_init, _version)

PYTHONS = interpreters()


def hunk_targets():
    fwd, init, v1 = v2_forward(), v2_init(), v1_forward()
    return fwd, init, v1, [
        {**fwd.as_target(), "hunk": 0, "role": "behaviour"},  # runs: V2 is dispatched at topk 1
        {**init.as_target(), "hunk": 1, "role": "marker"},
        {**v1.as_target(), "hunk": 2, "role": "behaviour"},  # the V1 worker is never imported
    ]


@pytest.mark.parametrize("python", PYTHONS, ids=py_id)
def test_first_execution_of_each_hunk_per_rank(python):
    fwd, init, v1, targets = hunk_targets()
    r = run(standin_cmd(python, "--tp-size", "2", "--speculative-algorithm", "EAGLE", "--steps", "5"),
            injected_env(targets, line_hits=False))
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.errors() == []
    assert all(rec["v"] == 2 for rec in r.records)
    (launcher,) = r.with_role("launcher")
    start = launcher.one("start")
    assert (start["hunks"], start["behaviour_hunks"]) == (3, 2)
    assert start["mode"] == ("monitoring" if _version(python) >= (3, 12) else "code")
    schedulers = r.with_role("scheduler")
    assert [s.rank["tp"] for s in schedulers] == [0, 1]
    for s in schedulers:
        hunks = {h["hunk"]: h for h in s.events("hunk")}
        assert sorted(hunks) == [0, 1], s.events("hunk")  # hunk 2 (V1) never ran; each hunk written once
        assert len(s.events("hunk")) == 2
        h = hunks[0]
        assert h["hunk_role"] == "behaviour" and h["function"] == "EAGLEWorkerV2.forward_batch_generation"
        assert h["line"] == min(fwd.runs) and h["at"].endswith("eagle_worker_v2.py:%d" % min(fwd.runs))
        assert h["rank"]["tp"] == s.rank["tp"] and h["pid"] == s.pid and h["calls"] == 1
        assert hunks[1]["line"] == min(init.runs) and hunks[1]["hunk_role"] == "marker"
        assert [x for x in s.events("hit") if "line" in x] == []  # line_hits off: the hunk line still comes
        calls = [x for x in s.events("hit") if x.get("hunk") == 0 and x.get("calls") == 1]
        assert len(calls) == 1 and calls[0]["hunk_role"] == "behaviour"
        (cov,) = s.events("coverage")
        by = {e["target"]: e for e in cov["targets"]}
        assert by[0]["hunk_ran"] is True and by[0]["calls"] == 5 and min(fwd.runs) in by[0]["executed"]
        assert by[1]["hunk_ran"] is True and cov["not_loaded"] == [2]
    assert launcher.events("hunk") == []
