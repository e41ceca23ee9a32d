"""vLLM while it serves (its Serving is in the engine's face, __init__.py): its stats lines as prove's
and guard's observations, and its counters (vllm/v1/spec_decode/metrics.py; prometheus_client adds
`_total` to a Counter's name, and each carries engine="N", one per DP engine) read per rank."""
from __future__ import annotations

from typing import Any, Optional

from dynspec_cli.evidence.observation import Decode, number

DRAFTS, ACCEPTED = "vllm:spec_decode_num_drafts_total", "vllm:spec_decode_num_accepted_tokens_total"



class EngineStatsLines:
    """Each engine's stats line (`Engine 001: ... Running: N reqs`) is one observation, and the
    `SpecDecoding metrics` line vLLM logs right after it gives its `Mean acceptance length`; a stats
    line with no such line after it had no drafts in its interval (accept len none, counted as 1.00)."""

    def __init__(self) -> None:
        self.last: Optional[Decode] = None  # the stats line waiting for its SpecDecoding line

    def feed(self, obs) -> Optional[tuple[str, Decode]]:
        if obs.kind != "landmark":
            return None
        d = obs.data
        if obs.id == "engine-stats":
            if self.last is not None:
                self.last.awaiting = False
            self.last = None
            if not d.get("running"):  # no running batch (or V0's line): nothing to judge at a batch
                return None
            self.last = Decode(int(d["running"]), None, None, "log", obs.line.text[:400], obs.line.offset, awaiting=True)
            return f"engine {d['engine']}" if d.get("engine") is not None else "", self.last
        if obs.id == "spec-metrics" and self.last is not None:
            self.last.accept_len, self.last.awaiting = number(d.get("accept_len")), False
            self.last.text = (self.last.text + " | " + obs.line.text)[:600]
            self.last = None
        return None


def metric_accept(samples: list[dict[str, Any]]) -> dict[str, float]:
    """Per engine label, 1 + accepted / drafts between the first and last sample (vLLM's mean
    acceptance length, SpecDecodingProm's docstring), where drafts were made."""
    def per(sample, name):
        return {lb.get("engine"): v for n, lb, v in sample.get("metrics") or [] if n == name}

    a, b = samples[0], samples[-1]
    d0, d1 = per(a, DRAFTS), per(b, DRAFTS)
    a0, a1 = per(a, ACCEPTED), per(b, ACCEPTED)
    return {e: 1 + (a1.get(e, 0) - a0.get(e, 0)) / (d1[e] - d0[e]) for e in d1
            if e in d0 and d1[e] > d0[e] and a1.get(e, 0) >= a0.get(e, 0)}


def tokens_per_verify(c: dict[str, Any]) -> Optional[float]:
    """Mean acceptance length = 1 + accepted / drafts (SpecDecodingProm's docstring)."""
    drafts = c.get(DRAFTS)
    if drafts:
        return 1 + (c.get(ACCEPTED) or 0) / drafts
    return None
