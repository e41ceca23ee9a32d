"""What the end of a server's log says: a process that exited (its code, the signal that ended it) and
whether that exit was the server being stopped or the server crashing.

sglang's launcher writes the exit code of a child it saw die ("Subprocess scheduler_0 (pid=5066) crashed
with exit code -9. ...", configs/sglang/log_lines.toml `subprocess-crashed`); the code is multiprocessing's
`Process.exitcode`, -N when signal N ended the process. A stop (`sigterm-received`: "SIGTERM received ...
Draining requests and shutting down...") makes the launcher write the same lines for its children, so the
judge (engines/sglang/parts.py Life) and the guard (guard/watch.py) both ask `part_of_stop` before they call a
line a crash."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Optional

# Linux's numbers (the servers dynspec reads run on Linux; the `signal` module of the machine reading the
# log may number them otherwise, as macOS does from 10 on).
SIGNALS = {1: "SIGHUP", 2: "SIGINT", 3: "SIGQUIT", 4: "SIGILL", 6: "SIGABRT", 7: "SIGBUS", 8: "SIGFPE",
           9: "SIGKILL", 10: "SIGUSR1", 11: "SIGSEGV", 12: "SIGUSR2", 13: "SIGPIPE", 14: "SIGALRM", 15: "SIGTERM"}


@dataclass(frozen=True)
class Exit:
    """One process's exit, as a line of the log reports it."""

    process: str  # sglang's name for it: scheduler_0, detokenizer, ...
    pid: Optional[int]
    code: int

    @property
    def signal(self) -> Optional[str]:
        """The signal that ended the process (None: it exited by itself)."""
        return SIGNALS.get(-self.code, f"signal {-self.code}") if self.code < 0 else None

    def describe(self) -> str:
        who = f"{self.process} (pid {self.pid})" if self.pid is not None else self.process
        if self.code < 0:
            return f"{who} was killed by signal {-self.code} ({self.signal}): exit code {self.code}"
        return f"{who} exited with code {self.code}"

    def to_json(self) -> dict[str, Any]:
        return {"process": self.process, "pid": self.pid, "exit_code": self.code, "signal": self.signal}


def of(data: Mapping[str, Any]) -> Optional[Exit]:
    """The exit a classified line reports (its `process`, `pid`, `exit_code` fields), if it names one."""
    try:
        code = int(data["exit_code"])
    except (KeyError, TypeError, ValueError):
        return None
    try:
        pid = int(data["pid"]) if data.get("pid") is not None else None
    except (TypeError, ValueError):
        pid = None
    return Exit(str(data.get("process") or "a child process"), pid, code)


def part_of_stop(row: Any, data: Mapping[str, Any]) -> bool:
    """Once a stop line was seen: is this crash line the stop's own aftermath? A line the launcher writes
    when its children end (`after_stop`) is, unless it names a child that exited with a positive code: that
    process failed on its own (an exception while draining), a crash even during a stop."""
    if not getattr(row, "after_stop", False):
        return False
    e = of(data)
    return e is None or e.code < 0
