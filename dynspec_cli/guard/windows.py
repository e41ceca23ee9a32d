"""Per time window, per rank: was speculation live and effective, and did the feature do what its
feature file says; and, over the windows, is the benchmark run still valid.

A window holds what arrived while it was open: each rank's `Decode batch` lines (sglang logs one
stream per DP rank, tagged `DPn`), the deltas of the server-wide /metrics counters, the events
the log and the server showed (a new start-up, a crash, a counter that went down, another process).
Lines are judged as `prove` judges a step (decision.judge_step: per running batch, on two steady
lines or more), against the feature's `[expect]` and the threshold proven in the receipt.

Rank states: effective (speculation on where it should be), plain (off, and the feature says off
at these batches), collapsed (accept len ~1.00 where speculation should be on), misbehaved (on
above the threshold, or off at one batch where it is on at another below it), pinned (sglang's
adaptive controller stopped adapting: the engine's Adaptive), undecided (lines, too few or mixed to
decide), silent (the server was busy, this rank logged nothing), idle.

The compute path, per window (Window.graph): how many decode passes ran in CUDA graphs and how many
eager, per rank, from the sglang:cuda_graph_passes_total deltas (evidence/graph_passes.py) when the
server exports them, else from the window's Decode batch lines' `cuda graph:`. A window whose
decode ran eager beyond graph_passes.TOLERANCE on a server that captured graphs is `eager`: the run
did not measure the configured fast path (DS709), unless the user accepts it (--accept-eager, DS711).
A /metrics without the counter and lines without the field are "not reported", never eager."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from dynspec_cli.evidence import graph_passes as GP
from dynspec_cli.verdict import decision
from dynspec_cli.verdict.decision import Step
from dynspec_cli.evidence.observation import Decode

GOOD = ("effective", "plain", "idle", "undecided")
HELD = ("collapsed", "silent", "pinned")  # invalid once they hold for N windows in a row
# Findings that make the run invalid, with the configs/findings.toml code of each.
CODES = {"restarted": "DS701", "collapsed": "DS702", "silent": "DS703", "misbehaved": "DS704",
         "counter-reset": "DS705", "died": "DS706", "no-traffic": "DS707", "no-evidence": "DS703",
         "evidence-stopped": "DS703", "pinned": "DS708", "eager": "DS709", "backend-changed": "DS710",
         "eager-accepted": "DS711"}


@dataclass
class Event:
    """Something the window saw that no benchmark result survives (or a note, when `fatal` is false)."""

    kind: str  # restarted | died | counter-reset | evidence-stopped | note
    message: str
    fatal: bool = True
    text: Optional[str] = None  # the log line, when one shows it

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "message": self.message, "fatal": self.fatal, "text": self.text}


@dataclass
class RankWindow:
    label: str  # "DP1", or "" for a server with one scheduler stream
    decode: list[Decode] = field(default_factory=list)
    gauge_accept: Optional[float] = None  # sglang:spec_accept_length at the window's end (None: not exported)
    num_steps: Optional[float] = None  # sglang:spec_num_steps (0.5.23: the draft steps active now; the adaptive tier's)
    step: Optional[Step] = None
    state: str = "idle"
    adaptive: Optional[dict[str, Any]] = None  # the adaptive tier its lines ran in and the steps it held (engines' Adaptive)
    held: Optional[str] = None  # why a pinned rank is pinned, in words (its adaptive controller's judge says)

    @property
    def name(self) -> str:
        return self.label or "rank 0"

    @property
    def accept_len(self) -> Optional[float]:
        return self.step.accept_len if self.step and self.step.groups else None

    def to_json(self) -> dict[str, Any]:
        s = self.step
        rr = s.running_range if s else None
        return {"rank": self.label or None, "state": self.state, "lines": len(self.decode),
                "running_range": list(rr) if rr else None, "accept_len": self.accept_len,
                "speculation": s.speculation if s else "unknown", "expected": s.expected if s else "-",
                "groups": [g.to_json() for g in s.groups] if s else [], "gauge_spec_accept_length": self.gauge_accept,
                "spec_num_steps": self.num_steps, "adaptive": self.adaptive}


@dataclass
class Window:
    index: int
    start: float  # seconds since the benchmark started
    end: float
    ranks: dict[str, RankWindow] = field(default_factory=dict)
    counters: Optional[dict[str, float]] = None  # deltas of COUNTERS (None: no /metrics)
    served: int = 0  # prefill lines and answered requests in the log
    events: list[Event] = field(default_factory=list)
    last: bool = False  # the benchmark ended inside this window
    state: str = "idle"
    passes: Optional[dict[str, dict[str, float]]] = None  # cuda_graph_passes_total deltas by rank and mode (None: not reported)
    graph: Optional[dict[str, Any]] = None  # the compute path judged (judge_graph)
    # tokens per verify pass from the counters' deltas, as the engine reads them (engines/protocol.py
    # tokens_per_verify: sglang (generated - finished) / verify calls; vLLM 1 + accepted / drafts)
    tokens_per_verify: Optional[float] = None

    @property
    def traffic(self) -> bool:
        gen = sum(v for k, v in (self.counters or {}).items() if k.endswith(":generation_tokens_total"))
        return gen > 0 or self.served > 0 or any(r.decode for r in self.ranks.values())

    def to_json(self) -> dict[str, Any]:
        return {"index": self.index, "start": round(self.start, 3), "end": round(self.end, 3), "state": self.state,
                "traffic": self.traffic, "served_lines": self.served, "counters": self.counters,
                "tokens_per_verify": self.tokens_per_verify, "events": [e.to_json() for e in self.events],
                "compute_path": self.graph,
                "ranks": [r.to_json() for r in self.ranks.values()]}


def judge_rank(r: RankWindow, traffic: bool, threshold: int, expect_below: bool, level: Optional[float]) -> None:
    if not r.decode:
        r.state = "silent" if traffic else "idle"
        return
    r.step = Step(0, 0, decode=list(r.decode))
    decision.judge_step(r.step, threshold, expect_below, level)
    decided = r.step.evaluated
    if not decided:
        r.state = "undecided"
        return
    failed = [g for g in decided if g.passed is False]
    on = [g for g in decided if g.on]
    if any(g.expected is False for g in failed) or (failed and on):
        r.state = "misbehaved"
    elif failed or not on and any(g.expected is None for g in decided):
        r.state = "collapsed"
    else:
        r.state = "effective" if on else "plain"


def judge(w: Window, threshold: int, expect_below: bool, level: Optional[float], controller=None) -> None:
    """`controller`: the engine's adaptive controller in this window (engines/protocol.py Adaptive.window:
    sglang's): the on level each rank could reach at the draft steps it ran, and its own judgement
    after the lines' (a rank it finds pinned carries the reason, RankWindow.held)."""
    traffic = w.traffic
    for r in w.ranks.values():
        judge_rank(r, traffic, threshold, expect_below, controller.level(r, level) if controller else level)
        if controller is not None:
            controller.judge(r)
        if w.last and r.state == "silent":
            r.state = "idle"  # the benchmark's tail: requests ended before the next log interval
    states = [r.state for r in w.ranks.values()]
    if any(e.fatal for e in w.events):
        w.state = next(e.kind for e in w.events if e.fatal)
    else:
        w.state = next((s for s in ("misbehaved", "collapsed", "pinned", "silent", "effective", "plain", "undecided")
                        if s in states), "idle")


def judge_graph(w: Window, captured: Optional[bool]) -> None:
    """Window.graph: per rank, decode passes in graphs and eager, the source, and the window's
    state: graphs | eager | eager (graphs off) | not reported | no decode. `captured`: the server
    captured decode graphs (True), runs without them by its configuration (False), unknown (None:
    then graphs seen running in this window say they were captured)."""
    ranks: dict[str, dict[str, Any]] = {}
    if w.passes is not None:
        source = "metrics"
        for rank, modes in sorted(w.passes.items()):
            g, e = GP.decode_split(modes)
            ranks[rank] = {"graph": g, "eager": e}
    else:
        lines = [(r.label, d.cuda_graph) for r in w.ranks.values() for d in r.decode if d.cuda_graph is not None]
        source = "log" if lines else None
        for label, on in lines:
            c = ranks.setdefault(label, {"graph": 0, "eager": 0})
            c["graph" if on else "eager"] += 1
    g = sum(c["graph"] for c in ranks.values())
    e = sum(c["eager"] for c in ranks.values())
    for c in ranks.values():
        c["eager_share"] = GP.eager_share(c["graph"], c["eager"])
    if source is None:
        state = "not reported"
    elif g + e == 0:
        state = "no decode"
    elif captured is False:
        state = "eager (graphs off)" if e else "graphs"
    elif captured is None and not g:  # nothing says graphs were there to run in: not a finding
        state = "eager (no graphs seen)"
    elif any((c["eager_share"] or 0) > GP.TOLERANCE for c in ranks.values()):
        state = "eager"
    else:
        state = "graphs"
    w.graph = {"state": state, "source": source, "unit": "passes" if source == "metrics" else "lines",
               "graph": g, "eager": e, "eager_share": GP.eager_share(g, e), "tolerance": GP.TOLERANCE,
               "ranks": [{"rank": k or None, **v} for k, v in ranks.items()]}
    if state == "eager" and w.state in GOOD:
        w.state = "eager"


def level_of(windows: list[Window], threshold: int) -> Optional[float]:
    """The run's on level (decision.on_level) over the windows so far."""
    return decision.on_level([r.step for w in windows for r in w.ranks.values() if r.step], threshold)


@dataclass
class Reason:
    kind: str
    window: int
    message: str

    @property
    def code(self) -> str:
        return CODES[self.kind]

    def to_json(self) -> dict[str, Any]:
        return {"code": self.code, "kind": self.kind, "window": self.window, "message": self.message}


def reasons(windows: list[Window], hold: int, threshold: int, claims: bool = True,
            accept_eager: bool = False) -> list[Reason]:
    """Why the run is invalid (empty: it is valid). A fatal event or a misbehaving window counts at
    once; a collapsed or silent rank once it holds for `hold` windows in a row (the first of them
    named); a run with traffic and no window decided is missing evidence, and so is a benchmark that
    `claims` results (it exited 0) though no request reached the server."""
    out: list[Reason] = []
    seen: set[tuple[str, str]] = set()

    def add(kind: str, key: str, window: int, msg: str) -> None:
        if (kind, key) not in seen:
            seen.add((kind, key))
            out.append(Reason(kind, window, msg))

    runs: dict[tuple[str, str], int] = {}
    for w in windows:
        for e in w.events:
            if e.fatal:
                add(e.kind, e.message, w.index, f"window {w.index} ({_span(w)}): {e.message}")
        for r in w.ranks.values():
            key = (r.state, r.label)
            for k in list(runs):
                if k[1] == r.label and k != key:
                    del runs[k]
            if r.state == "misbehaved":
                add("misbehaved", r.label, w.index, f"window {w.index} ({_span(w)}), {r.name}: {_misbehaved(r, threshold)}")
            if r.state in HELD:
                runs.setdefault(key, w.index)
                first = runs[key]
                if w.index - first + 1 >= hold:
                    add(r.state, r.label, first, f"windows {first}–{w.index}, {r.name}: " + _held(r, w, windows, first))
    eager = [w for w in windows if w.graph and w.graph["state"] == "eager"]
    if eager and not accept_eager:
        add("eager", "", eager[0].index, _eager(eager))
    if not out:
        busy = [w for w in windows if w.traffic]
        if not busy and claims:
            out.append(Reason("no-traffic", 0, "no request reached the server while the benchmark ran: its numbers "
                                               "are not from this server (another --port or --host?)"))
        elif busy and not any(r.state in ("effective", "plain") for w in busy for r in w.ranks.values()):
            out.append(Reason("no-evidence", busy[0].index,
                              f"{len(busy)} busy window(s) and none decided: no Decode batch line showed "
                              f"speculation on or off at two lines of one running batch"))
    return out


def _eager(eager: list[Window]) -> str:
    g = sum(w.graph["graph"] for w in eager)
    e = sum(w.graph["eager"] for w in eager)
    unit = eager[0].graph["unit"]
    src = "sglang:cuda_graph_passes_total" if unit == "passes" else "the Decode batch lines' `cuda graph:`"
    idx = [w.index for w in eager]
    where = f"window {idx[0]}" if len(idx) == 1 else f"windows {', '.join(map(str, idx))}" if len(idx) <= 6 else \
        f"{len(idx)} windows from {idx[0]}"
    return (f"{where}: decode ran eager though CUDA graphs were captured ({e} of {g + e} decode {unit} eager, "
            f"{src}; tolerance {GP.TOLERANCE:.0%}): the benchmark did not measure the configured fast path")


def eager_note(windows: list[Window]) -> Optional[str]:
    """The DS711 note when --accept-eager let eager windows pass."""
    eager = [w for w in windows if w.graph and w.graph["state"] == "eager"]
    return f"DS711 --accept-eager: {_eager(eager)}" if eager else None


def _span(w: Window) -> str:
    return f"{w.start:.0f}–{w.end:.0f} s"


def _misbehaved(r: RankWindow, threshold: int) -> str:
    for g in r.step.evaluated if r.step else []:
        if g.passed is False:
            al = "no accept len" if g.accept_len is None else f"accept len {g.accept_len:.2f}"
            if g.expected:
                return f"speculation off at running batch {g.running} (<= threshold {threshold}, {al}) while on at another batch"
            return f"speculation stayed on at running batch {g.running} (> threshold {threshold}, {al}), the feature says off"
    return "the feature did not behave as its feature file says"


def _held(r: RankWindow, w: Window, windows: list[Window], first: int) -> str:
    if r.state == "pinned":
        return r.held or "its adaptive controller held its draft steps: the run measured static speculation"
    if r.state == "collapsed":
        al = [x.ranks[r.label].accept_len for x in windows if first <= x.index <= w.index and r.label in x.ranks]
        vals = [a for a in al if a is not None]
        shown = f"accept len {min(vals):.2f}–{max(vals):.2f}" if vals else "accept len ~1.00"
        return f"{shown} where speculation should be on: speculation collapsed (no error, no warning)"
    others = [x for x in w.ranks.values() if x.label != r.label and x.decode]
    busy = f"while {', '.join(x.name for x in others)} logged Decode batch lines" if others else "while the server was busy"
    return f"no Decode batch line {busy}: its evidence is missing"
