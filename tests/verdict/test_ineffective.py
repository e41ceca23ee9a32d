"""Live but ineffective (issue 20 item 2): the feature's marker was logged, yet every `Decode batch`
line where speculation should be on shows accept len 1.00 (sglang PR #21272's only symptom). The
start-up is the seed's real 0.5.9 log (threshold 5); the decode lines are in 0.5.9's format
(scheduler_metrics_mixin.py: no trailing ", ", accept rate after accept len)."""
import subprocess
import sys
from pathlib import Path

import pytest

SEED = Path(__file__).resolve().parents[2] / "configs" / "demo" / "seed-live.log"


def decode(running: int, accept: float, sec: int) -> str:
    rate = accept / 4
    return (f"[2026-02-27 20:05:{sec:02d} TP0] Decode batch, #running-req: {running}, #token: {running * 300}, "
            f"token usage: 0.01, accept len: {accept:.2f}, accept rate: {rate:.2f}, cuda graph: True, "
            f"gen throughput (token/s): 812.44, #queue-req: 0")


def verify(tmp_path, lines, *args):
    log = tmp_path / "server.log"
    log.write_text(SEED.read_text() + "".join(ln + "\n" for ln in lines))
    return subprocess.run([sys.executable, "-m", "dynspec_cli", "verify", str(log), *args], capture_output=True,
                          text=True, timeout=60)


def test_accept_len_one_throughout_below_the_threshold_is_ineffective(tmp_path):
    r = verify(tmp_path, [decode(2, 1.00, s) for s in range(4)] + [decode(8, 1.00, 5)])
    assert r.returncode == 5, r.stdout + r.stderr
    assert "INEFFECTIVE" in r.stdout and "DS314" in r.stdout
    assert "4 Decode batch lines at running batch 2 (<= threshold 5) show accept len <= 1.00" in r.stdout
    j = verify(tmp_path, [decode(2, 1.00, s) for s in range(4)], "--json")
    import json

    doc = json.loads(j.stdout)
    assert j.returncode == 5 and doc["verdict"] == "ineffective" and doc["exit_code"] == 5
    assert doc["marker"]["found"] is True  # the code runs: that is what makes it a finding of its own
    assert [f["code"] for f in doc["findings"] if f["severity"] == "error"] == ["DS314"]


@pytest.mark.parametrize("lines, why", [
    ([decode(2, 1.00, 0), decode(2, 1.00, 1), decode(2, 2.10, 2), decode(2, 1.00, 3)], "one line accepted drafts"),
    ([decode(8, 1.00, s) for s in range(6)], "above the threshold the feature switches speculation off"),
    ([decode(2, 1.00, 0), decode(2, 1.00, 1)], "two lines are too few"),
    ([decode(3, 1.04, s) for s in range(4)] + [decode(3, 2.60, 9)], "1.04 is within 0.05 of 1, but 2.60 is not"),
])
def test_live_stays_live_when(tmp_path, lines, why):
    r = verify(tmp_path, lines)
    assert r.returncode == 0 and "✓ LIVE" in r.stdout, (why, r.stdout)
    assert "DS314" not in r.stdout
