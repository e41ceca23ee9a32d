"""LocalHost: scripts run by a local /bin/sh through subprocess."""
from __future__ import annotations

import os
import select
import signal
import subprocess
import sys

from dynspec_cli.transport.host import Host, Process


class LocalProcess(Process):
    def __init__(self, script: str, *, stdin: bool):
        # own session: the whole group can be killed on timeout, as sshd does for a remote one
        self._p = subprocess.Popen(
            ["/bin/sh", "-c", script],
            stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            bufsize=0,
            start_new_session=True,
            close_fds=True,
        )
        self._open = {self._p.stdout.fileno(): "out", self._p.stderr.fileno(): "err"}

    def write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            try:
                fd = self._p.stdin.fileno()
            except ValueError:  # kill() closed it from another thread: the process is gone
                raise BrokenPipeError("stdin closed") from None
            n = os.write(fd, view)
            view = view[n:]

    def close_stdin(self) -> None:
        if self._p.stdin is not None and not self._p.stdin.closed:
            self._p.stdin.close()

    def read(self, timeout: float | None) -> tuple[bytes, bytes, bool]:
        if not self._open:
            return b"", b"", True
        ready, _, _ = select.select(list(self._open), [], [], timeout)
        chunks = {"out": b"", "err": b""}
        for fd in ready:
            data = os.read(fd, 65536)
            if data:
                chunks[self._open[fd]] = data
            else:
                del self._open[fd]
        return chunks["out"], chunks["err"], not self._open

    def wait(self, timeout: float | None = None) -> int | None:
        try:
            return self._p.wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    def interrupt(self) -> None:
        if self._p.returncode is None:
            try:
                os.killpg(self._p.pid, signal.SIGKILL)  # its pipes close, the reader sees eof
            except ProcessLookupError:
                pass

    def kill(self) -> None:
        if self._p.returncode is None and self._p.poll() is None:
            self.interrupt()
            self._p.wait()
        for f in (self._p.stdin, self._p.stdout, self._p.stderr):
            if f is not None and not f.closed:
                try:
                    f.close()
                except OSError:
                    pass


class LocalHost(Host):
    """This machine. `python` defaults to the interpreter running dynspec."""

    shares_local_files = True
    inherits_this_shell = True

    def __init__(self, *, python: str | None = None):
        self.name = "local"
        self.python = python or sys.executable

    def start_script(self, script: str, *, stdin: bool) -> Process:
        return LocalProcess(script, stdin=stdin)
