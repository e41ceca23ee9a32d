"""Processes on this machine, read from /proc: who is in a process group, whose command line
holds a text. Zombies do not count (they are gone, only not yet reaped).

Also what the suite started and must take down however it ends (normal exit, SIGINT, SIGTERM):
`on_cleanup(fn)` registers a stop function (sshds, namespaces, the Slurm cluster); `cleanup_all()`
(tests/conftest.py's pytest_unconfigure, atexit) calls them, newest first, then kills every
process still carrying this run's SUITE_MARK in its environment (set by tests/conftest.py, passed
on to ssh sessions by the test sshds' SetEnv): the servers dynspec launched for the tests, their
children, whatever a test left behind."""
from __future__ import annotations

import atexit
import os
import signal
from pathlib import Path

SUITE_MARK = "DYNSPEC_SUITE_RUN"
_cleanups: list = []


def stat_fields(pid: str) -> list[str] | None:
    """/proc/PID/stat after the command name: state, ppid, pgrp, ..."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None


def pids_in_group(pgid: int) -> list[int]:
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit() and (st := stat_fields(d)) and int(st[2]) == pgid and st[0] not in "ZX":
            out.append(int(d))
    return out


def pids_with(text: str) -> list[int]:
    """Live processes whose command line contains text (other than this one)."""
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit() or int(d) == os.getpid():
            continue
        try:
            cmd = Path(f"/proc/{d}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        st = stat_fields(d)
        if text in cmd and st and st[0] not in "ZX":
            out.append(int(d))
    return out


def marked_pids(mark: str) -> list[int]:
    """Live processes (other than this one) whose environment holds SUITE_MARK=mark."""
    needle = f"{SUITE_MARK}={mark}\0".encode()
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit() or int(d) == os.getpid():
            continue
        try:
            env = Path(f"/proc/{d}/environ").read_bytes()
        except OSError:
            continue
        st = stat_fields(d)
        if (env.startswith(needle) or b"\0" + needle in env) and st and st[0] not in "ZX":
            out.append(int(d))
    return out


def on_cleanup(fn):
    """Call fn (once) when the suite ends, however it ends. Returns fn."""
    _cleanups.append(fn)
    return fn


def cleanup_all() -> None:
    """The registered stops, newest first, then SIGKILL for this run's marked processes. SIGINT and
    SIGTERM wait meanwhile: a second Ctrl-C must not leave half of it undone."""
    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
    try:
        while _cleanups:
            try:
                _cleanups.pop()()
            except Exception:
                pass
        mark = os.environ.get(SUITE_MARK)
        for _ in range(3) if mark else ():  # (a second pass for what forked meanwhile)
            for pid in marked_pids(mark):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


atexit.register(cleanup_all)


class CmdlineSampler:
    """Reads every process's command line every ~1 ms in a thread, as any local user can, and keeps
    each one holding one of `needles` (bytes). `sweeps` counts the passes over /proc."""

    def __init__(self, needles: list[bytes]):
        import threading

        self.needles = needles
        self.seen: list[tuple[int, bytes]] = []
        self.sweeps = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        import time

        me = str(os.getpid())
        while not self._stop.is_set():
            for d in os.listdir("/proc"):
                if not d.isdigit() or d == me:
                    continue
                try:
                    with open(f"/proc/{d}/cmdline", "rb") as f:
                        cmd = f.read()
                except OSError:
                    continue
                if any(n in cmd for n in self.needles):
                    self.seen.append((int(d), cmd))
            self.sweeps += 1
            time.sleep(0.0005)

    def __enter__(self) -> "CmdlineSampler":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


class ExecTrace:
    """Every execve argv of process `pid` and all it forks from now on (strace -f, attached: a
    SIGINT detaches it and leaves the processes running). Deterministic where sampling is not."""

    def __init__(self, pid: int, out: Path):
        self.pid, self.out = pid, out

    def __enter__(self) -> "ExecTrace":
        import shutil
        import subprocess
        import time

        strace = shutil.which("strace")
        if strace is None:
            import pytest

            pytest.fail("strace is needed to see every command line (apt-get install -y strace)", pytrace=False)
        self._proc = subprocess.Popen([strace, "-f", "-qq", "-s", "1000000", "-e", "trace=execve", "-o",
                                       str(self.out), "-p", str(self.pid)], stdin=subprocess.DEVNULL,
                                      stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:  # attached once the tracee says so
            status = Path(f"/proc/{self.pid}/status").read_text()
            if f"TracerPid:\t{self._proc.pid}\n" in status:
                return self
            assert self._proc.poll() is None, self._proc.stderr.read()
            time.sleep(0.01)
        raise AssertionError("strace did not attach")

    def __exit__(self, *exc) -> None:
        import signal

        self._proc.send_signal(signal.SIGINT)
        self._proc.wait(30)

    def execs(self) -> list[str]:
        """The execve lines (argv as strace prints it: C escapes, \\ooo for bytes past ASCII)."""
        return [ln for ln in self.out.read_text(errors="replace").splitlines() if "execve(" in ln]
