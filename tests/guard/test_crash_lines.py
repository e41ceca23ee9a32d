"""The guard stops a benchmark on the crash lines that alone prove the server died: the rows of
configs/sglang/log_lines.toml marked decisive, the same the judge treats as final (before, six
of them were decisive only in a set inside the judge, and the guard went on through them)."""
import pytest

from dynspec_cli.guard.watch import LogTap
from dynspec_cli.knowledge.features import load_feature

PREFIX = b"[2026-02-27 20:59:17 TP0] "


@pytest.mark.parametrize("line,crash", [
    # sglang's scheduler (srt/managers/scheduler.py run_scheduler_process) and the launcher's watchdog
    (PREFIX + b"Scheduler hit an exception: Traceback (most recent call last):", "SchedulerException"),
    (PREFIX + b"Received sigquit from a child process. It usually means the child failed.", "ChildProcessDied"),
    (b"Killed", "Killed"),
    (PREFIX + b"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB", "torch.OutOfMemoryError"),
    (PREFIX + b"Rank 0 scheduler is dead. Please check if there are relevant logs.", "ChildProcessDied"),
])
def test_a_decisive_crash_line_is_a_death(line, crash):
    tap = LogTap(None, load_feature(None), 0)
    tap.feeder.feed(line + b"\n")
    assert {(e.kind, e.message) for e in tap.events} == {("died", f"the server crashed ({crash})")}  # (a line of two rows: twice)


def test_a_faulthandler_dump_is_not_one():  # faulthandler can dump a live process too
    tap = LogTap(None, load_feature(None), 0)
    tap.feeder.feed(b"Thread 0x00007f2d4c9ff640 (most recent call first):\n")
    assert tap.events == []


# A real 0.5.12.post1 server's last lines (tests/fixtures/logs/gpu-h200/0.5.12.post1/live-probe.log: `dynspec stop`)
# and the line issue 29's GPU run printed when the scheduler of a serving server was SIGKILLed.
SIGTERM = b"[2026-12-04 19:37:08] SIGTERM received. signum=None frame=None. Draining requests and shutting down...\n"
STOP_EXIT = b"[2026-12-04 19:37:08] Subprocess scheduler_0 (pid=1729) crashed with exit code -15. Triggering SIGQUIT for cleanup...\n"
SIGQUIT = b"[2026-12-04 19:37:08] SIGQUIT received. signum=None, frame=None. It usually means one child failed.\n"
KILLED = b"[2026-12-04 19:37:08] Subprocess scheduler_0 (pid=5066) crashed with exit code -9. Triggering SIGQUIT for cleanup...\n"


def test_a_killed_scheduler_is_a_death_that_names_it():
    tap = LogTap(None, load_feature(None), 0)
    tap.feeder.feed(KILLED + SIGQUIT)
    assert [(e.kind, e.message) for e in tap.events][0] == (
        "died", "the server crashed (ChildProcessDied: scheduler_0 (pid 5066) was killed by signal 9 (SIGKILL): exit code -9)")
    assert all(e.kind == "died" and e.fatal for e in tap.events)


def test_a_sigterm_stop_is_a_stop_not_a_crash():
    tap = LogTap(None, load_feature(None), 0)
    tap.feeder.feed(SIGTERM + STOP_EXIT + SIGQUIT)
    # the benchmark's server is gone (DS706 covers a stop too), and it says so: stopped, once, not "crashed"
    assert [(e.kind, e.message, e.fatal) for e in tap.events] == [("died", "the server was stopped (SIGTERM received)", True)]
