"""`dynspec group launch/watch/status/stop`: one SGLang server spanning several hosts."""
from __future__ import annotations

from typing import List, Optional

import typer

from dynspec_cli.cli.options import AcceptNewHostKey, KnownHosts, SshConfig
from dynspec_cli.cli.options import errors as _errors
from dynspec_cli.cli.options import out as _out

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
        # the hosts the profile lists, or a scheduler's nodes (Slurm hands them out)
        kind = place.of_profile(profile)
        req = place.Request(profile, runs.opener(ssh_config, known_hosts, accept_new_host_key), env=env, sets=set_,
                            name=name, timeout=timeout, stall_timeout=stall_timeout, probe=not no_probe,
                            preflight=not no_preflight,
                            options=place.options(kind, node_env=node_env, force=force, dist_init_addr=dist_init_addr))
        opts = LaunchOptions(replace=replace, keep=keep, detach=detach, watch=not no_watch,
                             preflight=not no_preflight, probe=not no_probe, timeout=timeout)
        code = runs.launch(kind, req, opts, json_out)
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
    from dynspec_cli.cli import runs

    with _errors():
        code = runs.watch(runs.request(ssh_config, known_hosts, accept_new_host_key, stall_timeout=stall_timeout), host,
                          group, timeout=timeout, keep=keep, detach=detach, json_out=json_out, group=True)
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
    from dynspec_cli.cli import runs
    from dynspec_cli.cli.options import load_feature
    from dynspec_cli.report.runs import render_nodes_status

    with _errors():
        with runs.request(ssh_config, known_hosts, accept_new_host_key) as req:
            target = req.open_host(host or "local")
            p, rec = runs.found_group(target, group, req, host)
            doc = p.nodes_status(rec, load_feature)
    render_nodes_status(_out(json_out), doc, json_out)


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
    from dynspec_cli.cli import runs

    with _errors():
        with runs.request(ssh_config, known_hosts, accept_new_host_key) as req:
            target = req.open_host(host or "local")
            p, rec = runs.found_group(target, group, req, host)
            code = p.end(rec, grace=grace, out=_out(False))
    raise typer.Exit(code)


def register(app: typer.Typer) -> None:
    app.add_typer(group_app, name="group")
