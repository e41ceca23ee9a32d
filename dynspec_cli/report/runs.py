"""How runs are shown: the live line of one server while watching, and the end of its launch,
watch or stop (any placement of one server uses these: the host's, the seam test's toy); every
placement's runs in `dynspec status`, and a run over several nodes in `group status`. What only
one placement shows is in its folder (place/<name>/report.py). rich is imported only when
something is drawn on a terminal."""
from __future__ import annotations

import time
from typing import TYPE_CHECKING, Optional

if TYPE_CHECKING:
    from rich.console import Console

    from dynspec_cli.transport.drops import Drop
    from dynspec_cli.verdict.result import Verdict


def _escape(s: str) -> str:
    from rich.markup import escape

    return escape(s)


class LiveDisplay:
    """A transient rich Live region while watching (nothing when output is not a terminal)."""

    def __init__(self, out: "Console", enabled: bool) -> None:
        self.out, self.t0 = out, time.monotonic()
        self.live = None
        if enabled:
            from rich.live import Live
            from rich.text import Text

            self.live = Live(Text(""), console=out, refresh_per_second=8, transient=True)

    def __enter__(self):
        if self.live:
            self.live.__enter__()
        return self

    def __exit__(self, *exc):
        if self.live:
            self.live.__exit__(*exc)


class Display(LiveDisplay):
    """One live status line while watching: phase, elapsed time, last evidence, running verdict."""

    def __init__(self, out: "Console", name: str, enabled: bool) -> None:
        super().__init__(out, enabled)
        self.name = name
        self.last: Optional["Verdict"] = None
        self.ssh_note = ""  # "ssh: reconnecting (drop N)" while a dropped connection is repaired

    def drop(self, d: "Drop") -> None:
        """A host's drop listener (`host.drops.add_listener`): shown on the live line; without
        one (not a terminal, --json) one line on stderr per drop, so a log of the run says so too."""
        if d.state == "lost":
            self.ssh_note = f"ssh: reconnecting (drop {d.n})"
        elif d.state == "reconnected":
            self.ssh_note = f"ssh: reconnected after drop {d.n} ({d.took:.1f}s)"
        else:
            self.ssh_note = f"ssh: gave up reconnecting (drop {d.n})"
        if not self.live:
            if d.state != "reconnected":
                import sys

                sys.stderr.write(f"dynspec: {d.host}: {self.ssh_note}" + (f": {d.detail}\n" if d.detail else "\n"))
            return
        if self.last is not None:
            self.update(self.last)

    def update(self, v: "Verdict") -> None:
        from rich.text import Text

        from dynspec_cli.report.console import MARK

        self.last = v
        if not self.live:
            return
        la = v.launch or {}
        phase = la.get("phase") or "args"
        shards = f" {la['shards']}" if la.get("shards") and phase == "weights" else ""
        mark, colour = MARK[v.verdict]
        worker = v.worker.get("class") or "?"
        self.live.update(Text.from_markup(
            f"[bold]{self.name}[/] {time.monotonic() - self.t0:6.1f}s  phase [cyan]{phase}{shards}[/]  "
            f"worker {worker}  marker {'yes' if v.marker['found'] else 'no'}  [{colour}]{mark} {v.verdict}[/]"
            + (f"  [yellow]{_escape(self.ssh_note)}[/]" if self.ssh_note else "")))


class LaunchScreen:
    """The launch's `Screen`: the preflight report, the "started" lines, then one live status
    line while watching (on a terminal). With --json everything goes to the final document."""

    def __init__(self, out: "Console", name: str, json_out: bool) -> None:
        self.out, self.json_out = out, json_out
        self.display = Display(out, name, enabled=not json_out and out.is_terminal)
        self._live = False

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self._live:
            self.display.__exit__(*exc)
            self._live = False

    def preflight(self, result: dict) -> None:
        if not self.json_out:
            from dynspec_cli import engines
            from dynspec_cli.report.console import render_preflight

            # (a result without "engine" is the DEFAULT engine's: its documents carry no such key)
            text = engines.get(result.get("engine") or engines.DEFAULT).preflight_text(result)
            if text is not None:  # an engine whose preflight report is plain text (vLLM)
                self.out.print(text, markup=False, highlight=False)
            else:
                render_preflight(result, self.out)

    def started(self, p, rec) -> None:
        """`p`: the placement that started `rec` (one server: its `host` and `prof`)."""
        if not self.json_out:
            from dynspec_cli.run.profiles import shown_command

            host, prof = p.host, p.prof
            self.out.print(f"[bold]started[/] {prof.name} on {host.name}: pid {rec.pid}, log {rec.log}")
            self.out.print(f"  [dim]{shown_command(prof.argv(), prof.env)}[/]")
        self.display.__enter__()
        self._live = True

    def update(self, v: "Verdict") -> None:
        if not self._live:
            self.display.__enter__()
            self._live = True
        self.display.update(v)


def _interrupted(out: "Console", target, result) -> int:
    """Ctrl-C: what became of the run, always with its name; a run that may still be running is
    said on stderr with the command that stops it."""
    import sys

    from dynspec_cli.run.hints import command
    from dynspec_cli.verdict.codes import INTERRUPTED

    rec, name = result.record, result.name
    if result.left:
        pid = f" (pid {rec.pid})" if rec is not None and rec.pid else ""
        sys.stderr.write(f"dynspec: interrupted: run {name}{pid} may still be running on {target.name} "
                         f"({result.left}); stop it with: {command('stop', name, host=target)}\n")
    elif result.detached:
        out.print(f"\ndetached: {name} keeps running on {target.name}; re-attach with: "
                  f"{command('watch', name, host=target)}", markup=False)
    elif rec is None:
        out.print(f"\ninterrupted: {name} was not started; no process of it runs", markup=False)
    else:
        out.print(f"\ninterrupted: stopped {name} (process group {rec.pgid}); no process remains", markup=False)
    return INTERRUPTED


def render_launched(out: "Console", target, result, json_out: bool) -> int:
    """The end of a launch or watch on the terminal (or as JSON); returns the exit code."""
    from dynspec_cli.report.jsonout import emit
    from dynspec_cli.verdict.codes import EXIT

    rec = result.record
    if result.kind == "interrupted":
        return _interrupted(out, target, result)
    if result.kind == "refused":
        if json_out:
            emit({"preflight": result.preflight, "verdict": "dead", "exit_code": EXIT["dead"], "started": False})
        else:
            why = ("speculation would accept nothing" if (result.preflight or {}).get("verdict") == "ineffective"
                   else "the patched code cannot run")
            out.print(f"  [bold]not started[/]: preflight says {why} with this profile; "
                      "fix the findings above, or start it anyway with --no-preflight")
        return EXIT["dead"]
    from dynspec_cli.run.hints import command

    stop, watch = _escape(command("stop", rec.name, host=target)), _escape(command("watch", rec.name, host=target))
    if result.kind == "started":
        if json_out:
            from dynspec_cli.run.records import to_json

            emit({"run": to_json(rec)})
        else:
            out.print(f"  watch it to its verdict: {watch}\n  stop it: {stop}")
        return 0
    o = result.outcome
    doc = o.verdict.to_json()
    doc["run"] = {"name": rec.name, "host": target.name, "pid": rec.pid, "log": rec.log, "why": o.why,
                  "stopped": o.stopped, "kept": o.kept, "health": o.health, "ssh_drops": target.drops.count}
    if json_out:
        emit(doc)
    else:
        from dynspec_cli.report.console import render_verdict

        render_verdict(doc, out, source=f"{target.name}:{rec.log}")
        if o.stopped:
            out.print(f"  server stopped ({o.verdict.verdict}); no process of group {rec.pgid} remains")
        elif o.kept:
            out.print(f"  --keep: the server keeps running although it is {o.verdict.verdict} ({stop})")
        elif o.why == "ready":
            out.print(f"  [green]ready[/]: {_escape(o.health or '')}; the server keeps running ({stop})")
        elif o.why == "timeout":
            out.print(f"  timed out; the server keeps running ({watch} / {stop})")
    if o.why == "timeout" and o.verdict.verdict == "live":
        return EXIT["inconclusive"]
    return o.verdict.exit_code


def render_status(out: "Console", rows: list[dict], host: str, json_out: bool) -> None:
    if json_out:
        from dynspec_cli.report.jsonout import emit

        emit({"runs": rows})
        return
    from dynspec_cli.report.console import MARK

    if not rows:
        out.print(f"no runs on {host}")
    for r in rows:
        mark, colour = MARK.get(r["verdict"] or "inconclusive", ("?", "yellow"))
        state = "alive" if r["alive"] else ("stopped" if r.get("state", "started") == "started" else r["state"])
        out.print(f"[{colour}]{mark}[/] [bold]{r['name']}[/] pid {r['pid'] or '?'} {state} "
                  f"verdict {r['verdict'] or 'unknown'} port {r['port']} log {r['log']}")
        if r.get("note"):
            out.print(f"    [yellow]{_escape(r['note'])}[/]")
        if r.get("unwatched") and r["alive"]:  # left running after an error in the launch that watched it
            out.print(f"    [yellow]unwatched: {_escape(r['unwatched'])}[/]")
        for ln in r["last_lines"]:
            out.print(f"    [dim]{_escape(ln[:200])}[/]")


def render_stopped(out: "Console", rec, *, was_alive: bool, gone: bool, left: list[int] = ()) -> int:
    import sys

    if not gone:
        pids = f": pid {', '.join(map(str, left))} still running" if left else ""
        sys.stderr.write(f"dynspec: error: processes of run {rec.name!r} (group {rec.pgid}) survived SIGKILL{pids}\n")
        return 1
    if rec.state != "started":
        out.print(f"not started: {rec.name} (the launch ended before the server was spawned); no process remains")
        return 0
    out.print(f"{'stopped' if was_alive else 'already stopped'}: {rec.name} (process group {rec.pgid}); no process remains")
    return 0


def render_nodes_status(out: "Console", doc: dict, json_out: bool) -> None:
    """`dynspec group status`: a run over several nodes (a placement's nodes_status document: the
    run, its verdict over the nodes, its rendezvous and a row per node)."""
    if json_out:
        from dynspec_cli.report.jsonout import emit

        emit(doc)
        return
    rows = doc["nodes"]
    out.print(f"group {doc['group']}: {len(rows)} nodes, verdict {doc['verdict']}, dist-init-addr "
              f"{doc.get('dist_init_addr')}")
    for r in rows:
        out.print(f"  node {r['rank']} {r['host']}: {r['name']} {'alive' if r['alive'] else 'stopped'} "
                  f"verdict {r['verdict'] or 'unknown'}")
        for ln in r.get("last_lines") or []:
            out.print(f"      [dim]{_escape(ln[:200])}[/]")
