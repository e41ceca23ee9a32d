"""What every placement of one server over several nodes shares (a group of hosts, a Slurm job):
the flags that make the nodes one server, each node's state while it is watched, the node loops
(one judging thread per node), and the verdict over the nodes (`decide`). A placement supplies
only how a node's log is followed and how its process is known to run; the rule "live only when
every node is, dead or crashed as soon as one is" is written here once."""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from dynspec_cli.knowledge.tables import ConfigError
from dynspec_cli.verdict.codes import EXIT

# the server flags that tie the nodes into one server: dynspec sets them on every node
GROUP_FLAGS = ("nnodes", "node-rank", "dist-init-addr")


def refuse_group_flags(flags: dict, where: str, by: str) -> None:
    """A profile that sets a flag dynspec sets on every node (in either spelling) is one line."""
    for k in GROUP_FLAGS:
        for fk in (k, f"--{k}"):
            if fk in (flags or {}):
                raise ConfigError(f"{where}: flags.{fk} is set by {by} (remove it)")


@dataclass
class NodeState:
    """One node while it is watched (written by its loop, read by the display and `decide`)."""

    rank: int
    host: str
    name: str
    verdict: str = "inconclusive"
    phase: str = "args"
    evidence: str = ""
    ready: bool = False
    health: Optional[str] = None
    done: bool = False  # the node's loop ended
    why: str = ""
    stalled: bool = False
    error: Optional[str] = None
    v: Any = None  # the node's latest Verdict
    last_data: float = field(default_factory=time.monotonic)
    first_data: Optional[float] = None  # when its log first grew (Slurm: the job's start-up timings)

    def seen(self, v, pipe) -> None:
        """The node's newest verdict, its phase and the line that shows it."""
        self.v, self.verdict = v, v.verdict
        self.phase = "ready" if v.server_ready else ((v.launch or {}).get("phase") or "args")
        self.evidence = node_evidence(pipe, v)[:300]

    def to_json(self) -> dict[str, Any]:
        return {"rank": self.rank, "host": self.host, "name": self.name, "verdict": self.verdict, "phase": self.phase,
                "ready": self.ready, "health": self.health, "evidence": self.evidence, "why": self.why,
                "stalled": self.stalled, "error": self.error, "detail": self.v.to_json() if self.v is not None else None}


def node_evidence(pipe, v) -> str:
    if v.crash:
        return f"line {v.crash.get('line')}: {v.crash.get('text') or v.crash.get('message')}"
    if v.marker.get("found"):
        return f"marker line {v.marker.get('line')}: {v.marker.get('text')}"
    line = pipe.last_line if pipe is not None else None
    if line is not None:
        return f"line {line.no}: {line.text}"
    return ""


@dataclass
class Decision:
    """The verdict over the nodes, once there is one (`why`: live | node-dead | node-crashed |
    stalled | watch-error; `culprit`: the rank that decided it)."""

    verdict: str
    exit_code: int
    why: str
    culprit: Optional[int]
    message: str


def group_verdict(verdicts: list[Optional[str]]) -> str:
    """One server over several nodes: live only when every node is; dead outranks crashed."""
    if verdicts and all(v == "live" for v in verdicts):
        return "live"
    for v in ("dead", "crashed"):
        if v in verdicts:
            return v
    return "inconclusive"


def decide(states: list[NodeState]) -> Optional[Decision]:
    """Dead or crashed as soon as one node is (dead outranks crashed, as for one server, then the
    earliest rank); a node that cannot be watched is inconclusive; live once every node is live
    and node 0 (the HTTP endpoint) answers; None while undecided."""
    for kind, why in (("dead", "node-dead"), ("crashed", "node-crashed")):
        bad = [s for s in states if s.verdict == kind]
        if bad:
            return _bad(bad[0], kind, why, states)
    errs = [s for s in states if s.error]
    if errs:
        s = errs[0]
        return Decision("inconclusive", 3, "watch-error", s.rank, f"node {s.rank} ({s.host}): cannot watch: {s.error}")
    if all(s.verdict == "live" for s in states) and states[0].ready:
        return Decision("live", 0, "live", None, f"all {len(states)} nodes live; node 0 ready ({states[0].health})")
    return None


def _bad(s: NodeState, kind: str, why: str, states: list[NodeState]) -> Decision:
    if s.stalled:
        stalled = [x for x in states if x.stalled]
        msg = (s.v.crash or {}).get("message") or f"stalled on node {s.rank}"
        if len(stalled) > 1:
            msg += f" (nodes stalled: {', '.join(str(x.rank) for x in stalled)})"
        return Decision("crashed", 4, "stalled", s.rank, msg)
    v, line = s.v, None
    if v is not None and v.crash and kind == "crashed":
        line = f"line {v.crash.get('line')}: {v.crash.get('text') or v.crash.get('message')}"
    elif v is not None:
        err = next((f for f in v.findings if f.severity == "error"), None)
        if err is not None:
            line = f"{err.code} {err.message}" + (f" (line {err.line}: {err.text})" if err.line else "")
    return Decision(kind, EXIT[kind], why, s.rank, f"node {s.rank} ({s.host}) is {kind}" + (f": {line}" if line else ""))


def timed_out(states: list[NodeState]) -> str:
    return "timed out: " + "; ".join(f"node {s.rank} {s.verdict} in {s.phase}" for s in states)


class NodeLoops:
    """One judging loop per node, each in a thread of its own (nodes are followed at the same
    time, so a watch of many costs what its slowest node costs), and the two events they share:
    `stop` (the verdict over the nodes is reached: every loop ends) and a change (a node's state
    moved: decide again). A loop that raises marks its node `error` instead of dying silently."""

    def __init__(self, name: str):
        self.name = name
        self.stop = threading.Event()
        self._changed = threading.Event()
        self.threads: list[threading.Thread] = []

    def start(self, states: list[NodeState], loop: Callable[[NodeState], None]) -> None:
        """`loop(state)` for every node: it follows the node until `stop` is set or its verdict is
        final, updating `state` and calling `note()` whenever it changes."""
        self.threads = [threading.Thread(target=self._one, args=(loop, s), daemon=True, name=f"{self.name}{s.rank}")
                        for s in states]
        for t in self.threads:
            t.start()

    def _one(self, loop: Callable[[NodeState], None], state: NodeState) -> None:
        try:
            loop(state)
        except BaseException as e:  # noqa: BLE001 - one node's loop must not end the others silently
            state.error = f"{type(e).__name__}: {e}"
            state.why = "error"
        finally:
            state.done = True
            self.note()

    def note(self) -> None:
        self._changed.set()

    def wait(self, seconds: float) -> None:
        """Until a node's state changes, at most `seconds`."""
        self._changed.wait(seconds)
        self._changed.clear()

    def end(self, join: float = 10.0) -> None:
        """Stop every loop and wait for it (at most `join` seconds each: a daemon thread that hangs
        on a dead connection does not hold dynspec)."""
        self.stop.set()
        for t in self.threads:
            t.join(join)


def each_concurrently(fn: Callable[[Any], Any], items: list) -> tuple[list, list[Optional[BaseException]]]:
    """fn(item) for every item, each in its own (daemon) thread: the results and the exceptions,
    in the items' order. Nodes are reached at the same time, so a group costs what its slowest
    node costs."""
    results: list = [None] * len(items)
    errors: list[Optional[BaseException]] = [None] * len(items)

    def one(i: int) -> None:
        try:
            results[i] = fn(items[i])
        except BaseException as e:  # noqa: BLE001 - handed to the caller's thread
            errors[i] = e

    threads = [threading.Thread(target=one, args=(i,), daemon=True) for i in range(len(items))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results, errors
