"""What a classifier makes of a log line: a typed `Observation`, whichever engine's rules made it
(engines/<name>/rules.py), and what every engine's rules read alike: the lines dynspec itself
writes into a log (the launch header, the probe's lines) and a Python exception line. And one
serving step's line as evidence of speculation at a running batch (`Decode`: what the engines'
decode readers make of their lines, and what prove, guard and the judges' effect evidence,
verdict/decision.py, decide on)."""
from __future__ import annotations

import re
from typing import Any, Optional

import msgspec

from dynspec_cli.evidence import probe_lines
from dynspec_cli.evidence.lines import Line
from dynspec_cli.knowledge.tables import LogLineRow, WarningRow

PROBE_PREFIX = probe_lines.PREFIX
LAUNCH_PREFIX = "DYNSPEC-LAUNCH "  # the header `dynspec launch` writes into the log before the server's first line


def launch_header(log: str) -> Optional[dict]:
    """The DYNSPEC-LAUNCH header when it opens the file `log` (the launch that started writing it),
    else None. One line read."""
    import json

    try:
        with open(log, "rb") as f:
            first = f.readline(65536).decode("utf-8", "replace")
    except OSError:
        return None
    if not first.startswith(LAUNCH_PREFIX):
        return None
    try:
        header = json.loads(first[len(LAUNCH_PREFIX):])
    except ValueError:
        return None
    return header if isinstance(header, dict) else None


_EXCEPTION = re.compile(
    r"^(?P<exception>(?:[A-Za-z_][\w]*\.)*[A-Z]\w*(?:Error|Exception|Interrupt|Exit|Warning_?)?)(?::\s*(?P<message>.*))?$"
)
_BUILTIN_FATAL = re.compile(r"(?:Error|Exception|Interrupt|Exit)$")


class Observation(msgspec.Struct, dict=True):
    kind: str  # warning | landmark | marker | feature-dead | traceback | exception | launch | probe | command | command-cont
    line: Line
    id: str = ""
    data: dict[str, Any] = {}
    warning: Optional[WarningRow] = None
    landmark: Optional[LogLineRow] = None


def exception_of(line: Line) -> list[Observation]:
    """`ValueError: ...` at the start of a line ends a traceback (the engine decides whether
    a traceback is open)."""
    msg = line.msg
    if not msg or msg[0].isspace() or ":" not in msg[:120] and not _BUILTIN_FATAL.search(msg):
        return []
    m = _EXCEPTION.match(msg)
    if not m:
        return []
    name = m.group("exception")
    if not _BUILTIN_FATAL.search(name.split(".")[-1]):
        return []
    return [Observation("exception", line, "exception", {"exception": name, "message": m.group("message") or ""})]


class Decode(msgspec.Struct):  # (a Struct, not a dataclass: `verify` builds the class at every start)
    """One `Decode batch` line (or a /metrics sample when there is no log)."""

    running: int
    accept_len: Optional[float]  # None: the line has no `accept len` (no speculative algorithm)
    accept_rate: Optional[float] = None
    source: str = "log"  # log | metrics
    text: str = ""
    offset: Optional[int] = None  # byte offset of the line in the log
    stable: bool = False  # the previous line of the step showed the same running batch
    awaiting: bool = False  # a vLLM stats line whose SpecDecoding metrics line has not come yet
    seen: float = 0.0  # when guard read it (unix time)
    no: Optional[int] = None  # its line number in the log (verify's reading; prove and guard read by offset)
    cuda_graph: Optional[bool] = None  # the line's `cuda graph: True|False` (None: the line has none)

    def to_json(self) -> dict[str, Any]:
        return {"running": self.running, "accept_len": self.accept_len, "accept_rate": self.accept_rate,
                "source": self.source, "offset": self.offset, "stable": self.stable, "cuda_graph": self.cuda_graph}


def number(v) -> Optional[float]:
    """A number a line or a sample gives, or None."""
    if v is None:
        return None
    try:
        return float(v)
    except (TypeError, ValueError):
        return None
