"""A guarded run as a picture, for a person who would rather look than read the table: accept length
per window and DP rank, the counters' tokens per verify, the bad windows shaded with their state, and
the reasons the run is invalid. It is drawn from the report document (`dynspec-guard/1`) alone and
written as SVG beside it (`RESULT.dynspec-guard.svg`); plain text, no plotting library."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Optional
from xml.sax.saxutils import escape

from dynspec_cli.guard.windows import GOOD

WIDTH, HEIGHT = 760, 300
LEFT, RIGHT, TOP, BOTTOM = 56, 16, 40, 58
COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22")


def path_for(report: str) -> str:
    return (report[:-len(".json")] if report.endswith(".json") else report) + ".svg"


def write(doc: dict[str, Any], path: str) -> str:
    p = Path(path)
    tmp = p.with_name(p.name + ".tmp")
    tmp.write_text(svg(doc), encoding="utf-8")
    tmp.replace(p)
    return str(p)


def svg(doc: dict[str, Any]) -> str:
    ws = doc.get("windows") or []
    end = max([w["end"] for w in ws] + [1.0])
    vals = [rk["accept_len"] for w in ws for rk in w["ranks"] if rk.get("accept_len") is not None]
    vals += [w["tokens_per_verify"] for w in ws if w.get("tokens_per_verify") is not None]
    top = max([4.0] + [v + 0.5 for v in vals])
    pw, ph = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def x(t: float) -> float:
        return LEFT + pw * t / end

    def y(a: float) -> float:
        return TOP + ph * (1 - (a - 1.0) / (top - 1.0))

    valid = doc.get("valid")
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" '
           'font-family="sans-serif" font-size="11">',
           f'<rect width="{WIDTH}" height="{HEIGHT}" fill="white"/>',
           f'<text x="{LEFT}" y="18" font-size="14" font-weight="bold" fill="{"#2a7d2a" if valid else "#c62828"}">'
           f'{"VALID" if valid else "INVALID"}</text>',
           f'<text x="{LEFT + 62}" y="18" font-size="12">{escape(_title(doc))}</text>']
    for w in ws:  # eager decode (the CUDA-graph fast path not measured): shaded orange, marked at the top
        if (w.get("compute_path") or {}).get("state") == "eager":
            out.append(f'<rect x="{x(w["start"]):.1f}" y="{TOP - 6}" width="{max(1.0, x(w["end"]) - x(w["start"])):.1f}" '
                       f'height="{ph + 6}" fill="#ef6c00" fill-opacity="0.12"><title>window {w["index"]}: eager decode '
                       f'({w["compute_path"]["eager"]} of {w["compute_path"]["eager"] + w["compute_path"]["graph"]} '
                       f'{w["compute_path"]["unit"]})</title></rect>')
    for w in ws:  # bad windows, shaded, their state written once per run of them
        if w["state"] not in GOOD and w["state"] != "eager":
            out.append(f'<rect x="{x(w["start"]):.1f}" y="{TOP}" width="{max(1.0, x(w["end"]) - x(w["start"])):.1f}" '
                       f'height="{ph}" fill="#c62828" fill-opacity="0.13"><title>window {w["index"]}: '
                       f'{escape(w["state"])}</title></rect>')
    prev = None
    for w in ws:
        if w["state"] not in GOOD and w["state"] != prev:
            out.append(f'<text x="{x(w["start"]) + 2:.1f}" y="{TOP + 12}" fill="#c62828">{escape(w["state"])}</text>')
        prev = w["state"]
    for a in range(1, int(top) + 1):  # axes and grid
        out.append(f'<line x1="{LEFT}" x2="{LEFT + pw}" y1="{y(a):.1f}" y2="{y(a):.1f}" stroke="#ddd"/>'
                   f'<text x="{LEFT - 6}" y="{y(a) + 4:.1f}" text-anchor="end">{a}</text>')
    for t in _ticks(end):
        out.append(f'<text x="{x(t):.1f}" y="{TOP + ph + 14}" text-anchor="middle">{t:g}</text>')
    out.append(f'<line x1="{LEFT}" x2="{LEFT}" y1="{TOP}" y2="{TOP + ph}" stroke="#444"/>'
               f'<line x1="{LEFT}" x2="{LEFT + pw}" y1="{TOP + ph}" y2="{TOP + ph}" stroke="#444"/>'
               f'<text x="{LEFT + pw / 2:.1f}" y="{TOP + ph + 28}" text-anchor="middle">seconds since the benchmark started '
               f'(windows of {doc.get("window_s", 0):g} s)</text>'
               f'<text transform="translate(14 {TOP + ph / 2:.1f}) rotate(-90)" text-anchor="middle">accept length</text>')
    legend = []
    ranks = [r or "rank 0" for r in doc.get("ranks") or [None]]
    for i, label in enumerate(ranks):
        pts = [(w, rk) for w in ws for rk in w["ranks"] if (rk.get("rank") or "rank 0") == label]
        color = COLORS[i % len(COLORS)]
        out += _series([(x((w["start"] + w["end"]) / 2), y(rk["accept_len"]) if rk.get("accept_len") is not None else None)
                        for w, rk in pts], color, "")
        legend.append((f"{label} (Decode batch lines)", color, ""))
    tpv = [(x((w["start"] + w["end"]) / 2), y(w["tokens_per_verify"]) if w.get("tokens_per_verify") is not None else None)
           for w in ws]
    if any(v is not None for _, v in tpv):
        out += _series(tpv, "#666", ' stroke-dasharray="4 3"')
        legend.append(("tokens per verify (/metrics counters)", "#666", ' stroke-dasharray="4 3"'))
    lx = LEFT
    for text, color, dash in legend:
        out.append(f'<line x1="{lx}" x2="{lx + 18}" y1="{HEIGHT - 12}" y2="{HEIGHT - 12}" stroke="{color}" stroke-width="2"{dash}/>'
                   f'<text x="{lx + 22}" y="{HEIGHT - 8}">{escape(text)}</text>')
        lx += 30 + 6.2 * len(text)
    for i, r in enumerate(doc.get("reasons") or []):
        out.append(f'<text x="{WIDTH - RIGHT}" y="{18 + 13 * i}" text-anchor="end" fill="#c62828">'
                   f'{escape(r["code"])} {escape(r["kind"])} from window {r["window"]}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def _series(points: list[tuple[float, Optional[float]]], color: str, dash: str) -> list[str]:
    """A polyline per run of known values, a dot for each value."""
    out, run = [], []
    for px, py in points + [(0.0, None)]:
        if py is None:
            if len(run) > 1:
                out.append(f'<polyline fill="none" stroke="{color}" stroke-width="2"{dash} points="'
                           + " ".join(f"{a:.1f},{b:.1f}" for a, b in run) + '"/>')
            run = []
            continue
        run.append((px, py))
        out.append(f'<circle cx="{px:.1f}" cy="{py:.1f}" r="2.5" fill="{color}"/>')
    return out


def _ticks(end: float) -> list[float]:
    step = next(s for s in (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 1800, 3600, 7200, float("inf")) if end / s <= 10)
    step = step if step != float("inf") else end / 5
    return [i * step for i in range(int(end // step) + 1)]


def _title(doc: dict[str, Any]) -> str:
    b = doc.get("benchmark") or {}
    th = doc.get("threshold")
    return (f"dynspec guard · run {doc.get('run')} · feature {doc.get('feature')} · threshold "
            f"{'none' if th is None else th} · benchmark exited {b.get('exit_code')} after {b.get('seconds', 0):.0f} s")
