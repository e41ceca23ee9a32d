"""How a serving sglang 0.5.10+ server's log ends: stopped, or killed (issue 29, "a dead server called live").

The launcher's SubprocessWatchdog (srt/utils/watchdog.py) logs every scheduler that ends, then SIGQUITs the
launcher, whose handler logs "It usually means one child failed." That happens when the scheduler was killed
(a crash) and when the whole server was stopped with SIGTERM (no crash). Every log below is the real recorded
live log of a real 0.5.12.post1 server (tests/fixtures/logs/gpu-h200/0.5.12.post1/live-probe.log, which ends
in `dynspec stop`'s SIGTERM: its last three lines); the killed server's two lines are the real lines issue 29's
GPU run printed when its scheduler was SIGKILLed, appended in place of those three. Expected values were read
off the lines by a person: -9 is SIGKILL, -15 SIGTERM (multiprocessing's Process.exitcode is -N for signal N).
"""
import json
import subprocess
import sys
from pathlib import Path

import pytest

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "logs"
LIVE = FIXTURES / "gpu-h200" / "0.5.12.post1" / "live-probe.log"
RECORDED_CRASH = FIXTURES / "gpu-h100" / "0.5.12.post1-crash"  # the lead's recorded SIGKILL run, once committed

# The stop that ends live-probe.log (lines 1371-1373), as the real server wrote them.
SIGTERM = "[2026-12-04 19:37:08] SIGTERM received. signum=None frame=None. Draining requests and shutting down..."
STOP_EXIT = "[2026-12-04 19:37:08] Subprocess scheduler_0 (pid=1729) crashed with exit code -15. Triggering SIGQUIT for cleanup..."
SIGQUIT = "[2026-12-04 19:37:08] SIGQUIT received. signum=None, frame=None. It usually means one child failed."
# Issue 29's GPU run: the proven, serving server's scheduler killed with SIGKILL (real lines; the timestamp is
# the one of the log they are appended to).
KILLED = "[2026-12-04 19:37:08] Subprocess scheduler_0 (pid=5066) crashed with exit code -9. Triggering SIGQUIT for cleanup..."


def recorded() -> str:
    return LIVE.read_bytes().decode("utf-8")  # (not read_text: its newline translation splits tqdm's \r lines)


def served_part() -> str:
    """live-probe.log up to its stop: ready, proven by the probe, served prove's steps."""
    lines = recorded().split("\n")
    assert lines[-4:] == [SIGTERM, STOP_EXIT, SIGQUIT, ""]  # what the recorded file ends with
    return "\n".join(lines[:-4]) + "\n"


def verify(tmp_path, text: str) -> tuple[int, dict]:
    log = tmp_path / "server.log"
    log.write_bytes(text.encode("utf-8"))
    p = subprocess.run([sys.executable, "-m", "dynspec_cli", "verify", str(log), "--json"],
                       capture_output=True, text=True, timeout=60)
    return p.returncode, json.loads(p.stdout)


def codes(d: dict) -> list[str]:
    return [f["code"] for f in d["findings"]]


def test_a_killed_scheduler_is_a_crash(tmp_path):
    n = served_part().count("\n")
    rc, d = verify(tmp_path, served_part() + KILLED + "\n" + SIGQUIT + "\n")
    assert (rc, d["verdict"], d["crashed"]) == (4, "crashed", True)
    # the crash is the watchdog's line, not the launcher's SIGQUIT after it, nor the startup traceback
    # (line 76, 'openai_harmony') the server served on after
    assert d["crash"]["line"] == n + 1 and d["crash"]["exception"] == "ChildProcessDied"
    msg = next(f["message"] for f in d["findings"] if f["code"] == "DS303")
    assert "scheduler_0" in msg and "pid 5066" in msg and "-9" in msg and "SIGKILL" in msg
    assert d["claims"]["crashed"]["line"] == n + 1
    assert d["stopped"] is None and "DS320" not in codes(d)
    assert d["marker"]["found"] is True  # it was live: the crash outranks it


def test_the_watchdog_line_alone_is_final(tmp_path):
    """A log cut right after the watchdog's line (the launcher killed before its SIGQUIT handler wrote)."""
    rc, d = verify(tmp_path, served_part() + KILLED + "\n")
    assert (rc, d["verdict"]) == (4, "crashed")


def test_a_sigterm_stop_is_not_a_crash(tmp_path):
    rc, d = verify(tmp_path, recorded())  # the recorded file as it is
    assert (rc, d["verdict"], d["crashed"]) == (0, "live", False)
    assert d["crash"] is None
    assert d["stopped"] == {"signal": "SIGTERM", "line": 1371, "text": SIGTERM,
                            "exits": [{"process": "scheduler_0", "pid": 1729, "exit_code": -15, "signal": "SIGTERM"}]}
    stop = next(f for f in d["findings"] if f["code"] == "DS320")
    assert stop["severity"] == "info" and stop["line"] == 1371 and "SIGTERM" in stop["message"]
    assert d["claims"]["crashed"] == {"value": False, "line": 1371, "text": SIGTERM,
                                      "basis": d["claims"]["crashed"]["basis"]}


def test_the_report_says_stopped():
    p = subprocess.run([sys.executable, "-m", "dynspec_cli", "verify", str(LIVE)], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0 and "✓ LIVE" in p.stdout
    assert "stopped                by SIGTERM at line 1371" in p.stdout, p.stdout


def test_a_stop_that_ends_in_sigkill_is_still_a_stop(tmp_path):
    """`dynspec stop` (and docker, systemd) send SIGKILL when SIGTERM's grace period runs out: the scheduler then
    ends by signal 9 after the stop line (the real -9 line after the real SIGTERM line)."""
    rc, d = verify(tmp_path, served_part() + SIGTERM + "\n" + KILLED + "\n" + SIGQUIT + "\n")
    assert (rc, d["verdict"], d["crashed"]) == (0, "live", False)
    assert [e["signal"] for e in d["stopped"]["exits"]] == ["SIGKILL"]


def test_a_child_that_fails_on_its_own_during_a_stop_is_a_crash(tmp_path):
    """A positive exit code is a process that exited by itself (an exception while draining), not by the stop's
    signal. (The real -15 line with its number changed to 1, the code Python exits with on an exception.)"""
    failed = STOP_EXIT.replace("exit code -15", "exit code 1")
    rc, d = verify(tmp_path, served_part() + SIGTERM + "\n" + failed + "\n" + SIGQUIT + "\n")
    assert (rc, d["verdict"]) == (4, "crashed")
    assert "exited with code 1" in next(f["message"] for f in d["findings"] if f["code"] == "DS303")
    assert d["stopped"]["signal"] == "SIGTERM"


def _recorded():
    logs = sorted(RECORDED_CRASH.glob("*.log"))
    return logs or [pytest.param(None, marks=pytest.mark.skip(
        reason=f"no recorded SIGKILL log in {RECORDED_CRASH} yet (the lead records it on the GPU)"))]


@pytest.mark.parametrize("log", _recorded(), ids=lambda p: p.name if p else "none")
def test_a_recorded_killed_server_is_crashed(tmp_path, log):
    text = log.read_bytes().decode("utf-8")
    assert "crashed with exit code -9" in text  # a log of that run: its scheduler was SIGKILLed
    rc, d = verify(tmp_path, text)
    assert (rc, d["verdict"], d["crashed"]) == (4, "crashed", True)
    assert "SIGKILL" in next(f["message"] for f in d["findings"] if f["code"] == "DS303")
