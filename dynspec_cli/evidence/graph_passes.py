"""Decode in CUDA graphs or eager, from /metrics: the engine's counter of decode passes by mode
(Serving.graph_passes; sglang's cuda_graph_passes_total{mode=...}, configs/sglang/cuda_graph.toml
[[passes]]) per scheduler (rank), the deltas between two samples. A /metrics without the counter
(sglang before 0.5.7, or no sample) is "not reported": None, never zero eager passes and never a
finding."""
from __future__ import annotations

import re
from typing import Any, Iterable, Optional

GRAPH, EAGER = "decode_cuda_graph", "decode_none"  # every release that has the counter (0.5.7-0.5.23)
# Share of a window's decode passes that may run eager before the measured path is not the
# configured one: sglang's own /health_generate probe and a request that cannot replay a graph
# (logprobs, a batch mixing modes) run a handful of eager passes on a graph server; a batch above
# cuda_graph_max_bs runs eager on every pass while it lasts (issue 31's run: 480 of 2244, 21 %).
TOLERANCE = 0.05

_SERIES = re.compile(r'^([A-Za-z_:][A-Za-z0-9_:]*)(?:\{(.*)\})?\s+(\S+)')
_LABEL = re.compile(r'([A-Za-z_][A-Za-z0-9_]*)="((?:[^"\\]|\\.)*)"')


def parse_text(text: str) -> list[list[Any]]:
    """Prometheus text as [name, {label: value}, number] rows (the scraper's form)."""
    out: list[list[Any]] = []
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        m = _SERIES.match(line)
        if not m:
            continue
        try:
            value = float(m.group(3))
        except ValueError:
            continue
        out.append([m.group(1), dict(_LABEL.findall(m.group(2) or "")), value])
    return out


def rank_of(labels: dict[str, str]) -> str:
    """The scheduler a series is from: DPn when it has a dp_rank, TPn beside it when tp_rank > 0."""
    parts = []
    if labels.get("dp_rank") not in (None, ""):
        parts.append(f"DP{labels['dp_rank']}")
    if labels.get("tp_rank") not in (None, "", "0"):
        parts.append(f"TP{labels['tp_rank']}")
    return " ".join(parts)


def passes(series: Optional[Iterable], metric: Optional[str]) -> Optional[dict[str, dict[str, float]]]:
    """{rank: {mode: count}} of `metric` in one sample; None when the sample has no such counter."""
    if series is None or metric is None:
        return None
    out: dict[str, dict[str, float]] = {}
    for name, labels, value in series:
        if name == metric and "mode" in labels:
            out.setdefault(rank_of(labels), {})[labels["mode"]] = float(value)
    return out or None


def delta(before: Optional[dict], after: Optional[dict]) -> Optional[dict[str, dict[str, float]]]:
    """Per rank and mode, what was counted between two samples (a counter that went down was reset:
    counted from zero, as Prometheus' rate() does). None when `after` does not report the counter."""
    if after is None:
        return None
    out: dict[str, dict[str, float]] = {}
    for rank, modes in after.items():
        old = (before or {}).get(rank, {})
        out[rank] = {m: (v - old.get(m, 0.0)) if v >= old.get(m, 0.0) else v for m, v in modes.items()}
    return out


def add(a: Optional[dict], b: Optional[dict]) -> Optional[dict]:
    if a is None:
        return b
    if b is None:
        return a
    out = {r: dict(m) for r, m in a.items()}
    for r, modes in b.items():
        for m, v in modes.items():
            out.setdefault(r, {})[m] = out.get(r, {}).get(m, 0.0) + v
    return out


def decode_split(d: Optional[dict[str, float]]) -> tuple[int, int]:
    """(graph passes, eager passes) of one rank's modes."""
    d = d or {}
    return int(d.get(GRAPH, 0)), int(d.get(EAGER, 0))


def eager_share(graph: int, eager: int) -> Optional[float]:
    return eager / (graph + eager) if graph + eager else None
