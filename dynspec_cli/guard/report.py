"""How a guarded run is shown: a table of windows on stderr (stdout is the benchmark's), with an
accept-length strip a person reads at a glance, the reasons the run is invalid, and the JSON
document `dynspec-guard/1` written beside the benchmark's own result file (its chart beside it:
guard/chart.py)."""
from __future__ import annotations

import datetime
import json
import os
from pathlib import Path
from typing import Any, Optional

import msgspec
from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from dynspec_cli.guard import windows as W
from dynspec_cli.guard.watch import Guarded
from dynspec_cli.knowledge.findings import doc as finding_doc
from dynspec_cli.knowledge.tables import configs_dir, load_toml

SCHEMA = "dynspec-guard/1"
STATE_STYLE = {"effective": "green", "plain": "cyan", "idle": "dim", "undecided": "yellow", "collapsed": "red",
               "silent": "red", "misbehaved": "red", "pinned": "red", "restarted": "red", "died": "red", "counter-reset": "red",
               "evidence-stopped": "red"}
BARS = " ▁▂▃▄▅▆▇█"


class Client(msgspec.Struct, forbid_unknown_fields=True):
    name: str
    match: list[str]
    file_flag: Optional[str] = None
    dir_flag: Optional[str] = None
    suffix: str = ""


class Clients(msgspec.Struct, forbid_unknown_fields=True):
    client: list[Client]


def result_path(argv: list[str], name: str, given: Optional[str]) -> str:
    """Where the report goes: --report, else beside the benchmark's result file as its client
    names it (configs/benchmarks.toml), else ./dynspec-guard-NAME-TIME.json."""
    if given:
        return given
    words = {os.path.basename(a) for a in argv}
    for c in load_toml(configs_dir() / "benchmarks.toml", Clients).client:
        if not all(m in words for m in c.match):
            continue
        f, d = _flag(argv, c.file_flag), _flag(argv, c.dir_flag)
        if f:
            stem = f[:-len(c.suffix)] if c.suffix and f.endswith(c.suffix) else f
            return os.path.join(d or "", stem + ".dynspec-guard.json")
        if d:
            return os.path.join(d, "dynspec-guard.json")
    stamp = datetime.datetime.now().strftime("%Y%m%dT%H%M%S")
    return f"dynspec-guard-{name}-{stamp}.json"


def _flag(argv: list[str], flag: Optional[str]) -> Optional[str]:
    from dynspec_cli.evidence.argv import flag_value

    return flag_value(argv, flag) if flag else None


def document(g: Guarded, *, name: str, receipt_path: str, gate: str, feature: str, threshold: int, window: float,
             hold: int, ranks: list[str], exit_code: int, provenance: Optional[dict] = None) -> dict[str, Any]:
    c = g.child
    return {
        "schema": SCHEMA, "valid": not g.reasons, "exit_code": exit_code, "run": name, "receipt": receipt_path,
        "gate": gate, "feature": feature, "threshold": threshold, "window_s": window, "invalid_after_windows": hold,
        "ranks": [r or None for r in ranks], "metrics_available": g.metrics_available, "interrupted": g.interrupted,
        "benchmark": {"argv": c.argv, "exit_code": c.exit_code, "started_at": c.started, "ended_at": c.ended,
                      "seconds": round((c.ended or c.started) - c.started, 3)},
        "reasons": [r.to_json() for r in g.reasons], "notes": g.notes, "provenance": provenance, "adaptive": g.adaptive,
        "windows": [w.to_json() for w in g.windows],
    }


def write(doc: dict[str, Any], path: str) -> str:
    p = Path(path)
    if p.parent and not p.parent.exists():
        p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_name(p.name + ".tmp")
    tmp.write_text(json.dumps(doc, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    tmp.replace(p)
    return str(p)


def strip(windows: list[W.Window]) -> str:
    """One character per window: the accept length of its busiest rank (1.0 low, 4.0 high); a
    cross where the window was bad."""
    out = []
    for w in windows:
        vals = [r.accept_len for r in w.ranks.values() if r.accept_len is not None]
        if w.state not in W.GOOD:
            out.append("✗")
        elif not vals:
            out.append("·")
        else:
            out.append(BARS[max(1, min(8, round((max(vals) - 1.0) / 3.0 * 8)))])
    return "".join(out)


def render(doc: dict[str, Any], g: Guarded, out: Console) -> None:
    b = doc["benchmark"]
    ok = doc["valid"]
    head = ("[bold green]✓ VALID[/] — speculation was live and behaved as proven throughout" if ok else
            "[bold red]✗ INVALID[/] — the benchmark's numbers do not measure the proven server")
    out.print(f"{head}  [dim](run {escape(doc['run'])}, feature {escape(doc['feature'])}, threshold "
              f"{'none' if doc['threshold'] is None else doc['threshold']}, {len(g.windows)} windows of {doc['window_s']:g} s; benchmark exited "
              f"{b['exit_code']} after {b['seconds']:.1f} s)[/]")
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, expand=False)
    for col in ("window", "time", "state", "rank", "batch", "accept len", "spec", "expected", "counters tok/verify",
                "decode"):
        table.add_column(col)
    for ws in _runs(g.windows):  # windows in a row that say the same are one row
        a, z = ws[0], ws[-1]
        for i, label in enumerate(a.ranks or {"": None}):
            rs = [w.ranks.get(label) or W.RankWindow(label) for w in ws]
            lo = [r.step.running_range[0] for r in rs if r.step and r.step.running_range]
            hi = [r.step.running_range[1] for r in rs if r.step and r.step.running_range]
            batch = "" if not lo else str(min(lo)) if min(lo) == max(hi) else f"{min(lo)}–{max(hi)}"
            table.add_row(_range(a.index, z.index) if i == 0 else "", f"{a.start:.0f}–{z.end:.0f} s" if i == 0 else "",
                          _styled(_shown_state(a, rs[0], i)), label, batch, _range_f([r.accept_len for r in rs]),
                          rs[0].step.speculation if rs[0].step and rs[0].step.groups else "",
                          rs[0].step.expected if rs[0].step and rs[0].step.groups else "",
                          _range_f([w.tokens_per_verify for w in ws]) if i == 0 else "",
                          _decode(ws) if i == 0 else "")
    out.print(table)
    out.print(f"  accept len per window: [bold]{strip(g.windows)}[/]  [dim](▁ 1.0 … █ 4.0, ✗ a bad window)[/]")
    for r in g.reasons:
        d = finding_doc(r.code)
        out.print(f"  [red]✗ {r.code} {escape(d.name if d else r.kind)}[/]: {escape(r.message)}")
        if d:
            out.print(f"      [dim]fix: {escape(d.fix)}[/]")
    notes: dict[str, list[int]] = {}
    for w in g.windows:
        for e in w.events:
            if not e.fatal:
                notes.setdefault(e.message, []).append(w.index)
    for msg, idx in notes.items():
        out.print(f"  [yellow]![/] window{'s' if len(idx) > 1 else ''} {_range(idx[0], idx[-1])}: {escape(msg)}")
    for n in g.notes:
        out.print(f"  [yellow]![/] {escape(n)}")
    if g.metrics_available is False:
        out.print("  [yellow]![/] no /metrics (start the server with --enable-metrics): judged on the log alone")
    out.print(f"  report: {escape(doc.get('path') or '')}" + (f"  chart: {escape(doc['chart'])}" if doc.get("chart") else ""))


def _decode(ws: list[W.Window]) -> str:
    """The windows' decode compute path: graphs, eager (with its share), not reported."""
    g = [w.graph for w in ws if w.graph]
    if not g:
        return ""
    state = g[0]["state"]
    if state.startswith("eager"):
        e, n = sum(x["eager"] for x in g), sum(x["eager"] + x["graph"] for x in g)
        return f"{state} {e}/{n} {g[0]['unit']}"
    return state


def _key(w: W.Window) -> tuple:
    return ((w.graph or {}).get("state"), w.state, tuple((r.label, r.state, r.step.speculation if r.step else "") for r in w.ranks.values()),
            bool([e for e in w.events if e.fatal]))


def _runs(windows: list[W.Window]) -> list[list[W.Window]]:
    out: list[list[W.Window]] = []
    for w in windows:
        if out and _key(out[-1][-1]) == _key(w) and not any(e.fatal for e in w.events):
            out[-1].append(w)
        else:
            out.append([w])
    return out


def _shown_state(w: W.Window, r: W.RankWindow, row: int) -> str:
    """A window's fatal event (a restart, a crash) on its first row; else the rank's own state."""
    return w.state if row == 0 and any(e.fatal for e in w.events) else r.state


def _styled(state: str) -> str:
    style = STATE_STYLE.get(state)
    return f"[{style}]{state}[/]" if style else escape(state)


def _range(a: int, z: int) -> str:
    return str(a) if a == z else f"{a}–{z}"


def _range_f(vals: list) -> str:
    v = [x for x in vals if x is not None]
    if not v:
        return ""
    lo, hi = min(v), max(v)
    return f"{lo:.2f}" if abs(hi - lo) < 0.005 else f"{lo:.2f}–{hi:.2f}"
