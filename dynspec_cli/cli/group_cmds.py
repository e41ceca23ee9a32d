"""`dynspec group launch/watch/status/stop`: one SGLang server spanning several hosts."""
from __future__ import annotations

import shlex
import sys
from typing import List, Optional

import typer

from dynspec_cli.cli.options import AcceptNewHostKey, KnownHosts, SshConfig
from dynspec_cli.cli.options import errors as _errors
from dynspec_cli.cli.options import out as _out
from dynspec_cli.run import hints
from dynspec_cli.report.runs import GroupDisplay
from dynspec_cli.report.runs import report_group as _report

# (not imported from app: app imports this module while it is being built)
EXIT_CODES = """Exit codes: 0 live · 1 dead (a node's patched code cannot or did not run; preflight mismatch between nodes) · 2 bad input · 3 inconclusive / timeout · 4 crashed (a node crashed or stalled)."""
STATUS_EXIT = "Exit codes: 0 listed · 2 bad input (no group of that name) or unreachable host."
STOP_EXIT = "Exit codes: 0 no process of the group remains · 1 processes survived SIGKILL · 2 bad input or unreachable host."


def _escape(s: str) -> str:
    from rich.markup import escape

    return escape(s)


group_app = typer.Typer(
    name="group",
    help="One SGLang server spanning several hosts (a profile whose `hosts` lists them in node-rank order).\n\n" + EXIT_CODES,
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)


class _Opener:
    """Opens (and later closes) every host a command touches, with the same SSH options. `recorded`:
    the SSH files the group was launched with (its record's "reach"), used where the command line
    and the environment name none, as a profile's would be."""

    def __init__(self, ssh_config, known_hosts, accept_new, python: str = "python3"):
        self.ssh_config, self.known_hosts, self.accept_new, self.python = ssh_config, known_hosts, accept_new, python
        self.hosts = []
        self.recorded: dict = {}

    def __call__(self, spec: str, python: Optional[str] = None, profile=None):
        from types import SimpleNamespace

        from dynspec_cli.cli import runs

        if profile is None and self.recorded:
            profile = SimpleNamespace(source="", **{k: self.recorded.get(k) for k in ("ssh_config", "known_hosts")})
        h = runs.open_target(spec, self.ssh_config, self.known_hosts, self.accept_new, python or self.python,
                             profile=profile)
        self.hosts.append(h)
        return h

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        for h in self.hosts:
            try:
                h.close()
            except Exception:  # noqa: BLE001
                pass


@group_app.command(epilog=EXIT_CODES)
def launch(
    profile: str = typer.Argument(..., help="Group profile: a .toml with hosts = [...] (node-rank order)."),
    env: Optional[List[str]] = typer.Option(None, "--env", help="K=V for every node's environment (repeatable); K alone takes its value from this shell."),
    node_env: Optional[List[str]] = typer.Option(None, "--node-env", help="RANK:K=V for one node's environment (repeatable)."),
    set_: Optional[List[str]] = typer.Option(None, "--set", help="flag=value for sglang on every node (repeatable)."),
    name: Optional[str] = typer.Option(None, "--name", help="Group name (default: the profile's); nodes are NAME-nRANK."),
    dist_init_addr: Optional[str] = typer.Option(None, "--dist-init-addr", help="ADDR:PORT of the rendezvous (default: node 0's address as the others reach it, a free port there)."),
    replace: bool = typer.Option(False, "--replace", help="Stop live runs of the same node names first."),
    keep: bool = typer.Option(False, "--keep", help="Do not stop the group when a node is dead or crashed."),
    force: bool = typer.Option(False, "--force", help="Launch although preflight found a mismatch between nodes."),
    no_preflight: bool = typer.Option(False, "--no-preflight", help="Skip preflight on the nodes."),
    no_probe: bool = typer.Option(False, "--no-probe", help="Do not inject the in-server probe."),
    no_watch: bool = typer.Option(False, "--no-watch", help="Start every node and return at once."),
    detach: bool = typer.Option(False, "--detach", help="On Ctrl-C leave the group running."),
    timeout: Optional[float] = typer.Option(None, "--timeout", help="Give up watching after this many seconds (default: the profile's ready_timeout)."),
    stall_timeout: float = typer.Option(120.0, "--stall-timeout", help="A node whose log makes no progress this long before it is live counts as crashed (stalled)."),
    json_out: bool = typer.Option(False, "--json", help="Print JSON (the preflight of every node, then the group and its verdict) instead of the live table."),
    ssh_config: SshConfig = None,
    known_hosts: KnownHosts = None,
    accept_new_host_key: AcceptNewHostKey = False,
) -> None:
    """Start one server on every host of the profile (--nnodes/--node-rank/--dist-init-addr set),
    after preflight on each, and watch all nodes: live only when every node is live."""
    from dynspec_cli.knowledge.features import load_feature
    from dynspec_cli.run import group as G
    from dynspec_cli.run.profiles import single_engine
    from dynspec_cli import place
    from dynspec_cli.cli import checks, runs

    with _errors():
        env = [checks.env_item(item) for item in env] if env else env
        placement = place.of_profile(profile)
        if placement is not place.get("host"):  # a scheduler's profile: it hands out the nodes (Slurm)
            from dynspec_cli.place.sequence import LaunchOptions

            req = place.Request(profile, runs.opener(ssh_config, known_hosts, accept_new_host_key), env=env,
                                sets=set_, name=name, timeout=timeout, stall_timeout=stall_timeout,
                                extra={"no_probe": no_probe, "no_preflight": no_preflight})
            opts = LaunchOptions(keep=keep, detach=detach, watch=not no_watch, preflight=not no_preflight,
                                 probe=not no_probe, timeout=timeout)
            code = runs.launch(placement, req, opts, json_out)
            raise typer.Exit(code)
    with _errors():
        if stall_timeout <= 0:
            raise G.ConfigError("--stall-timeout must be positive")
        spec = G.load_group(profile, env=env, sets=set_, name=name, node_env=node_env)
        feature = load_feature(spec.base.feature)
        single_engine(spec.base, feature, "group launch")
        out = _out(json_out)
        with _Opener(ssh_config, known_hosts, accept_new_host_key) as opener:
            profs = G.node_profiles(spec)
            targets = [opener(h, p.python, p) for h, p in zip(spec.hosts, profs)]
            pre = None
            if not no_preflight:
                pre = G.preflight_group(targets, profs, feature)
                if not json_out:
                    for r, t in zip(pre["nodes"], targets):
                        out.print(f"preflight node {targets.index(t)} ({t.name}): {r['verdict']}, sglang "
                                  f"{r.get('sglang_version') or '?'}, {len(r.get('file_hashes') or {})} patched file(s)")
                    for f in pre["findings"]:
                        out.print(f"  [red]✗[/] {f['code']}: {_escape(f['message'])}")
                if pre["dead"] and not force:
                    if json_out:
                        from dynspec_cli.report.jsonout import emit

                        emit({"group": spec.name, "verdict": "dead", "exit_code": 1, "why": "preflight",
                              "findings": pre["findings"], "preflight": pre["nodes"]})
                    else:
                        out.print("launch refused (preflight mismatch); --force launches anyway")
                    raise typer.Exit(1)
            nodes, doc = G.start_group(spec, targets, feature, replace=replace, dist_init_addr=dist_init_addr,
                                       preflight_result=pre, probe=not no_probe)
            if not json_out:
                out.print(f"[bold]started[/] group {spec.name}: {len(nodes)} nodes, dist-init-addr {doc['dist_init_addr']}")
                for n in nodes:
                    out.print(f"  node {n.rank} {n.host.name}: {n.rec.name} pid {n.rec.pid}, log {n.rec.log}")
            if no_watch:
                if json_out:
                    from dynspec_cli.report.jsonout import emit

                    emit({"group": doc})
                else:
                    head = nodes[0].host.name
                    out.print(f"  watch it to its verdict: dynspec group watch {spec.name} --host {head}\n"
                              f"  stop it: dynspec group stop {spec.name} --host {head}")
                raise typer.Exit(0)
            code = _watch(nodes, spec.name, feature, timeout or spec.base.ready_timeout, stall_timeout, keep, detach,
                          json_out, out)
    raise typer.Exit(code)


def _watch(nodes, group, feature, timeout, stall_timeout, keep, detach, json_out, out) -> int:
    from dynspec_cli.run import group as G

    display = GroupDisplay(out, group, enabled=not json_out and out.is_terminal)

    def hint(verb: str, group: str) -> str:
        return hints.group_command(verb, group, node0=nodes[0].host, hosts=[n.host for n in nodes])

    try:
        with display:
            outcome = G.watch_group(nodes, feature, timeout=timeout, stall_timeout=stall_timeout, keep=keep,
                                    on_change=display.update)
    except KeyboardInterrupt:
        if detach:
            out.print(f"\ndetached: group {group} keeps running; re-attach with: {hint('watch', group)}",
                      markup=False)
            return 130
        left = G.nodes_left(nodes)
        if not left:
            out.print(f"\ninterrupted: stopped group {group}; no process remains on any node")
        for n, why in left:
            _still_running(group, n.rank, n.host.name, n.rec.name, n.rec.pid, why, n.host.reach_files())
        return 130
    _report(out, outcome, group, json_out, hint("stop", group))
    return outcome.exit_code


def _still_running(group: str, rank: int, host: str, name: str, pid, why: str, files: dict) -> None:
    """One line on stderr for a node that a stop did not confirm gone: what may still run, and the
    command that stops it alone."""
    cmd = shlex.join(["dynspec", "stop", name, *hints.reach(host, files)])
    sys.stderr.write(f"dynspec: group {group}: node {rank} ({host}) not stopped: {why}; its server (run {name}, "
                     f"pid {pid or '?'}) may still be running; stop it with: {cmd}\n")


def _load(opener, group: str, host: Optional[str]):
    from dynspec_cli.cli.errors import UsageError
    from dynspec_cli.run import group as G

    where = opener(host or "local")
    doc = G.load_group_record(where, group)
    if doc is None:
        raise UsageError(f"no group named {group!r} on {where.name}" + ("" if host else " (give node 0 with --host)"))
    opener.recorded = doc.get("reach") or {}
    return doc


@group_app.command("watch", epilog=EXIT_CODES)
def watch_cmd(
    group: str = typer.Argument(..., help="Group name."),
    host: Optional[str] = typer.Option(None, "--host", help="Node 0 (where the group record is); default: the copy on this machine."),
    keep: bool = typer.Option(False, "--keep", help="Do not stop the group when a node is dead or crashed."),
    detach: bool = typer.Option(True, "--detach/--no-detach", help="On Ctrl-C leave the group running (default)."),
    timeout: Optional[float] = typer.Option(None, "--timeout", help="Give up watching after this many seconds (exit 3; the group keeps running)."),
    stall_timeout: float = typer.Option(120.0, "--stall-timeout", help="A node whose log makes no progress this long before it is live counts as crashed (stalled)."),
    json_out: bool = typer.Option(False, "--json", help="Print one JSON object (the group's verdict and every node's) instead of the live table."),
    ssh_config: SshConfig = None,
    known_hosts: KnownHosts = None,
    accept_new_host_key: AcceptNewHostKey = False,
) -> None:
    """Re-attach to a group and watch every node to the group's verdict."""
    from dynspec_cli.knowledge.features import load_feature
    from dynspec_cli.run import group as G

    with _errors():
        out = _out(json_out)
        with _Opener(ssh_config, known_hosts, accept_new_host_key) as opener:
            doc = _load(opener, group, host)
            nodes = G.attach(doc, opener)
            code = _watch(nodes, group, load_feature(doc["feature"]), timeout, stall_timeout, keep, detach, json_out, out)
    raise typer.Exit(code)


@group_app.command("status", epilog=STATUS_EXIT)
def status_cmd(
    group: str = typer.Argument(..., help="Group name."),
    host: Optional[str] = typer.Option(None, "--host", help="Node 0 (where the group record is)."),
    json_out: bool = typer.Option(False, "--json", help="Print one JSON object (the group, its verdict, every node) instead of the list."),
    ssh_config: SshConfig = None,
    known_hosts: KnownHosts = None,
    accept_new_host_key: AcceptNewHostKey = False,
) -> None:
    """Every node of a group: alive or not, its verdict so far, its last log lines."""
    from dynspec_cli.knowledge.features import load_feature
    from dynspec_cli.run import group as G
    from dynspec_cli.run import records

    with _errors():
        with _Opener(ssh_config, known_hosts, accept_new_host_key) as opener:
            doc = _load(opener, group, host)
            rows = []
            for m in sorted(doc["members"], key=lambda m: m["rank"]):
                h = opener(m["host"], m.get("python"))
                rec = records.load(h, m["name"])
                row = G.node_status(h, rec, load_feature) if rec is not None else {
                    "name": m["name"], "alive": False, "verdict": None, "last_lines": ["(no run record)"]}
                rows.append({"rank": m["rank"], **row, "host": m["host"]})
    gv = G.group_verdict([r["verdict"] for r in rows])
    from dynspec_cli.report.runs import render_group_status

    render_group_status(_out(json_out), group, gv, doc, rows, json_out)


@group_app.command("stop", epilog=STOP_EXIT)
def stop_cmd(
    group: str = typer.Argument(..., help="Group name."),
    host: Optional[str] = typer.Option(None, "--host", help="Node 0 (where the group record is)."),
    grace: float = typer.Option(10.0, "--grace", help="Seconds between SIGTERM and SIGKILL."),
    ssh_config: SshConfig = None,
    known_hosts: KnownHosts = None,
    accept_new_host_key: AcceptNewHostKey = False,
) -> None:
    """Stop every node of a group, then confirm that no process of it remains on any host."""
    from dynspec_cli.run import group as G

    with _errors():
        with _Opener(ssh_config, known_hosts, accept_new_host_key) as opener:
            doc = _load(opener, group, host)
            left = G.stop_members(doc, opener, grace=grace)
            files = hints.group_files(opener.hosts)
    if left:
        for m, why in left:
            _still_running(group, m["rank"], m["host"], m["name"], m.get("pid"), why, files)
        stopped = len(doc["members"]) - len(left)
        sys.stderr.write(f"dynspec: error: group {group!r}: {len(left)} of {len(doc['members'])} nodes not "
                         f"stopped ({stopped} stopped)\n")
        raise typer.Exit(1)
    _out(False).print(f"stopped: group {group} ({len(doc['members'])} nodes); no process remains on any host")


def register(app: typer.Typer) -> None:
    app.add_typer(group_app, name="group")
