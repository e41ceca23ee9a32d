"""sglang while it serves (its Serving, the names from sglang/srt/metrics/collector.py, is in the
engine's face, __init__.py): its `Decode batch` lines as prove's and guard's observations, and its
counters' tokens per verify pass."""
from __future__ import annotations

from typing import Any, Optional

from dynspec_cli.evidence.observation import Decode, number



class DecodeBatchLines:
    """Each `Decode batch` line (`#running-req`, `accept len`, `cuda graph`), its DP rank from the
    line's tag."""

    def feed(self, obs) -> Optional[tuple[str, Decode]]:
        if obs.kind != "landmark" or obs.id != "decode-batch":
            return None
        d = obs.data
        try:
            running = int(d["running"])
        except (KeyError, ValueError):
            return None
        label = f"DP{obs.line.ranks['DP']}" if "DP" in obs.line.ranks else ""
        graph = d.get("graph")
        return label, Decode(running, number(d.get("accept_len")), number(d.get("accept_rate")), "log",
                             obs.line.text[:400], obs.line.offset,
                             cuda_graph={"True": True, "False": False}.get(graph) if graph else None)


def tokens_per_verify(c: dict[str, Any]) -> Optional[float]:
    """(generated - finished requests) / verify calls (sglang 0.5.13+): each request's first token
    comes from prefill, without a verify."""
    gen, ver = c.get("sglang:generation_tokens_total"), c.get("sglang:spec_verify_calls_total")
    if not gen or not ver:
        return None
    return (gen - (c.get("sglang:num_requests_total") or 0)) / ver
