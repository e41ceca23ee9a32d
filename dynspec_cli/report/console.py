"""The human report, flutter-doctor style: one line per fact with a mark, detail indented
under it, and the exact fix to paste.

Reports are built as lines of (text, style) spans, never as markup, so log text with brackets
needs no escaping. On a terminal they are drawn with rich; when the output is a file or a pipe
(benchmark scripts, CI logs) the same text is written directly, without loading rich: rich would
print exactly that text there, and `dynspec verify` in a benchmark script starts faster."""
from __future__ import annotations

import os
import sys
from typing import Any, Iterable, List, Tuple, Union

Span = Union[str, Tuple[str, str]]  # plain text, or (text, rich style)
Line = List[Span]

MARK = {"live": ("✓", "green"), "dead": ("✗", "red"), "crashed": ("✗", "red"),
        "inconclusive": ("?", "yellow"), "reachable": ("✓", "green"), "unknown": ("?", "yellow"),
        "ineffective": ("✗", "red")}
SEV = {"error": ("✗", "red"), "warning": ("!", "yellow"), "info": ("•", "cyan")}
HEADLINE = {
    "live": "the patched code ran in this launch",
    "dead": "the patched code cannot run or did not run",
    "crashed": "the server died",
    "ineffective": "the patched code runs, but speculation accepts nothing (accept len ~1.00)",
    "inconclusive": "not enough evidence yet",
}


def console(stderr: bool = False):
    from rich.console import Console

    return Console(stderr=stderr, highlight=False, soft_wrap=True)  # never break a command or a path


def wants_rich(stream=None) -> bool:
    """Whether rich would style this stream: a terminal, or colour forced as rich honours it."""
    stream = stream or sys.stdout
    if os.environ.get("FORCE_COLOR") or os.environ.get("TTY_COMPATIBLE") == "1":
        return True
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def show(lines: Iterable[Line], out=None) -> None:
    """Print report lines on `out` (a rich Console), or on stdout: with rich on a terminal, as
    plain text otherwise."""
    if out is None and wants_rich():
        out = console()
    if out is None:
        sys.stdout.write("".join(plain(line) + "\n" for line in lines))
        sys.stdout.flush()
        return
    from rich.text import Text

    for line in lines:
        out.print(Text.assemble(*line))


def plain(line: Line) -> str:
    return "".join(s if isinstance(s, str) else s[0] for s in line)


def _fact(label: str, value: str, *detail: Span) -> Line:
    return ["  ", (f"{label:<22}", "bold"), " ", value, *detail]


def _finding(f: dict[str, Any], *, line_ref: bool) -> list[Line]:
    smark, scol = SEV[f["severity"]]
    head = ["  ", (smark, scol), " ", (f["code"], "bold"), f" {f['name']}: {f['message']}"]
    if line_ref and f.get("line"):
        head += [" ", (f"(line {f['line']})", "dim")]
    out = [head]
    if line_ref and f.get("text") and f["code"] not in ("DS304",):
        out.append(["      ", (f"│ {f['text'][:240]}", "dim")])
    if f.get("fix") and f["severity"] != "info":
        out.append(["      ", ("fix:", "bold"), f" {f['fix']}"])
    return out


def verdict_lines(v: dict[str, Any], *, source: str = "") -> list[Line]:
    mark, colour = MARK[v["verdict"]]
    out: list[Line] = [[(f"{mark} {v['verdict'].upper()}", f"bold {colour}"), f" — {HEADLINE[v['verdict']]}  ",
                        (f"(feature {v['feature']}{', ' + source if source else ''})", "dim")]]
    la = v.get("launch") or {}
    if la.get("of", 0) > 1:
        out.append(["  ", (f"judging launch {la['index']} of {la['of']} in this file (from line {la.get('first_line')})", "dim")])
    claims = v.get("claims") or {}
    # the engine's own lines: its release, what speculates, its switches (engines/protocol.py report_facts)
    for label, value, detail in _engine_of(v).report_facts(v):
        out.append(_fact(label, value, (detail, "dim")) if detail else _fact(label, value))
    w = v["worker"]
    if w.get("class"):
        out.append(_fact("worker", f"{w['class']}  ", (f"({w['module']})", "dim")))
        if w.get("basis"):
            out.append(["      ", (f"because {w['basis']}", "dim")])
    elif w.get("candidates"):
        out.append(_fact("worker", "one of " + ", ".join(w["candidates"])))
    else:
        out.append(_fact("worker", "unknown"))
    m = v["marker"]
    if m["found"]:
        fields = ", ".join(f"{k}={val}" for k, val in m["fields"].items())
        ranks = f" on {', '.join(m['ranks'])}" if m.get("ranks") else ""
        out.append(_fact("marker", f"found at line {m['line']}{ranks}" + (f" ({fields})" if fields else "")))
    else:
        out.append(_fact("marker", "not found"))
    ready = (claims.get("server_ready") or {}).get("value")
    out.append(_fact("server ready", "yes" if v["server_ready"] else "no" if ready is False else "not seen"))
    graphs = decode_graphs_text(v.get("compute_path"))
    if graphs:
        out.append(_fact("decode graphs", graphs))
    if v["crash"]:
        out.append(_fact("crash", f"{v['crash']['exception']} at line {v['crash']['line']}"))
    eff = (v.get("evidence") or {}).get("effect") or {}
    if eff.get("state") in ("visible", "contradicted"):
        on = ", ".join(map(str, eff["speculation_on_at"])) or "none"
        off = ", ".join(map(str, eff["speculation_off_at"])) or "none"
        out.append(_fact("effect", f"{eff['state']}: speculation on at batch {on}, off at {off} "
                                   f"(threshold {eff['threshold']}, from the {eff['threshold_from']})"))
    if v.get("stopped"):
        out.append(_fact("stopped", f"by {v['stopped']['signal']} at line {v['stopped']['line']}"))
    if v["findings"]:
        out.append([])
    for f in v["findings"]:
        out += _finding(f, line_ref=True)
    out += [[], ["  ", (f"exit {v['exit_code']} · dynspec explain CODE for details", "dim")]]
    return out


def _engine_of(doc: dict[str, Any]):
    """The engine a document is from (one that names none is the registry DEFAULT's)."""
    from dynspec_cli import engines

    return engines.get(doc.get("engine") or engines.DEFAULT)


def decode_graphs_text(cp: Any) -> str:
    """One line of a verdict's compute_path: what was captured, where decode ran eager ("" if it says nothing)."""
    if not isinstance(cp, dict):
        return ""
    if cp.get("graphs_disabled"):
        return "disabled: every decode step eager"
    parts = []
    roles = [(r, cp.get(f"{k}_captured")) for r, k in (("target", "target"), ("draft", "draft"), ("draft-extend", "draft_extend"))]
    if any(c is not None for _, c in roles):
        parts.append("captured: " + ", ".join(f"{r} {'yes' if c else 'no'}" for r, c in roles if c is not None)
                     + (f" (up to batch {cp['captured_max_bs']})" if cp.get("captured_max_bs") else ""))
    for key, word in (("eager_batches", "eager"), ("graph_batches", "in graphs")):
        got = cp.get(key) or {}
        if got:
            parts.append(f"{word} at running batch {', '.join(sorted(got, key=int))}")
    for ch in cp.get("cudagraph_mode_changes") or []:
        parts.append(f"cudagraph_mode {ch['from']} -> {ch['to']} (line {ch['line']})")
    return "; ".join(parts)


def preflight_lines(r: dict[str, Any]) -> list[Line]:
    mark, colour = MARK[r["verdict"]]
    engine = _engine_of(r)
    head = {"reachable": "the patched code is on the path of the worker that will run",
            "dead": f"the patched code cannot run with this {engine.title}, env and flags",
            "unknown": "could not determine it",
            "ineffective": "the patched code is reachable, but this draft will accept nothing"}[r["verdict"]]
    out: list[Line] = [[(f"{mark} PREFLIGHT {r['verdict'].upper()}", f"bold {colour}"), f" — {head}"]]
    for label, value, detail in engine.preflight_facts(r):  # the release found and where
        out.append(_fact(label, value, (detail, "dim")) if detail else _fact(label, value))
    w = r["worker"]
    out.append(_fact("worker", f"{w['class']}  ({w['module']})" if w.get("class") else "unknown"))
    if w.get("basis"):
        out.append(["      ", (w["basis"], "dim")])
    ov = r["overlap_schedule"]
    out.append(_fact("overlap scheduler", "unknown" if ov is None else ("on" if ov else "off")))
    cp = r.get("compute_path") or {}
    if cp.get("graphs") == "disabled":
        out.append(_fact("decode graphs", "disabled: every decode step eager"))
    elif cp.get("eager_above") is not None:
        out.append(_fact("decode graphs", f"captured up to {cp['eager_above']} running requests; eager above"))
    if r.get("environment"):
        out.append(_fact("environment", environment_text(r["environment"])))
    if r.get("plugin"):
        pl = r["plugin"]
        out.append(_fact("plugin", f"{pl['entry_point']} ({pl['group']}) from {pl.get('loaded') or 'no distribution'}"))
        out.append(["      ", (f"{pl['hook'].upper()} hook on {pl['target']} ({pl.get('target_kind')}); "
                               f"loads plugins: {pl.get('processes') or 'unknown'}", "dim")])
    cf = r.get("changed_files")
    if cf is not None:  # against the dist-info RECORD: what the user changed, with or without a diff
        if cf.get("checked"):
            files = cf.get("files") or []
            out.append(_fact("changed files", f"you changed {len(files)} file(s) of the released distribution"
                             if files else f"none: every .py file RECORD lists is as released ({cf.get('files_hashed')} hashed)"))
            out += [["      ", (f, "dim")] for f in files[:20]]
            if len(files) > 20:
                out.append(["      ", (f"... and {len(files) - 20} more (--json: changed_files)", "dim")])
        else:
            out.append(_fact("changed files", f"not known: {cf.get('reason')}"))
    for p in r["patched"] or []:
        out.append(_fact("patch", f"{p['class'] + '.' if p.get('class') else ''}{p.get('function') or '?'} at {p.get('file')}:{p.get('line')}"))
    if not r["patched"]:
        out.append(_fact("patch", f"not found in the plugin code {engine.title} loads" if r.get("plugin") else "not found in this install"))
    if r.get("hunks"):
        out.append(_fact("hunks of --patch", f"{len(r['hunks'])}: the behaviour hunks decide; the marker's only announces"))
        out += hunk_lines(r["hunks"])
    if r["findings"]:
        out.append([])
    for f in r["findings"]:
        out += _finding(f, line_ref=False)
    if r.get("probe_command") and r["verdict"] == "reachable":
        out += [[], ["  ", ("to start it yourself with the in-server probe:", "bold")], [f"  {r['probe_command']}"]]
        if r.get("probe_command_needs"):
            out.append(["  ", (f"(your shell must hold {', '.join(r['probe_command_needs'])}: secrets are never printed)", "dim")])
        if r.get("probe_copy"):
            out.append(["  ", (f"the probe folder must be at {r['probe_dir']} on that host; dynspec launch puts it "
                               f"there, or copy it: {r['probe_copy']}", "dim")])
    t = (r.get("timings") or {}).get("total")
    explain = " · dynspec explain CODE for details" if r["findings"] else ""
    out += [[], ["  ", (f"exit {r['exit_code']} ({r['verdict']}){f' · inspected in {t:.2f} s' if t else ''}{explain}", "dim")]]
    return out


_REACH = {"reachable": ("✓", "green"), "not reachable": ("✗", "red"), "unknown": ("?", "yellow")}


def hunk_lines(hunks: list[dict[str, Any]]) -> list[Line]:
    """One line per hunk scope (mark, where, role, reach) and its reason underneath."""
    from dynspec_cli.verdict.result import where

    out: list[Line] = []
    for h in hunks:
        mark, colour = _REACH.get(h["reach"], ("?", "yellow"))
        out.append(["    ", (mark, colour), f" {where(h)}  ", (h["role"], "bold"), "  ", (h["reach"], colour)])
        if h["role"] != "flag":  # (every flag hunk has the same reason)
            out.append(["        ", (h["reason"], "dim")])
    return out


def environment_text(e: dict[str, Any]) -> str:
    """`this shell's environment + --env/[env] · SGLANG_ENABLE_SPEC_V2 unset`"""
    used = e["base"] + (" + --env/[env]" if e.get("overrides") else "")
    names = [f"{n}={v['value']} (from {v['from']})" if v["value"] is not None else f"{n} unset"
             for n, v in (e.get("vars") or {}).items()]
    return " · ".join([used, *names])


def finding_doc_lines(code: str, d: Any) -> list[Line]:
    _smark, scol = SEV[d.severity]
    return [[(code, "bold"), f" {d.name}  ", (d.severity, scol)],
            [], [("What it does", "bold")], [f"  {d.what}"],
            [], [("Why this matters", "bold")], [f"  {d.why}"],
            [], [("How to fix", "bold")], [f"  {d.fix}"]]


def render_verdict(v: dict[str, Any], out=None, *, source: str = "") -> None:
    show(verdict_lines(v, source=source), out)


def render_preflight(r: dict[str, Any], out=None) -> None:
    show(preflight_lines(r), out)
