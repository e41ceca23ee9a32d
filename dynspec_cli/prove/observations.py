"""What one step left behind. Log bytes are read with dynspec's own evidence code (the Feeder's
line splitting, the engine's classifier and its reader of serving lines, engines/protocol.py
DecodeReader, and the probe's lines, evidence/probe_lines.py); the load generator's JSON adds
per-request meta_info, /server_info and /metrics."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from dynspec_cli import engines
from dynspec_cli.evidence.observation import Decode, number
from dynspec_cli.evidence.observation import Observation
from dynspec_cli.evidence.scan import Feeder
from dynspec_cli.knowledge.features import Feature


@dataclass
class LogSlice:
    decode: list[Decode] = field(default_factory=list)
    probe_hits: dict[str, Any] = field(default_factory=dict)  # function -> count (int or ">=N")
    probe_lines: int = 0
    bytes_read: int = 0


class _Collector:
    """A Feeder's sink that keeps decode and probe observations only."""

    def __init__(self, out: LogSlice, decode) -> None:
        self.out = out
        self.decode = decode  # the engine's reader of its serving lines (engines/protocol.py DecodeReader)

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


class LogReader:
    def __init__(self, feature: Feature) -> None:
        self.engine = engines.of(feature)
        self.classifier = self.engine.classifier(feature)

    def read(self, data: bytes, start: int) -> LogSlice:
        """Observations in `data`, the log's bytes from offset `start` (a trailing partial line is
        judged too: the step is over)."""
        out = LogSlice(bytes_read=len(data))
        feeder = Feeder(self.classifier, _Collector(out, self.engine.decode_lines()), offset=start, numbered=False)
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
        out.append(Decode(running, number(s[2]) if len(s) > 2 else None, None, "metrics"))
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
