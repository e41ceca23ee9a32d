"""How a group is shown: preflight of every node, the "started" lines, the live table while
watching (a row per node), the end of a launch or watch, `group status`, and the nodes a stop left
running, each with the command that stops it alone."""
from __future__ import annotations

import shlex
import sys
import time
from typing import Iterable

from dynspec_cli import engines
from dynspec_cli.place.group.record import reach_files
from dynspec_cli.report.runs import LiveDisplay
from dynspec_cli.run import hints


def group_command(*words: str, node0, hosts: Iterable) -> str:
    """`dynspec group WORDS --host NODE0 --ssh-config F ...`: the files are named also when node 0
    is this machine (`--host local`), since the other nodes need them."""
    return shlex.join(["dynspec", "group", *words, *hints.reach(node0.name, reach_files(hosts))])


def _escape(s: str) -> str:
    from rich.markup import escape

    return escape(s)


class Screen:
    """The group launch's screen (place/sequence.py `Screen`)."""

    def __init__(self, out, json_out: bool, group: str, targets=()):
        self.out, self.json_out, self.targets = out, json_out, list(targets)
        self.display = GroupDisplay(out, group, enabled=not json_out and out.is_terminal)
        self._live = False

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self._live:
            self.display.__exit__(*exc)
            self._live = False

    def preflight(self, pre) -> None:
        if self.json_out:
            return
        for i, (r, t) in enumerate(zip(pre["nodes"], self.targets)):
            e = engines.get(r.get("engine") or engines.DEFAULT)  # (a result that names no engine: the DEFAULT's)
            self.out.print(f"preflight node {i} ({t.name}): {r['verdict']}, {e.title} "
                           f"{e.release_of(r) or '?'}, {len(r.get('file_hashes') or {})} patched file(s)")
        for f in pre["findings"]:
            self.out.print(f"  [red]✗[/] {f['code']}: {_escape(f['message'])}")

    def started(self, p, rec) -> None:
        if not self.json_out:
            self.out.print(f"[bold]started[/] group {p.name}: {len(rec.nodes)} nodes, dist-init-addr "
                           f"{rec.doc['dist_init_addr']}")
            for n in rec.nodes:
                self.out.print(f"  node {n.rank} {n.host.name}: {n.rec.name} pid {n.rec.pid}, log {n.rec.log}")

    def update(self, states) -> None:
        if not self._live:
            self.display.__enter__()
            self._live = True
        self.display.update(states)


def still_running(group: str, rank: int, host: str, name: str, pid, why: str, files: dict) -> None:
    """One line on stderr for a node that a stop did not confirm gone: what may still run, and the
    command that stops it alone."""
    cmd = shlex.join(["dynspec", "stop", name, *hints.reach(host, files)])
    sys.stderr.write(f"dynspec: group {group}: node {rank} ({host}) not stopped: {why}; its server (run {name}, "
                     f"pid {pid or '?'}) may still be running; stop it with: {cmd}\n")


def render(out, result, json_out: bool) -> int:
    """The end of a group launch or watch; returns the exit code."""
    from dynspec_cli.report.jsonout import emit
    from dynspec_cli.verdict.codes import INTERRUPTED

    group, rec = result.name, result.record
    if result.kind == "refused":
        pre = result.preflight
        if json_out:
            emit({"group": group, "verdict": "dead", "exit_code": 1, "why": "preflight",
                  "findings": pre["findings"], "preflight": pre["nodes"]})
        else:
            out.print("launch refused (preflight mismatch); --force launches anyway")
        return 1
    if result.kind == "started":
        if json_out:
            emit({"group": rec.doc})
        else:
            head = rec.nodes[0].host.name
            out.print(f"  watch it to its verdict: dynspec group watch {group} --host {head}\n"
                      f"  stop it: dynspec group stop {group} --host {head}")
        return 0

    def hint(verb: str) -> str:
        return group_command(verb, group, node0=rec.nodes[0].host, hosts=[n.host for n in rec.nodes])

    if result.kind == "interrupted":
        if rec is None:
            out.print(f"\ninterrupted: group {group} was not started; no process of it runs", markup=False)
        elif rec.nodes is None:  # a re-attach cut short before it reached every node: nothing was touched
            out.print(f"\ninterrupted: group {group} runs on as it was (dynspec had not attached to it)", markup=False)
        elif result.detached:
            out.print(f"\ndetached: group {group} keeps running; re-attach with: {hint('watch')}", markup=False)
        elif result.stopped:
            out.print(f"\ninterrupted: stopped group {group}; no process remains on any node")
        else:
            left = result.left if isinstance(result.left, list) else [(n, result.left) for n in rec.nodes]
            for n, why in left:
                still_running(group, n.rank, n.host.name, n.rec.name, n.rec.pid, why, n.host.reach_files())
        return INTERRUPTED
    report_group(out, result.outcome, group, json_out, hint("stop"))
    return result.outcome.exit_code


class GroupDisplay(LiveDisplay):
    """One live table while watching: a row per node (phase, last evidence, verdict)."""

    def __init__(self, out, group: str, enabled: bool) -> None:
        super().__init__(out, enabled)
        self.group = group

    def update(self, states) -> None:
        if not self.live:
            return
        self.live.update(table(states, f"{self.group} {time.monotonic() - self.t0:6.1f}s"))


def table(states, title: str):
    from rich.table import Table

    from dynspec_cli.report.console import MARK

    t = Table(title=title, title_justify="left", show_edge=False)
    for col in ("node", "host", "phase", "verdict", "last evidence"):
        t.add_column(col, overflow="fold" if col == "last evidence" else None)
    for s in states:
        mark, colour = MARK.get(s.verdict, ("?", "yellow"))
        phase = s.phase + (" (stalled)" if s.stalled else "")
        t.add_row(str(s.rank), s.host, phase, f"[{colour}]{mark} {s.verdict}[/]", _escape(s.evidence[:160]))
    return t


def report_group(out, outcome, group: str, json_out: bool, stop_hint: str = "") -> None:
    if json_out:
        from dynspec_cli.report.jsonout import emit

        emit(outcome.to_json(group))
        return
    from dynspec_cli.report.console import MARK

    out.print(table(outcome.states, group))
    mark, colour = MARK.get(outcome.verdict, ("?", "yellow"))
    out.print(f"[{colour}]{mark} {outcome.verdict.upper()}[/] group {group}: {_escape(outcome.message)}")
    if outcome.stopped:
        out.print(f"  group stopped ({outcome.verdict}); no process remains on any node")
    elif outcome.verdict == "live":
        out.print(f"  the group keeps running ({_escape(stop_hint)})")


def render_stopped(out, doc: dict, left: list, files: dict) -> int:
    """The end of `dynspec group stop`: every node gone, or a line per node that is not (with the
    command that stops it alone) and the count; the exit code."""
    group, members = doc["group"], doc["members"]
    if left:
        for m, why in left:
            still_running(group, m["rank"], m["host"], m["name"], m.get("pid"), why, files)
        sys.stderr.write(f"dynspec: error: group {group!r}: {len(left)} of {len(members)} nodes not "
                         f"stopped ({len(members) - len(left)} stopped)\n")
        return 1
    out.print(f"stopped: group {group} ({len(members)} nodes); no process remains on any host")
    return 0
