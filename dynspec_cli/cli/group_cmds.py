"""`dynspec group launch/watch/status/stop`: one SGLang server spanning several hosts."""
from __future__ import annotations

import sys
from typing import List, Optional

import typer

from dynspec_cli.cli.options import AcceptNewHostKey, KnownHosts, SshConfig
from dynspec_cli.cli.options import errors as _errors
from dynspec_cli.cli.options import out as _out
from dynspec_cli.run import hints

# (not imported from app: app imports this module while it is being built)
EXIT_CODES = """Exit codes: 0 live · 1 dead (a node's patched code cannot or did not run; preflight mismatch between nodes) · 2 bad input · 3 inconclusive / timeout · 4 crashed (a node crashed or stalled)."""
STATUS_EXIT = "Exit codes: 0 listed · 2 bad input (no group of that name) or unreachable host."
STOP_EXIT = "Exit codes: 0 no process of the group remains · 1 processes survived SIGKILL · 2 bad input or unreachable host."


group_app = typer.Typer(
    name="group",
    help="One SGLang server spanning several hosts (a profile whose `hosts` lists them in node-rank order).\n\n" + EXIT_CODES,
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)


def _hosts(ssh_config, known_hosts, accept_new):
    from dynspec_cli.cli import runs
    from dynspec_cli.place.group import Hosts

    return Hosts(runs.opener(ssh_config, known_hosts, accept_new))


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
    from dynspec_cli import place
    from dynspec_cli.cli import checks, runs
    from dynspec_cli.place.sequence import LaunchOptions

    with _errors():
        env = [checks.env_item(item) for item in env] if env else env
        req = place.Request(profile, runs.opener(ssh_config, known_hosts, accept_new_host_key), env=env, sets=set_,
                            name=name, timeout=timeout, stall_timeout=stall_timeout,
                            extra={"no_probe": no_probe, "no_preflight": no_preflight, "node_env": node_env,
                                   "force": force, "dist_init_addr": dist_init_addr})
        opts = LaunchOptions(replace=replace, keep=keep, detach=detach, watch=not no_watch,
                             preflight=not no_preflight, probe=not no_probe, timeout=timeout)
        # the hosts the profile lists, or a scheduler's nodes (Slurm hands them out)
        code = runs.launch(place.of_profile(profile), req, opts, json_out)
    raise typer.Exit(code)


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
    from dynspec_cli.place import group as placement
    from dynspec_cli.place import sequence

    with _errors():
        out = _out(json_out)
        with _hosts(ssh_config, known_hosts, accept_new_host_key) as hosts:
            p, rec = placement.attach(hosts, group, host, stall_timeout=stall_timeout)
            screen = p.screen(out, json_out)
            with screen:
                result = sequence.watch(p, rec, timeout=timeout, keep=keep, detach=detach, on_update=screen.update)
            code = p.render(out, result, json_out)
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
    from dynspec_cli.place import group as placement
    from dynspec_cli.run import group as G
    from dynspec_cli.run import ownership

    with _errors():
        with _hosts(ssh_config, known_hosts, accept_new_host_key) as opener:
            doc = placement.load(opener, group, host)
            rows = []
            for m in sorted(doc["members"], key=lambda m: m["rank"]):
                h = opener(m["host"], m.get("python"))
                rec = ownership.load(h, m["name"])
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
    from dynspec_cli.place import group as placement
    from dynspec_cli.report.group import still_running
    from dynspec_cli.run import group as G

    with _errors():
        with _hosts(ssh_config, known_hosts, accept_new_host_key) as opener:
            doc = placement.load(opener, group, host)
            left = G.stop_members(doc, opener, grace=grace)
            files = hints.group_files(opener.hosts)
    if left:
        for m, why in left:
            still_running(group, m["rank"], m["host"], m["name"], m.get("pid"), why, files)
        stopped = len(doc["members"]) - len(left)
        sys.stderr.write(f"dynspec: error: group {group!r}: {len(left)} of {len(doc['members'])} nodes not "
                         f"stopped ({stopped} stopped)\n")
        raise typer.Exit(1)
    _out(False).print(f"stopped: group {group} ({len(doc['members'])} nodes); no process remains on any host")


def register(app: typer.Typer) -> None:
    app.add_typer(group_app, name="group")
