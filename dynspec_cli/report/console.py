"""The human report, flutter-doctor style: one line per fact with a mark, detail indented
under it, and the exact fix to paste."""
from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.markup import escape

MARK = {"live": ("✓", "green"), "dead": ("✗", "red"), "crashed": ("✗", "red"),
        "inconclusive": ("?", "yellow"), "reachable": ("✓", "green"), "unknown": ("?", "yellow")}
SEV = {"error": ("✗", "red"), "warning": ("!", "yellow"), "info": ("•", "cyan")}
HEADLINE = {
    "live": "the patched code ran in this launch",
    "dead": "the patched code cannot run or did not run",
    "crashed": "the server died",
    "inconclusive": "not enough evidence yet",
}


def console(stderr: bool = False) -> Console:
    return Console(stderr=stderr, highlight=False, soft_wrap=True)  # never break a command or a path


def render_verdict(v: dict[str, Any], out: Console, *, source: str = "") -> None:
    mark, colour = MARK[v["verdict"]]
    out.print(f"[bold {colour}]{mark} {v['verdict'].upper()}[/] — {HEADLINE[v['verdict']]}"
              f"  [dim](feature {escape(v['feature'])}{', ' + escape(source) if source else ''})[/]")
    la = v.get("launch") or {}
    if la.get("of", 0) > 1:
        out.print(f"  [dim]judging launch {la['index']} of {la['of']} in this file (from line {la.get('first_line')})[/]")
    _fact(out, "sglang", v["sglang_version"] or "unknown")
    _fact(out, "speculative algorithm", v["speculative_algorithm"] or "unknown")
    ov = v["overlap_schedule"]
    _fact(out, "overlap scheduler", "unknown" if ov is None else ("on" if ov else "off"))
    w = v["worker"]
    if w.get("class"):
        _fact(out, "worker", f"{w['class']}  [dim]({w['module']})[/]", raw=True)
        if w.get("basis"):
            out.print(f"      [dim]because {escape(w['basis'])}[/]")
    elif w.get("candidates"):
        _fact(out, "worker", "one of " + ", ".join(w["candidates"]))
    else:
        _fact(out, "worker", "unknown")
    m = v["marker"]
    if m["found"]:
        fields = ", ".join(f"{k}={val}" for k, val in m["fields"].items())
        ranks = f" on {', '.join(m['ranks'])}" if m.get("ranks") else ""
        _fact(out, "marker", f"found at line {m['line']}{ranks}" + (f" ({fields})" if fields else ""))
    else:
        _fact(out, "marker", "not found")
    _fact(out, "server ready", "yes" if v["server_ready"] else "no")
    if v["crash"]:
        c = v["crash"]
        _fact(out, "crash", f"{c['exception']} at line {c['line']}")
    if v["findings"]:
        out.print()
    for f in v["findings"]:
        smark, scol = SEV[f["severity"]]
        where = f" [dim](line {f['line']})[/]" if f.get("line") else ""
        out.print(f"  [{scol}]{smark}[/] [bold]{f['code']}[/] {escape(f['name'])}: {escape(f['message'])}{where}")
        if f.get("text") and f["code"] not in ("DS304",):
            out.print(f"      [dim]│ {escape(f['text'][:240])}[/]")
        if f.get("fix") and f["severity"] != "info":
            out.print(f"      [bold]fix:[/] {escape(f['fix'])}")
    out.print(f"\n  [dim]exit {v['exit_code']} · dynspec explain CODE for details[/]")


def render_preflight(r: dict[str, Any], out: Console) -> None:
    mark, colour = MARK[r["verdict"]]
    head = {"reachable": "the patched code is on the path of the worker that will run",
            "dead": "the patched code cannot run with this sglang, env and flags",
            "unknown": "could not determine it"}[r["verdict"]]
    out.print(f"[bold {colour}]{mark} PREFLIGHT {r['verdict'].upper()}[/] — {head}")
    _fact(out, "sglang", f"{r['sglang_version'] or 'unknown'}  ({r['sglang_path'] or 'not importable'})"
                         + ("  editable" if r.get("editable") else ""))
    w = r["worker"]
    _fact(out, "worker", f"{w['class']}  ({w['module']})" if w.get("class") else "unknown")
    if w.get("basis"):
        out.print(f"      [dim]{escape(w['basis'])}[/]")
    ov = r["overlap_schedule"]
    _fact(out, "overlap scheduler", "unknown" if ov is None else ("on" if ov else "off"))
    for p in r["patched"] or []:
        _fact(out, "patch", f"{p.get('class') or '?'}.{p.get('function') or '?'} at {p.get('file')}:{p.get('line')}")
    if not r["patched"]:
        _fact(out, "patch", "not found in this install")
    if r["findings"]:
        out.print()
    for f in r["findings"]:
        smark, scol = SEV[f["severity"]]
        out.print(f"  [{scol}]{smark}[/] [bold]{f['code']}[/] {escape(f['name'])}: {escape(f['message'])}")
        if f.get("fix") and f["severity"] != "info":
            out.print(f"      [bold]fix:[/] {escape(f['fix'])}")
    if r.get("probe_command") and r["verdict"] == "reachable":
        out.print(f"\n  [bold]to start it yourself with the in-server probe:[/]\n  {escape(r['probe_command'])}")
    t = (r.get("timings") or {}).get("total")
    out.print(f"\n  [dim]exit {r['exit_code']}{f' · inspected in {t:.2f} s' if t else ''} · dynspec explain CODE for details[/]")


def _fact(out: Console, label: str, value: str, raw: bool = False) -> None:
    out.print(f"  [bold]{label:<22}[/] {value if raw else escape(value)}")


def render_finding_doc(code: str, d: Any, out: Console) -> None:
    smark, scol = SEV[d.severity]
    out.print(f"[bold]{code}[/] {d.name}  [{scol}]{d.severity}[/]")
    out.print(f"\n[bold]What it does[/]\n  {escape(d.what)}")
    out.print(f"\n[bold]Why this matters[/]\n  {escape(d.why)}")
    out.print(f"\n[bold]How to fix[/]\n  {escape(d.fix)}")
