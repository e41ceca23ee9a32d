"""What one step left behind. Log bytes are read with dynspec's own evidence code (the Feeder's
line splitting, `lines_of`, the Classifier with the `decode-batch` row of
configs/sglang/log_lines.toml and the probe's lines, evidence/probe_lines.py); the load generator's JSON adds
per-request meta_info, /server_info and /metrics."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from dynspec_cli.evidence.rules import Observation
from dynspec_cli.evidence.scan import Feeder
from dynspec_cli.knowledge.features import Feature


@dataclass
class Decode:
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


@dataclass
class LogSlice:
    decode: list[Decode] = field(default_factory=list)
    probe_hits: dict[str, Any] = field(default_factory=dict)  # function -> count (int or ">=N")
    probe_lines: int = 0
    bytes_read: int = 0


class DecodeLines:
    """Decode observations from either engine's classified lines, with the rank that logged them.
    sglang: each `Decode batch` line (`#running-req`, `accept len`), its DP rank from the line's tag.
    vLLM: each engine's stats line (`Engine 001: ... Running: N reqs`) is one, and the `SpecDecoding
    metrics` line vLLM logs right after it gives its `Mean acceptance length`; a stats line with no
    such line after it had no drafts in its interval (accept len none, counted as 1.00)."""

    def __init__(self, engine: str = "sglang") -> None:
        self.engine = engine
        self.last: Optional[Decode] = None  # vLLM: the stats line waiting for its SpecDecoding line

    def feed(self, obs: Observation) -> Optional[tuple[str, Decode]]:
        if obs.kind != "landmark":
            return None
        d = obs.data
        if obs.id == "decode-batch":
            try:
                running = int(d["running"])
            except (KeyError, ValueError):
                return None
            label = f"DP{obs.line.ranks['DP']}" if "DP" in obs.line.ranks else ""
            graph = d.get("graph")
            return label, Decode(running, _float(d.get("accept_len")), _float(d.get("accept_rate")), "log",
                                 obs.line.text[:400], obs.line.offset,
                                 cuda_graph={"True": True, "False": False}.get(graph) if graph else None)
        if obs.id == "engine-stats":
            if self.last is not None:
                self.last.awaiting = False
            self.last = None
            if not d.get("running"):  # no running batch (or V0's line): nothing to judge at a batch
                return None
            self.last = Decode(int(d["running"]), None, None, "log", obs.line.text[:400], obs.line.offset, awaiting=True)
            return f"engine {d['engine']}" if d.get("engine") is not None else "", self.last
        if obs.id == "spec-metrics" and self.last is not None:
            self.last.accept_len, self.last.awaiting = _float(d.get("accept_len")), False
            self.last.text = (self.last.text + " | " + obs.line.text)[:600]
            self.last = None
        return None


class _Collector:
    """A Feeder's sink that keeps decode and probe observations only."""

    def __init__(self, out: LogSlice, engine: str) -> None:
        self.out = out
        self.decode = DecodeLines(engine)

    def feed(self, obs: Observation) -> None:
        got = self.decode.feed(obs)
        if got is not None:
            self.out.decode.append(got[1])
        elif obs.kind == "probe":
            self.out.probe_lines += 1
            doc = obs.data.get("event")
            if doc is not None and doc.get("event") == "hit":
                fn = str(doc.get("function") or doc.get("target") or "?")
                count = doc.get("count", doc.get("calls", 1))
                self.out.probe_hits[fn] = _max_count(self.out.probe_hits.get(fn), count)


def classifier(feature: Feature):
    from dynspec_cli import engines

    return engines.get(feature.engine).classifier(feature)


class LogReader:
    def __init__(self, feature: Feature) -> None:
        self.classifier = classifier(feature)
        self.engine = feature.engine

    def read(self, data: bytes, start: int) -> LogSlice:
        """Observations in `data`, the log's bytes from offset `start` (a trailing partial line is
        judged too: the step is over)."""
        out = LogSlice(bytes_read=len(data))
        feeder = Feeder(self.classifier, _Collector(out, self.engine), offset=start, numbered=False)
        feeder.feed(data)
        feeder.flush()
        for d in out.decode:
            d.awaiting = False
        mark_stable(out.decode)
        return out


def from_samples(samples: list) -> list[Decode]:
    """/metrics samples [t, num_running_reqs, spec_accept_length] as decode observations."""
    out = []
    for s in samples or []:
        try:
            running = int(s[1])
        except (TypeError, ValueError, IndexError):
            continue
        if running <= 0:
            continue
        out.append(Decode(running, _float(s[2]) if len(s) > 2 else None, None, "metrics"))
    mark_stable(out)
    return out


def mark_stable(decode: list[Decode]) -> None:
    """A line's accept length averages the steps since the previous line, while `#running-req` is
    the batch at the moment of logging: only a line whose predecessor shows the same batch says
    what speculation did at that batch."""
    prev = None
    for d in decode:
        d.stable = prev is not None and prev.running == d.running
        prev = d


def _float(v) -> Optional[float]:
    if v is None:
        return None
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


def _max_count(a, b):
    def key(x):
        if isinstance(x, (int, float)):
            return float(x)
        if isinstance(x, str) and x.startswith(">="):
            try:
                return float(x[2:]) + 0.5
            except ValueError:
                return 0.0
        return 0.0

    if a is None:
        return b
    return a if key(a) >= key(b) else b
