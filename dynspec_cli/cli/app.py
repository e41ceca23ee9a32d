"""dynspec's command line (typer). Commands import what they need when they run, and sglang is
never imported here. The usual forms of the two gates, verify and preflight, do not even come
here: cli/main.py runs them without loading typer."""
from __future__ import annotations

import sys
from typing import List, Optional

import typer

from dynspec_cli.cli.errors import UsageError, report
from dynspec_cli.cli.options import (
    AcceptNewHostKey,
    KnownHosts,
    SshConfig,
    load_feature,
)
from dynspec_cli.cli.options import errors as _errors
from dynspec_cli.cli.options import out as _out
from dynspec_cli.engines import names as _engine_names

# Each command's own exit codes (what it returns, nothing more), in its --help.
EXIT_CODES = ("Exit codes: 0 live · 1 dead (the patched code cannot or did not run) · 2 bad input · 3 inconclusive · "
              "4 crashed · 5 ineffective (the patched code runs, accept len ~1.00 wherever speculation should be on).")
_ENGINES = " | ".join(_engine_names())  # (the registry's: a new engine is listed without an edit here)
LAUNCH_EXIT = ("Exit codes: 0 live and ready (with --no-watch: started) · 1 dead (or preflight refused to start it) · "
               "2 bad input or unreachable host · 3 inconclusive or timed out · 4 crashed · 5 ineffective (live and ready, "
               "but accept len ~1.00 wherever speculation should be on) · 130 interrupted.")
WATCH_EXIT = ("Exit codes: 0 live and ready · 1 dead · 2 bad input (no such run) or unreachable host · "
              "3 inconclusive or timed out · 4 crashed · 5 ineffective (live, accept len ~1.00) · 130 interrupted.")
EXPLAIN_EXIT = "Exit codes: 0 printed · 2 unknown finding code."
DEMO_EXIT = "Exit codes: 0 the replay showed what it promises (dead, then live) · 1 it did not."
STOP_EXIT = ("Exit codes: 0 no process of the run remains · 1 processes survived SIGKILL · "
             "2 bad input (no such run, a process that is not the run's) or unreachable host.")
STATUS_EXIT = "Exit codes: 0 listed · 2 bad input (no run of that name) or unreachable host."

PREFLIGHT_EXIT_CODES = ("Exit codes: 0 reachable · 1 dead (the patched code cannot run with this sglang, env and flags) · "
                        "2 bad input · 3 unknown · 5 ineffective (reachable, but the draft does not fit the algorithm: "
                        "speculation would accept nothing).")

app = typer.Typer(
    name="dynspec",
    help="Is my SGLang patch live? Evidence-backed, version-aware verdicts for patched speculative decoding.\n\n"
         "Each command's --help lists its exit codes; the gate, verify: " + EXIT_CODES.split(": ", 1)[1],
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", "-V", help="Print the version, the python and where the tables come from."),
) -> None:
    if version:  # cli/main.py answers `dynspec --version` alone before typer loads; this is `dynspec --version CMD`
        from dynspec_cli.cli.main import version as text

        typer.echo(text())
        raise typer.Exit(0)


def _fail(msg: str) -> "typer.Exit":
    return typer.Exit(report(msg))


@app.command(epilog=EXIT_CODES)
def verify(
    log: str = typer.Argument(..., help="The server log (as written by sglang, possibly growing, possibly several appended launches)."),
    json_out: bool = typer.Option(False, "--json", help="Print one JSON object instead of the report."),
    follow: bool = typer.Option(False, "--follow", "-f", help="Follow the growing file; exit as soon as the verdict is decided."),
    timeout: Optional[float] = typer.Option(None, "--timeout", help="With --follow: give up after this many seconds (verdict so far, exit 3 if undecided; exit 2 if the file never appeared)."),
    feature: Optional[str] = typer.Option(None, "--feature", help="Bundled feature name or path to a feature .toml (default: dynamic-spec-disable)."),
    patched_class: Optional[List[str]] = typer.Option(None, "--patched-class", help="Class holding the patch (repeatable); default: the feature's typical location."),
    patch: Optional[str] = typer.Option(None, "--patch", help="The unified diff applied: the classes its behaviour hunks change are the patched classes checked (default: the feature's `patch`)."),
    sglang_version: Optional[str] = typer.Option(None, "--sglang-version", help="The sglang release that wrote the log (default: inferred from the log, reported as a range)."),
    engine: Optional[str] = typer.Option(None, "--engine", help=f"{_ENGINES} | auto (default: recognised from the log's first lines, else the feature's engine)."),
    engine_version: Optional[str] = typer.Option(None, "--engine-version", help="The engine release that wrote the log (vLLM: default from its engine config line)."),
) -> None:
    """The verdict on whether the patched feature is live, from a server log."""
    from dynspec_cli.cli.verify import run_verify

    raise typer.Exit(run_verify(log, json_out=json_out, follow=follow, timeout=timeout, feature=feature,
                                patched_class=patched_class, patch=patch, sglang_version=sglang_version, engine=engine,
                                engine_version=engine_version))


@app.command(epilog=EXPLAIN_EXIT)
def explain(code: Optional[str] = typer.Argument(None, help="A finding code such as DS201; omit to list all."),
            markdown: bool = typer.Option(False, "--markdown", help="Print the table of all findings as Markdown.")) -> None:
    """What a finding means, why it matters and how to fix it."""
    from dynspec_cli.knowledge.findings import doc, markdown_table, registry
    from dynspec_cli.report.console import finding_doc_lines, show

    if markdown:
        sys.stdout.write(markdown_table() + "\n")
        return
    if code is None:
        show([[f"{c}  {d.name:<32} {d.severity:<8} {d.what}"] for c, d in registry().items()])
        return
    d = doc(code)
    if d is None:
        raise _fail(f"unknown finding code {code!r} (run `dynspec explain` for the list)")
    show(finding_doc_lines(code.upper(), d))


@app.command(epilog=DEMO_EXIT)
def demo(
    speed: float = typer.Option(20.0, "--speed", help="Replay speed-up against the recorded pacing."),
    json_out: bool = typer.Option(False, "--json", help="Print one JSON object: both scenes' verdicts (`scenes`) and the demo's exit code."),
) -> None:
    """Replay real recorded sglang start-ups through `verify --follow` (no GPU, no network):
    the seed's dead launch, caught at its first line, then the fixed launch reaching live."""
    from dynspec_cli.cli.demo import run_demo

    raise typer.Exit(run_demo(speed=speed, json_out=json_out))


@app.command(epilog=PREFLIGHT_EXIT_CODES,
             context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def preflight(
    ctx: typer.Context,
    profile: Optional[str] = typer.Argument(None, help="Profile (.toml path or bundled name); its host, python, env and flags are used. Server flags can also follow `--`."),
    host: Optional[str] = typer.Option(None, "--host", help="Where the server will run (default: the profile's, else local)."),
    python: Optional[str] = typer.Option(None, "--python", help="The interpreter that will run the server (default: python3 on the host)."),
    env: Optional[List[str]] = typer.Option(None, "--env", help="K=V of the server's environment (repeatable); K alone takes its value from this shell, so a secret stays off every command line."),
    feature: Optional[str] = typer.Option(None, "--feature", help="Bundled feature name or path to a feature .toml (default: the profile's, else dynamic-spec-disable)."),
    patch: Optional[str] = typer.Option(None, "--patch", help="The unified diff you applied (hunks -> files, lines, functions)."),
    patched_class: Optional[List[str]] = typer.Option(None, "--patched-class", help="Class holding the patch (repeatable); default: where the marker is found, else the feature's typical location."),
    dynamic: bool = typer.Option(False, "--dynamic", help="Also run sglang's own argument resolution in the server's python (it imports sglang there: as long as `import sglang.srt.server_args` takes on that host, 7-17 s measured on 2 CPU cores)."),
    json_out: bool = typer.Option(False, "--json", help="Print one JSON object instead of the report."),
    sbatch: Optional[str] = typer.Option(None, "--sbatch", help="Check your own sbatch script instead (node rank, rendezvous, node count): DS5xx."),
    ssh_config: SshConfig = None,
    known_hosts: KnownHosts = None,
    accept_new_host_key: AcceptNewHostKey = False,
    engine: Optional[str] = typer.Option(None, "--engine", help=f"{_ENGINES} (default: the feature's engine); the flags after `--` are that engine's server flags (`vllm serve` flags for vllm)."),
) -> None:
    """Before launch: which worker class will run, and whether the patched code is on its path.
    Seconds, no GPU: reads the installed sglang with the server's own python."""
    from dynspec_cli.cli.preflight import run_preflight

    raise typer.Exit(run_preflight(
        profile, ctx.args, host=host, python=python, env=env, feature=feature, patch=patch,
        patched_class=patched_class, dynamic=dynamic, json_out=json_out, ssh_config=ssh_config,
        known_hosts=known_hosts, accept_new_host_key=accept_new_host_key, engine=engine, sbatch=sbatch))


def _env_items(env: Optional[List[str]]) -> Optional[List[str]]:
    """--env K=V or K (this shell's value): see checks.env_item."""
    from dynspec_cli.cli import checks

    return [checks.env_item(item) for item in env] if env else env


@app.command(epilog=LAUNCH_EXIT)
def launch(
    profile: str = typer.Argument(..., help="Profile: a .toml path or a bundled example name."),
    host: Optional[str] = typer.Option(None, "--host", help="Override the profile's host (ssh_config alias, user@host[:port], local)."),
    env: Optional[List[str]] = typer.Option(None, "--env", help="K=V added to the server's environment (repeatable); K alone takes its value from this shell, so a secret stays off every command line."),
    set_: Optional[List[str]] = typer.Option(None, "--set", help="flag=value for sglang (repeatable; true = bare flag, false = drop)."),
    name: Optional[str] = typer.Option(None, "--name", help="Run name (default: the profile's)."),
    replace: bool = typer.Option(False, "--replace", help="Stop a live run of the same name first."),
    keep: bool = typer.Option(False, "--keep", help="Do not stop the server when the verdict is dead."),
    detach: bool = typer.Option(False, "--detach", help="On Ctrl-C leave the server running (re-attach with dynspec watch NAME)."),
    no_watch: bool = typer.Option(False, "--no-watch", help="Start and return at once."),
    no_preflight: bool = typer.Option(False, "--no-preflight", help="Skip the preflight check before starting."),
    no_probe: bool = typer.Option(False, "--no-probe", help="Do not inject the in-server probe (the server is left untouched)."),
    timeout: Optional[float] = typer.Option(None, "--timeout", help="Give up watching after this many seconds (default: the profile's ready_timeout)."),
    json_out: bool = typer.Option(False, "--json", help="Print JSON (the preflight result, then the run and its verdict) instead of the live report."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Slurm profiles: print the sbatch script and the per-node script, submit nothing."),
    patch: Optional[str] = typer.Option(None, "--patch", help="The unified diff you applied (default: the profile's `patch`): preflight judges its hunks; its path, sha256 and files go into the run record and prove's receipt."),
    ssh_config: SshConfig = None,
    known_hosts: KnownHosts = None,
    accept_new_host_key: AcceptNewHostKey = False,
) -> None:
    """Start the patched server (detached, locally or over SSH) and watch it: exit the moment the
    verdict is dead or crashed (stopping the server), or when it is live and ready."""
    from dynspec_cli import place
    from dynspec_cli.cli import runs
    from dynspec_cli.place.sequence import LaunchOptions

    with _errors():
        kind = place.of_profile(profile)  # where it runs: a host, a group, a scheduler's nodes
        req = place.Request(profile, runs.opener(ssh_config, known_hosts, accept_new_host_key), host=host,
                            env=_env_items(env), sets=set_, name=name, timeout=timeout, patch=patch,
                            probe=not no_probe, preflight=not no_preflight, options=place.options(kind, dry_run=dry_run))
        opts = LaunchOptions(replace=replace, keep=keep, detach=detach, watch=not no_watch,
                             preflight=not no_preflight, probe=not no_probe, timeout=timeout)
        code = runs.launch(kind, req, opts, json_out, dry_run=dry_run)
    raise typer.Exit(code)


@app.command(epilog=WATCH_EXIT)
def watch(
    name: str = typer.Argument(..., help="Run name."),
    host: str = typer.Option("local", "--host", help="Where the run is (local, an ssh_config alias or user@host[:port]); its records are in that host's dynspec home."),
    keep: bool = typer.Option(False, "--keep", help="Do not stop the server when the verdict is dead or crashed."),
    detach: bool = typer.Option(True, "--detach/--no-detach", help="On Ctrl-C leave the server running (default)."),
    timeout: Optional[float] = typer.Option(None, "--timeout", help="Give up watching after this many seconds (exit 3; the server keeps running)."),
    json_out: bool = typer.Option(False, "--json", help="Print one JSON object (the verdict and the run) instead of the live report."),
    ssh_config: SshConfig = None,
    known_hosts: KnownHosts = None,
    accept_new_host_key: AcceptNewHostKey = False,
) -> None:
    """Re-attach to a run (also from another machine) and watch it to its verdict."""
    from dynspec_cli.cli import runs

    with _errors():
        code = runs.watch(runs.request(ssh_config, known_hosts, accept_new_host_key), host, name, timeout=timeout,
                          keep=keep, detach=detach, json_out=json_out)
    raise typer.Exit(code)


@app.command(epilog=STOP_EXIT)
def stop(
    name: str = typer.Argument(..., help="Run name."),
    host: str = typer.Option("local", "--host", help="Where the run is (local, an ssh_config alias or user@host[:port]); its records are in that host's dynspec home."),
    grace: float = typer.Option(10.0, "--grace", help="Seconds between SIGTERM and SIGKILL."),
    ssh_config: SshConfig = None,
    known_hosts: KnownHosts = None,
    accept_new_host_key: AcceptNewHostKey = False,
) -> None:
    """Stop a run: SIGTERM to its process group, SIGKILL after the grace period, then confirm
    that no process of the group remains."""
    from dynspec_cli.cli import runs
    from dynspec_cli.run import control
    from dynspec_cli.run.hints import command
    from dynspec_cli.transport import TransportError

    with _errors():
        with runs.request(ssh_config, known_hosts, accept_new_host_key) as req:
            target = req.open_host(host)
            rec = None
            try:
                p, rec = runs.found(target, name, req)
                code = p.end(rec, grace=grace, out=_out(False))
            except TransportError as e:  # say what may be left, and how to try again
                pid = f" (pid {rec.pid})" if getattr(rec, "pid", None) else ""
                raise control.RunError(f"{e}; run {name!r}{pid} is not stopped and may still be running; retry "
                                       f"with: {command('stop', name, host=target)}") from None
    raise typer.Exit(code)


@app.command(epilog=STATUS_EXIT)
def status(
    names: Optional[List[str]] = typer.Argument(None, help="Only these runs (default: every run on the host)."),
    host: str = typer.Option("local", "--host", help="Where the run is (local, an ssh_config alias or user@host[:port]); its records are in that host's dynspec home."),
    json_out: bool = typer.Option(False, "--json", help="Print one JSON object ({\"runs\": [...]}) instead of the list."),
    ssh_config: SshConfig = None,
    known_hosts: KnownHosts = None,
    accept_new_host_key: AcceptNewHostKey = False,
) -> None:
    """Runs on a host: alive or not, the verdict so far, the last log lines."""
    from dynspec_cli import place
    from dynspec_cli.cli import runs

    with _errors():
        with runs.open_target(host, ssh_config, known_hosts, accept_new_host_key) as target:
            rows = place.status_rows(target, names or None, load_feature)  # every placement's (Slurm: by job id too)
            if names and not rows:
                raise UsageError(f"no run named {names[0]!r} on {target.name}" if len(names) == 1
                                 else f"no run named {' or '.join(map(repr, names))} on {target.name}")
    from dynspec_cli.report.runs import render_status

    render_status(_out(False), rows, host, json_out)


from dynspec_cli.cli import prove_cmds as _prove_cmds  # noqa: E402

_prove_cmds.register(app)
from dynspec_cli.cli import guard_cmd as _guard_cmd  # noqa: E402

_guard_cmd.register(app)
from dynspec_cli.cli import group_cmds as _group_cmds  # noqa: E402

_group_cmds.register(app)



def _summaries(t: typer.Typer) -> None:
    """Command lists show each command's first sentence whole: click would cut it at ~45
    characters with "..." (its default short help)."""
    import inspect

    for info in t.registered_commands:
        if info.short_help is None:
            doc = inspect.cleandoc(info.help or info.callback.__doc__ or "")
            info.short_help = " ".join(doc.split("\n\n")[0].split()).split(". ")[0].rstrip(".") + "."
    for g in t.registered_groups:
        sub = g.typer_instance
        if isinstance(sub.info.help, str):  # (typer's unset values are DefaultPlaceholders)
            g.short_help = sub.info.help.split("\n\n")[0]
        _summaries(sub)


_summaries(app)
