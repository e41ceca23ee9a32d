"""What the claims (claims.py) rest on, collected while a launch is read: frames,
constructors, lines only start-up or serving writes, the launch command in the log. `observe`
writes only the launch's `ClaimEvidence`; what the evidence says about the launch's other parts
(a frame of the loop that ran, a served request after a traceback) goes through their methods."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from dynspec_cli.engines.sglang import frames as frame_rules
from dynspec_cli.engines.sglang.knowledge import tables_dir
from dynspec_cli.evidence.commands import parse_flags
from dynspec_cli.evidence.lines import Line
from dynspec_cli.evidence.observation import Observation
from dynspec_cli.engines.sglang.parts import Config, Life

_TROUBLE_KINDS = {"traceback", "exception"}


@dataclass
class Frame:
    path: str
    function: str
    line: Line
    form: str  # traceback | faulthandler | pyspy


@dataclass
class ClaimEvidence:
    """Per launch: what the claims rest on, beyond the launch's other parts."""

    frames: list[Frame] = field(default_factory=list)
    constructors: list[tuple[str, Line]] = field(default_factory=list)  # class built in a frame's source line
    startup_line: Optional[Line] = None  # a frame or line only written while the server starts
    served_line: Optional[Line] = None  # the last line showing requests served
    trouble_line: Optional[Line] = None  # the last traceback, frame or crash line
    command_line: Optional[Line] = None
    requested: dict[str, tuple[Any, Line]] = field(default_factory=dict)
    last_log_offset: int = -1  # the last line that is not a launch command
    worker_line: Optional[Line] = None  # the frame that named the worker
    spec_line: Optional[Line] = None  # a line only a speculating server writes (draft CUDA graph, ...)
    accept_line: Optional[Line] = None  # a Decode batch line with `accept len`
    decode_line: Optional[Line] = None  # the last Decode batch line

    def named_worker(self, line: Line) -> None:
        """The frame that named the worker (the judge found it; the worker claim cites it)."""
        self.worker_line = line


def observe(ev: ClaimEvidence, life: Life, config: Config, obs: Observation) -> bool:
    """Record what `obs` adds to the claims. True: the observation is the claims' own (a launch
    command, a faulthandler or py-spy frame, a served request) and the launch's reader skips it."""
    line = obs.line
    if obs.kind in ("command", "command-cont"):
        if obs.kind == "command" or ev.command_line is None:  # (flags on their own lines: the first one)
            ev.command_line = line
        for dest, value in obs.data.get("flags", {}).items():
            ev.requested[dest] = (value, line)
        return True
    ev.last_log_offset = line.offset
    if obs.kind == "launch":  # the DYNSPEC-LAUNCH header: the command dynspec itself started
        argv = _header_argv(obs.data.get("json"))
        if argv:
            import shlex  # (here: only a log that dynspec launched has the header)

            ev.command_line = line
            for dest, value in parse_flags(shlex.join(argv), tables_dir()).items():
                ev.requested[dest] = (value, line)
        return False
    if obs.kind in _TROUBLE_KINDS:
        ev.trouble_line = line
        return False
    if obs.kind != "landmark":
        return False
    row = obs.landmark
    if row.implies.get("speculative") is True and ev.spec_line is None:
        ev.spec_line = line
    if row.crash:
        ev.trouble_line = line
        if row.startup_crash and ev.startup_line is None:
            ev.startup_line = line
        ov = frame_rules.overlap_of_line(row.id)
        if ov is not None:
            config.loop_ran(ov, line)
        return False
    if row.id in ("ready", "decode-batch") or row.evidence == "served":
        ev.served_line = line
        if row.id == "decode-batch":
            ev.decode_line = line
            if obs.data.get("accept_len") is not None:
                ev.accept_line = line
        if row.evidence == "served":
            life.served(line)  # as any later landmark does for the reader
        return row.evidence == "served"
    if row.evidence == "startup":  # a source line only start-up runs ("scheduler = Scheduler(...")
        ev.startup_line = ev.startup_line or line
        return True
    if row.evidence == "constructor":
        ev.constructors.append((obs.data.get("cls", ""), line))
        return True
    if row.id == "traceback-frame" or row.evidence == "frame":
        form = "pyspy" if row.id == "pyspy-frame" else "faulthandler" if row.id == "faulthandler-frame" else "traceback"
        path, function = obs.data.get("path") or "", obs.data.get("function") or ""
        if row.id == "traceback-frame-elided":
            path = line.msg.strip().split('"', 1)[0]
        ev.frames.append(Frame(path, function, line, form))
        if form != "pyspy":
            ev.trouble_line = line
        if ev.startup_line is None and frame_rules.is_startup(path, function):
            ev.startup_line = line
        ov = frame_rules.overlap_of(path, function)
        if ov is not None:
            config.loop_ran(ov, line)
        if row.crash_start and row.id != "traceback-frame":
            life.traceback(line)
        return row.id != "traceback-frame"  # the reader reads traceback frames itself too
    return False


def adopt_command(ev: ClaimEvidence, new: ClaimEvidence) -> None:
    """A command pasted right before a new launch's first lines is that launch's, not the old one's."""
    if ev.command_line is not None and ev.command_line.offset > ev.last_log_offset:
        new.command_line, new.requested = ev.command_line, ev.requested
        ev.command_line, ev.requested = None, {}


def _header_argv(text: Optional[str]) -> Optional[list[str]]:
    import json

    try:
        head = json.loads(text or "")
    except ValueError:
        return None
    argv = head.get("argv") if isinstance(head, dict) else None
    return argv if isinstance(argv, list) and all(isinstance(a, str) for a in argv) else None
