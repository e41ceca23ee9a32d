"""How a proof is shown: a rich table and a terminal chart of accept length against running batch
with the threshold marked; `report.html` (self-contained, inline SVG, no JavaScript) and
`prove.json` for --report DIR."""
from __future__ import annotations

import html
import json
import statistics
from pathlib import Path
from typing import Any, Optional

from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from dynspec_cli import engines

OUTCOME = {"proven": ("✓", "green", "PROVEN — the feature does its job"),
           "fails": ("✗", "red", "FAILS — the feature does not behave as expected"),
           "inconclusive": ("?", "yellow", "INCONCLUSIVE — not enough evidence"),
           "died": ("✗", "red", "SERVER DIED during the run")}
RESULT = {"pass": "green", "fail": "red", "inconclusive": "yellow"}
STEP_COLOURS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22"]


def by_batch(doc: dict[str, Any]) -> list[tuple[int, float, int]]:
    """(running batch, median accept length, lines) over all steps, from steady lines where there
    are some (a line without accept len counts as 1.0)."""
    lines: dict[int, list[dict]] = {}
    for s in doc.get("steps") or []:
        for d in s.get("decode") or []:
            lines.setdefault(d["running"], []).append(d)
    out = []
    for b in sorted(lines):
        ds = [d for d in lines[b] if d.get("stable")] or lines[b]
        vals = [d["accept_len"] if d.get("accept_len") is not None else 1.0 for d in ds]
        out.append((b, statistics.median(vals), len(ds)))
    return out


def eager_note(doc: dict[str, Any]) -> Optional[str]:
    """DS712 when decode ran eager at some step: that step's tokens/s are eager decode's."""
    steps = doc.get("steps") or []
    eager = [s for s in steps if (s.get("compute_path") or {}).get("decode") in ("eager", "mixed")]
    if not eager:
        return None
    graphs = [s for s in steps if (s.get("compute_path") or {}).get("decode") == "graphs"]
    parts = [f"step {s['index']} (concurrency {s['concurrency']}, {decode_cell(s)}, {_tps(s)} tok/s)" for s in eager]
    ref = (f"; in graphs: " + ", ".join(f"step {s['index']} {_tps(s)} tok/s" for s in graphs)) if graphs else ""
    return f"DS712 decode ran eager at {', '.join(parts)}{ref}"


def decode_cell(s: dict[str, Any]) -> str:
    """The step's decode compute path: graphs, eager, mixed (with the eager count), not reported."""
    cp = s.get("compute_path") or {}
    d = cp.get("decode") or "not reported"
    if d in ("eager", "mixed"):
        return f"{d} {cp['eager']}/{cp['eager'] + cp['graph']} {cp['unit']}"
    return d


def _tps(s: dict[str, Any]) -> str:
    v = s.get("tokens_per_s")
    return "-" if v is None else f"{v:.0f}"


def _running(s: dict[str, Any]) -> str:
    rr = s.get("running_range")
    if not rr:
        return "unknown"
    mode = s.get("running_mode")
    return str(mode) if rr[0] == rr[1] else f"{mode} ({rr[0]}–{rr[1]})"


def render(doc: dict[str, Any], out: Console) -> None:
    c = doc.get("conclusion") or {}
    mark, colour, head = OUTCOME.get(c.get("outcome"), ("?", "yellow", "UNKNOWN"))
    t = doc["target"]
    out.print(f"[bold {colour}]{mark} {head}[/]  [dim](feature {escape(doc['feature'])}, "
              f"{escape(t.get('run') or t.get('url') or '')} on {escape(t.get('host') or '')})[/]")
    out.print(f"  {escape(c.get('message') or '')}")
    if c.get("hint"):
        out.print(f"  [dim]→ {escape(c['hint'])}[/]")
    out.print(f"  threshold {'none' if doc['threshold'] is None else doc['threshold']} [dim](from {escape(doc['threshold_source'])})[/]   "
              f"verdict {doc.get('verdict') or 'unknown'}   {doc.get('engine') or engines.DEFAULT} {escape(str(doc.get('sglang_version') or 'unknown'))}   "
              f"worker {escape(str(doc.get('worker') or 'unknown'))}")
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, expand=False)
    for col in ("step", "concurrency", "running\nbatch", "accept\nlen", "speculation", "expected", "result", "decode",
                "tok/s"):
        table.add_column(col, justify="right" if col in ("step", "concurrency", "accept\nlen", "tok/s") else "left",
                         overflow="fold")
    wide = out.width >= 150
    if wide:
        table.add_column("evidence", overflow="fold")
    for s in doc.get("steps") or []:
        al = s.get("accept_len")
        res = s["outcome"]
        row = [str(s["index"]), str(s["concurrency"]), _running(s), "-" if al is None else f"{al:.2f}",
               s["speculation"], s["expected"], f"[{RESULT[res]}]{res}[/]", decode_cell(s), _tps(s)]
        table.add_row(*row, *([escape("; ".join(s["evidence"]))] if wide else []))
    out.print(table)
    if not wide:  # evidence under the table: a narrow terminal would squeeze the column to nothing
        for s in doc.get("steps") or []:
            out.print(f"  [bold]step {s['index']}[/] [dim]evidence:[/] " + escape("; ".join(s["evidence"])))
    note = eager_note(doc)
    if note:
        out.print(f"  [yellow]![/] {escape(note)}")
    for line in chart_lines(doc):
        out.print(line)


def chart_lines(doc: dict[str, Any], width: int = 36) -> list[str]:
    pts = by_batch(doc)
    if not pts:
        return ["  [dim](no Decode batch lines: no chart)[/]"]
    th = doc["threshold"]
    eps = doc.get("epsilon", 0.05)
    below = (doc.get("expect") or {}).get("speculate_at_or_below_threshold", True)
    top = max(2.0, max(v for _, v, _ in pts))
    out = [f"  [bold]accept length by running batch[/]  [dim]({'no threshold' if th is None else f'threshold {th}'}; speculation on above {1 + eps:.2f})[/]"]
    groups = [g for s in doc.get("steps") or [] for g in s.get("groups") or []]
    undecided = {g["running"] for g in groups if g.get("not_evaluated")} - {g["running"] for g in groups if g.get("evaluated")}
    marked = False
    for b, v, n in pts:
        if th is not None and b > th and not marked:
            out.append(f"  {'─' * 11}┼─ threshold {th} ─ " + "[dim]speculation expected off below this line[/]")
            marked = True
        bar = "█" * max(1, round(v / top * width))
        on = v > 1 + eps
        col = "green" if on else "red"
        expected = False if th is not None and b > th else (True if below else None)
        wrong = f" [bold red]✗ expected {'on' if expected else 'off'}[/]" if expected is not None and on != expected else ""
        if wrong and b in undecided:  # (decision.py: too little evidence to call it wrong)
            wrong = " [yellow]? not decided[/]"
        out.append(f"  batch {b:>4} │[{col}]{bar}[/] {v:.2f} [dim]({n})[/]{wrong}")
    if not marked and th is not None:
        out.append(f"  {'─' * 11}┼─ threshold {th} ─ [dim]no batch above it was seen[/]")
    out.append(f"  {' ' * 11}└{'─' * width}")
    out.append(f"  {' ' * 12}0{' ' * (width - len(f'{top:.1f}') - 1)}{top:.1f}")
    return out


# --- HTML ---------------------------------------------------------------------------------------
def svg_chart(doc: dict[str, Any], w: int = 720, h: int = 380) -> str:
    steps = doc.get("steps") or []
    pts = [(s["index"], d) for s in steps for d in (s.get("decode") or [])]
    th = doc["threshold"]
    eps = doc.get("epsilon", 0.05)
    if not pts:
        return f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="60"><text x="10" y="30">' \
               f'no Decode batch lines: no chart</text></svg>'
    ml, mr, mt, mb = 56, 20, 20, 66
    xmax = max(max(d["running"] for _, d in pts), (th or 0) + 1) + 1
    ymax = max(2.0, max((d["accept_len"] or 1.0) for _, d in pts)) * 1.1

    def x(v: float) -> float:
        return ml + v / xmax * (w - ml - mr)

    def y(v: float) -> float:
        return h - mb - v / ymax * (h - mt - mb)

    e = []
    e.append(f'<rect x="{ml}" y="{mt}" width="{w - ml - mr}" height="{h - mt - mb}" fill="#fafafa" stroke="#ccc"/>')
    for i in range(0, int(ymax) + 1):
        e.append(f'<line x1="{ml}" x2="{w - mr}" y1="{y(i):.1f}" y2="{y(i):.1f}" stroke="#e5e5e5"/>'
                 f'<text x="{ml - 8}" y="{y(i) + 4:.1f}" text-anchor="end" font-size="11">{i}</text>')
    step_x = max(1, xmax // 12)
    for i in range(0, xmax + 1, step_x):
        e.append(f'<text x="{x(i):.1f}" y="{h - mb + 16}" text-anchor="middle" font-size="11">{i}</text>')
    tx = x(th + 0.5) if th is not None else w - mr
    e.append(f'<rect x="{tx:.1f}" y="{mt}" width="{w - mr - tx:.1f}" height="{h - mt - mb}" fill="#fdecec" opacity="0.6"/>')
    e.append(f'<line x1="{tx:.1f}" x2="{tx:.1f}" y1="{mt}" y2="{h - mb}" stroke="#c0392b" stroke-dasharray="6,4" stroke-width="2"/>'
             f'<text x="{tx + 4:.1f}" y="{mt + 14}" font-size="12" fill="#c0392b">threshold {th}</text>')
    e.append(f'<line x1="{ml}" x2="{w - mr}" y1="{y(1 + eps):.1f}" y2="{y(1 + eps):.1f}" stroke="#888" stroke-dasharray="2,3"/>'
             f'<text x="{w - mr - 4}" y="{y(1 + eps) - 4:.1f}" text-anchor="end" font-size="11" fill="#666">'
             f'1 + ε = {1 + eps:.2f}: above, speculation on</text>')
    for n, (idx, d) in enumerate(pts):
        colour = STEP_COLOURS[(idx - 1) % len(STEP_COLOURS)]
        jitter = (n * 5 % 7 - 3) * 0.03  # deterministic spread of equal points
        e.append(f'<circle cx="{x(d["running"] + jitter):.1f}" cy="{y(d["accept_len"] or 1.0):.1f}" r="3" fill="{colour}" '
                 f'opacity="{0.85 if d.get("stable") else 0.3}"/>')
    med = by_batch(doc)
    path = " ".join(f"{'M' if i == 0 else 'L'}{x(b):.1f},{y(v):.1f}" for i, (b, v, _) in enumerate(med))
    e.append(f'<path d="{path}" fill="none" stroke="#222" stroke-width="1.5"/>')
    for b, v, _ in med:
        e.append(f'<rect x="{x(b) - 4:.1f}" y="{y(v) - 4:.1f}" width="8" height="8" fill="#222" '
                 f'transform="rotate(45 {x(b):.1f} {y(v):.1f})"/>')
    e.append(f'<text x="{(ml + w - mr) / 2:.0f}" y="{h - mb + 34}" text-anchor="middle" font-size="12">'
             f'running batch (#running-req of the Decode batch lines)</text>')
    e.append(f'<text x="14" y="{(mt + h - mb) / 2:.0f}" font-size="12" text-anchor="middle" '
             f'transform="rotate(-90 14 {(mt + h - mb) / 2:.0f})">accept length</text>')
    legend = []
    pitch = min(110, (w - ml - mr) // max(1, len(steps)))
    for i, s in enumerate(steps):
        colour = STEP_COLOURS[i % len(STEP_COLOURS)]
        legend.append(f'<circle cx="{ml + 10 + i * pitch}" cy="{h - 12}" r="4" fill="{colour}"/>'
                      f'<text x="{ml + 18 + i * pitch}" y="{h - 8}" font-size="11">step {s["index"]} (c={s["concurrency"]})</text>')
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" '
            f'font-family="sans-serif" role="img" aria-label="accept length by running batch">'
            + "".join(e) + "".join(legend) + "</svg>")


def html_report(doc: dict[str, Any]) -> str:
    c = doc.get("conclusion") or {}
    mark, colour, head = OUTCOME.get(c.get("outcome"), ("?", "yellow", "UNKNOWN"))
    esc = html.escape
    rows = []
    for s in doc.get("steps") or []:
        al = s.get("accept_len")
        res = s["outcome"]
        rows.append("<tr>" + "".join(f"<td>{esc(str(v))}</td>" for v in (
            s["index"], s["concurrency"], _running(s), "-" if al is None else f"{al:.2f}", s["speculation"], s["expected"],
            decode_cell(s), _tps(s)))
            + f'<td class="{res}">{esc(res)}</td><td>{"<br>".join(esc(x) for x in s["evidence"])}</td></tr>')
    t = doc["target"]
    facts = [("target", f"{t.get('run') or t.get('url')} on {t.get('host')}"), ("feature", doc["feature"]),
             ("threshold", f"{doc['threshold']} (from {doc['threshold_source']})"),
             ("verdict", doc.get("verdict") or "unknown"), (doc.get("engine") or engines.DEFAULT, doc.get("sglang_version") or "unknown"),
             ("worker", doc.get("worker") or "unknown"),
             ("plan", f"steps {doc['plan']['steps']}, {doc['plan']['duration']} s and at most "
                      f"{doc['plan']['max_requests'] or 'unbounded'} requests per step")]
    if doc.get("probe"):
        hits = ", ".join(f"{h['function']} ×{h['count']}" for h in doc["probe"].get("hits") or []) or "no hit"
        facts.append(("probe", hits))
    fact_rows = "".join(f"<tr><th>{esc(k)}</th><td>{esc(str(v))}</td></tr>" for k, v in facts)
    hint = f'<p class="hint">→ {esc(c["hint"])}</p>' if c.get("hint") else ""
    css = {"green": "#1e8449", "red": "#c0392b", "yellow": "#b7950b"}[colour]
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>dynspec prove — {esc(doc['feature'])}</title>
<style>
body {{ font-family: sans-serif; margin: 2em; color: #222; max-width: 1100px; }}
h1 {{ color: {css}; font-size: 1.4em; }}
table {{ border-collapse: collapse; margin: 1em 0; }}
td, th {{ border: 1px solid #ddd; padding: 4px 8px; text-align: left; vertical-align: top; font-size: 0.9em; }}
th {{ background: #f3f3f3; }}
td.pass {{ color: #1e8449; font-weight: bold; }} td.fail {{ color: #c0392b; font-weight: bold; }}
td.inconclusive {{ color: #b7950b; font-weight: bold; }}
.hint {{ color: #555; }}
</style></head><body>
<h1>{esc(mark)} {esc(head)}</h1>
<p>{esc(c.get('message') or '')}</p>{hint}
<table>{fact_rows}</table>
{svg_chart(doc)}
{('<p class="hint">' + esc(eager_note(doc)) + '</p>') if eager_note(doc) else ''}
<table><tr><th>step</th><th>concurrency</th><th>running batch</th><th>accept len</th><th>speculation</th>
<th>expected</th><th>decode</th><th>tokens/s</th><th>result</th><th>evidence</th></tr>
{''.join(rows)}
</table>
<p style="color:#777;font-size:0.8em">dynspec prove · speculation counts as on when the accept length exceeds
1 + ε ({1 + doc.get('epsilon', 0.05):.2f}), judged on Decode batch lines whose previous line showed the same
running batch.</p>
</body></html>
"""


def write_report(doc: dict[str, Any], directory: str) -> list[str]:
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    (d / "prove.json").write_text(json.dumps(doc, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    (d / "report.html").write_text(html_report(doc), encoding="utf-8")
    return [str(d / "report.html"), str(d / "prove.json")]
