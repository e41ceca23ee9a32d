"""The parts of one launch's state (launch.py holds them together). Each part is the only
writer of its own fields: the reader, the claims' evidence and the judge read them, and change
them only through the part's methods.

    Release     which sglang releases the lines fit          (mask, narrowed line by line)
    Config      what the launch was configured to do          (algorithm, overlap, server_args, ...)
    Life        how far it got and whether it died            (phase, ready, crash, open traceback)
    Decoding    what its Decode batch lines say               (counts, accept len and graph/eager per running batch)
    Graphs      which CUDA graphs it captured                 (capture lines by role: target, draft, draft-extend)
    ProbeState  what the in-server probe reported             (DYNSPEC-PROBE lines)
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any, Deque, Optional

from dynspec_cli.evidence import exits
from dynspec_cli.evidence.argv import flag_values
from dynspec_cli.evidence.lines import Line
from dynspec_cli.evidence.observation import Observation
from dynspec_cli.engines.sglang.knowledge import Knowledge
from dynspec_cli.evidence.observation import Decode

# The Decode batch lines kept per scheduler for the effect (the newest): at the default
# --decode-log-interval of 40 that is 800k decode passes, far more than a verdict needs.
DECODE_KEPT = 20000


@dataclass
class Crash:
    exception: str
    message: str
    line: Line
    decisive: bool


@dataclass
class Stop:
    """The server was asked to stop (a `stop` line of log_lines.toml), and the exits that followed."""

    signal: str
    line: Line
    exits: list[exits.Exit] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"signal": self.signal, "line": self.line.no or None, "text": self.line.text[:300],
                "exits": [e.to_json() for e in self.exits]}


@dataclass
class Release:
    """The sglang releases whose lines these are: every line that only some releases write narrows it."""

    mask: int
    notes: list[tuple[Line, str, int]] = field(default_factory=list)  # (line, why, its releases)
    conflict: Optional[Line] = None  # the first line that fits none of the releases left

    def narrow(self, line: Line, mask: int, why: str) -> None:
        new = self.mask & mask
        if new == 0:
            self.conflict = self.conflict or line
            return
        if new != self.mask:
            self.notes.append((line, why, mask))
        self.mask = new


@dataclass
class Config:
    """What the launch was set up to do: the command dynspec started, sglang's warnings, its
    server_args dump, the probe's server_args, and the frames of the loop that ran."""

    algorithms: Optional[set] = None
    algorithm: Optional[str] = None
    algorithm_line: Optional[Line] = None
    spec_off_line: Optional[Line] = None
    overlap: Optional[bool] = None
    overlap_line: Optional[Line] = None
    overlap_frame: Optional[Line] = None  # a frame of the event loop that ran (it outweighs flags and warnings)
    multi_layer: Optional[bool] = None
    max_running: Optional[int] = None
    max_running_line: Optional[Line] = None
    tp_size: Optional[int] = None
    dump: dict[str, Any] = field(default_factory=dict)
    dump_line: Optional[Line] = None
    env_set: dict[str, Line] = field(default_factory=dict)
    warnings: list[Observation] = field(default_factory=list)
    header: dict[str, Any] = field(default_factory=dict)

    def read_header(self, k: Knowledge, text: Any, line: Line) -> None:
        """The command dynspec started: what was asked for (a later server_args dump says what
        sglang made of it, and wins)."""
        import json  # (here: only a log that dynspec launched has the header)

        try:
            self.header = json.loads(text)
        except (ValueError, TypeError):
            self.header = {}
        argv = self.header.get("argv") if isinstance(self.header, dict) else None
        if not isinstance(argv, list) or not all(isinstance(a, str) for a in argv):
            return
        asked = flag_values(argv)
        algo = asked.get("--speculative-algorithm")
        if isinstance(algo, str) and self.algorithm is None:
            self.algorithm, self.algorithm_line = k.canonical_algorithm(algo), line
        if self.multi_layer is None:
            self.multi_layer = bool(asked.get("--enable-multi-layer-eagle"))

    def read_warning(self, obs: Observation) -> None:
        self.warnings.append(obs)
        imp = obs.warning.implies
        if imp.algorithms:
            self.algorithms = set(imp.algorithms) if self.algorithms is None else (self.algorithms & set(imp.algorithms)) or self.algorithms
        if imp.overlap is not None:
            self.set_overlap(imp.overlap, obs.line)
        if imp.multi_layer is not None:
            self.multi_layer = imp.multi_layer
        if imp.max_running_requests is not None and self.max_running is None:
            self.max_running, self.max_running_line = imp.max_running_requests, obs.line
        if imp.env_set:
            self.env_set.setdefault(imp.env_set, obs.line)

    def read_dump(self, k: Knowledge, fields: dict[str, Any], line: Line) -> None:
        self.dump, self.dump_line = fields, line
        if "speculative_algorithm" in fields:
            algo = fields["speculative_algorithm"]
            if algo is None:
                self.spec_off_line = line
            elif isinstance(algo, str):
                self.algorithm = k.canonical_algorithm(algo)
                self.algorithm_line = line
        if isinstance(fields.get("disable_overlap_schedule"), bool):
            self.set_overlap(not fields["disable_overlap_schedule"], line)
        if isinstance(fields.get("enable_multi_layer_eagle"), bool):
            self.multi_layer = fields["enable_multi_layer_eagle"]
        if isinstance(fields.get("max_running_requests"), int):
            self.max_running, self.max_running_line = fields["max_running_requests"], line
        if isinstance(fields.get("tp_size"), int):
            self.tp_size = fields["tp_size"]

    def read_probe_args(self, k: Knowledge, args: dict[str, Any], line: Line) -> None:
        """The server_args the in-server probe read from the server's own process."""
        if isinstance(args.get("speculative_algorithm"), str) and self.algorithm is None:
            self.algorithm = k.canonical_algorithm(args["speculative_algorithm"])
            self.algorithm_line = line
        if isinstance(args.get("disable_overlap_schedule"), bool):
            self.set_overlap(not args["disable_overlap_schedule"], line)
        if isinstance(args.get("tp_size"), int):
            self.tp_size = args["tp_size"]

    def read_max_running(self, value: int, line: Line) -> None:
        self.max_running, self.max_running_line = value, line

    def set_overlap(self, value: bool, line: Line) -> None:
        """The first line that established the value stays its evidence."""
        if self.overlap != value or self.overlap_line is None:
            self.overlap, self.overlap_line = value, line

    def loop_ran(self, value: bool, line: Line) -> None:
        """A frame of the event loop is the loop that ran: it outweighs what flags and warnings said."""
        if self.overlap_frame is None or self.overlap != value:
            self.overlap, self.overlap_line = value, line
            self.overlap_frame = line

    def loop_named(self, function: str, line: Line) -> None:
        """A traceback frame in `event_loop_*`, when nothing said yet which loop runs."""
        if function.startswith("event_loop_") and self.overlap is None:
            self.overlap = function.startswith("event_loop_overlap")
            self.overlap_line = line


@dataclass
class Life:
    """How far the launch got (its phase, readiness) and whether it died (its crash, a traceback
    still open, progress after a crash that was not decisive)."""

    ready: Optional[Line] = None
    crash: Optional[Crash] = None
    flag_rejected: Optional[Line] = None
    in_traceback: bool = False
    traceback_line: Optional[Line] = None
    progress_after_crash: bool = False
    past_resolution: bool = False
    phase: str = "args"
    shards: Optional[str] = None
    stop: Optional[Stop] = None

    def argument_error(self, exception: str, message: str, line: Line) -> None:
        """An error-level warning of argument resolution: the launch ends here."""
        self.crash = self.crash or Crash(exception, message, line, decisive=True)
        self.past_resolution = True

    def traceback(self, line: Line) -> None:
        self.in_traceback = True
        self.traceback_line = self.traceback_line or line

    def in_frame(self) -> None:
        """A traceback frame (the traceback's header, if any, was its start)."""
        self.in_traceback = True

    def exception(self, exception: str, message: str, line: Line) -> None:
        """`ValueError: ...` ends an open traceback (and is the crash, keeping a decisive line before it)."""
        if not self.in_traceback:
            return
        decisive = self.crash.decisive if self.crash else False  # e.g. "Scheduler hit an exception" before it
        self.crash = Crash(exception, message, line, decisive=decisive)
        self.progress_after_crash = False
        self.past_resolution = True

    def stopped(self, signal: str, line: Line) -> None:
        """A stop line: the server was asked to stop; its children's exits after it are the stop's."""
        self.stop = self.stop or Stop(signal, line)

    def crash_line(self, row, line: Line, data: dict[str, Any], *, flag_rejected: bool) -> None:
        if flag_rejected:
            self.flag_rejected = line
        self.past_resolution = True
        gone = exits.of(data)
        if self.stop is not None and exits.part_of_stop(row, data):
            if gone is not None:
                self.stop.exits.append(gone)
            return
        if self.crash is not None and row.aftermath and not self.progress_after_crash:
            self.crash.decisive = self.crash.decisive or row.decisive  # keep the root cause already seen
        else:
            # (a crash the server served on after is not this line's cause: this one is the crash now)
            self.crash = Crash(row.crash, gone.describe() if gone is not None else line.msg, line, decisive=row.decisive)
            self.progress_after_crash = False

    def args_resolved(self) -> None:
        self.past_resolution = True
        self.phase = "args"

    def served(self, line: Line) -> None:
        """The server went on serving: whatever traceback came before ended, and a crash that was
        not decisive was not the end."""
        self.in_traceback = False
        if self.crash is not None and not self.crash.decisive and line.offset > self.crash.line.offset:
            self.progress_after_crash = True

    def progressed(self, row, line: Line, d: dict[str, Any]) -> None:
        """A landmark of start-up or serving (not a crash, not a frame)."""
        self.past_resolution = True
        self.served(line)
        if row.phase:
            self.phase = row.phase
        if row.id == "checkpoint-shards":
            self.shards = f"{d.get('done')}/{d.get('total')}"
        elif row.id == "ready":
            self.ready = line

    def close_open_traceback(self, start: Optional[Line], *, at_eof: bool, quiet_for: float) -> None:
        """A traceback that the file (or the excerpt) ends in, before its exception line, is a crash
        whose exception is unknown: the scheduler prints a traceback only on its way out. `start`:
        where it began when no traceback header was seen (the claims' last trouble line)."""
        if self.crash is not None or not self.in_traceback or not (at_eof or quiet_for >= 1.0):
            return
        start = self.traceback_line or start
        if start is None:
            return
        self.crash = Crash("Traceback", "traceback cut off before its exception line", start, decisive=False)
        self.progress_after_crash = False


@dataclass
class Decoding:
    """The launch's `Decode batch` lines: counts, the highest accept len per running batch, and each
    scheduler's lines (by DP rank) as prove's observations, for the feature's effect (verdict/decision.py)."""

    lines: int = 0
    with_accept: int = 0
    last: dict[str, str] = field(default_factory=dict)
    accept_by_batch: dict[int, tuple[int, float]] = field(default_factory=dict)  # running -> (lines, max accept len)
    graph_by_batch: dict[int, list[int]] = field(default_factory=dict)  # running -> [lines in a graph, lines eager]
    eager_line: Optional[Line] = None  # the last line that says `cuda graph: False`
    by_rank: dict[str, Deque[Decode]] = field(default_factory=dict)
    _effect: Optional[tuple[tuple, Any]] = None  # (what it was judged on, the Effect): judged again only on new lines

    def read(self, d: dict[str, str], line: Optional[Line] = None) -> None:
        self.lines += 1
        graph = d.get("graph")
        if graph is not None and d.get("running", "").isdigit():
            counts = self.graph_by_batch.setdefault(int(d["running"]), [0, 0])
            counts[graph != "True"] += 1
            if graph != "True":
                self.eager_line = line
        if "accept_len" in d:
            self.with_accept += 1
            try:
                n, top = self.accept_by_batch.get(int(d["running"]), (0, 0.0))
                self.accept_by_batch[int(d["running"])] = (n + 1, max(top, float(d["accept_len"])))
            except (KeyError, ValueError):
                pass
        # (`graph` not in `last`: the launch JSON keeps its shape; the verdict's compute_path has it)
        self.last = {k: v for k, v in d.items() if k != "graph"} if graph is not None else d
        try:
            running = int(d["running"])
            accept = float(d["accept_len"]) if d.get("accept_len") is not None else None
        except (KeyError, ValueError):
            return
        label = f"DP{line.ranks['DP']}" if line is not None and "DP" in line.ranks else ""
        ds = self.by_rank.setdefault(label, deque(maxlen=DECODE_KEPT))
        prev = ds[-1] if ds else None
        ds.append(Decode(running, accept, None, "log", line.text[:300] if line is not None else "",
                         line.offset if line is not None else None,
                         stable=prev is not None and prev.running == running,
                         no=(line.no or None) if line is not None else None))

    def effect(self, threshold: Optional[int], expect_below: bool, source: Optional[str]):
        """The feature's effect in these lines, decided as prove decides it (decision.effect; imported
        here: a log without Decode batch lines, what `verify` reads before a benchmark, never needs it)."""
        from dynspec_cli.verdict import decision

        key = (self.lines, threshold, expect_below, source)
        if self._effect is None or self._effect[0] != key:
            self._effect = (key, decision.effect({lb: list(ds) for lb, ds in self.by_rank.items()}, threshold,
                                                 expect_below, source))
        return self._effect[1]


@dataclass
class Graphs:
    """The launch's CUDA-graph capture lines (configs/sglang/cuda_graph.toml), by whose graph."""

    lines: dict[str, Line] = field(default_factory=dict)  # role -> its first capture line
    bs: dict[str, list[int]] = field(default_factory=dict)  # role -> the batch sizes a line listed

    def read(self, role: str, fields: dict[str, Any], line: Line) -> None:
        self.lines.setdefault(role, line)
        if fields.get("bs"):
            try:
                self.bs[role] = [int(x) for x in fields["bs"].split(",") if x.strip()]
            except ValueError:
                pass


@dataclass
class ProbeState:
    """What the in-server probe (DYNSPEC-PROBE lines) reported for one launch."""

    seen: bool = False
    version: Optional[str] = None
    version_line: Optional[Line] = None
    procs: dict[int, dict[str, Any]] = field(default_factory=dict)  # pid -> role, rank, worker, hits
    unpatched_worker: Optional[tuple[dict, Line]] = None
    other_file: Optional[tuple[dict, Line]] = None
    instrumented: bool = False
    errors: int = 0
    targets: int = 0  # how many patched targets the probe was given
    first_hit: Optional[Line] = None
    behaviour_hunks: int = 0  # how many behaviour hunks of the diff the probe watches (schema v2 start lines)
    first_hunk: Optional[Line] = None  # the first `hunk` line of a behaviour hunk

    def proc(self, ev: dict) -> dict[str, Any]:
        p = self.procs.setdefault(int(ev.get("pid", 0)), {"pid": ev.get("pid"), "role": None, "rank": None,
                                                          "worker": None, "hits": 0, "loaded": False,
                                                          "behaviour_ran": set(), "behaviour_called": set()})
        if ev.get("role") and ev.get("role") != "other":
            p["role"] = ev["role"]
        if ev.get("rank"):
            p["rank"] = ev["rank"]
        return p

    def schedulers(self) -> list[dict[str, Any]]:
        return [p for p in self.procs.values() if p["role"] == "scheduler" or p["worker"]]

    def read(self, ev: dict, line: Line) -> None:
        """One probe event (its server_args are the Config's: Reader passes them on)."""
        self.seen = True
        p = self.proc(ev)
        kind = ev.get("event")
        if kind == "start" and isinstance(ev.get("targets"), int):
            self.targets = max(self.targets, ev["targets"])
        if kind == "start" and isinstance(ev.get("behaviour_hunks"), int):
            self.behaviour_hunks = max(self.behaviour_hunks, ev["behaviour_hunks"])
        if kind == "sglang" and isinstance(ev.get("version"), str):
            self.version, self.version_line = ev["version"], line
        elif kind == "module":
            for t in ev.get("targets") or []:
                p["loaded"] = True  # this process imported a patched module (a plugin's: the plugin loaded)
                if t.get("status") == "instrumented":
                    self.instrumented = True
                elif t.get("status") == "other-file" and self.other_file is None:
                    self.other_file = ({**t, "module_file": ev.get("file")}, line)
        elif kind == "worker":
            p["worker"] = {"class": ev.get("class"), "module": ev.get("module"), "file": ev.get("file"),
                           "mro": ev.get("mro"), "patched_in_mro": ev.get("patched_in_mro")}
            flags = [x.get("in_mro") for x in ev.get("patched_in_mro") or []]
            if flags and not any(flags) and self.unpatched_worker is None:
                self.unpatched_worker = (p["worker"], line)
        elif kind == "hit":
            p["hits"] += 1
            self.first_hit = self.first_hit or line
            if "behaviour" in str(ev.get("hunk_role")):
                p["behaviour_called"].add(ev.get("hunk"))
        elif kind == "hunk":
            if "behaviour" in str(ev.get("hunk_role")):
                p["behaviour_ran"].add(ev.get("hunk"))
                self.first_hunk = self.first_hunk or line
        elif kind == "error":
            self.errors += 1
