"""`dynspec guard NAME -- BENCHMARK...`: the gate, then the benchmark watched while it runs."""
from __future__ import annotations

import shutil
import sys
from typing import List, Optional

import typer

from dynspec_cli.cli.options import AcceptNewHostKey, KnownHosts, SshConfig
from dynspec_cli.cli.prove_cmds import ACCEPT_SYNTHETIC_HELP, GATE_PATCH_HELP

INVALID = 65  # sysexits' EX_DATAERR: the benchmark ran, its numbers are not the proven server's
REFUSED = 125  # as timeout(1) and env(1): the wrapper itself refused, the command did not start
GUARD_EXIT = ("Exit codes: the benchmark's own exit status when the run is valid · 2 bad input, nothing started · "
              "65 the run is invalid (the server restarted or changed, accept len ~1.00 for N windows, evidence "
              "missing, the adaptive tier pinned, the feature misbehaved, counters reset, the server died, no request "
              "reached it, decode ran eager though graphs were captured, the attention backend changed) · "
              "125 the gate refused: the benchmark was not started (one line says which check) · 126 the command "
              "cannot be executed · 127 the command was not found.")


def guard(
    receipt: str = typer.Argument(..., help="Run name (a Slurm run's job id, or a receipt path), as for dynspec gate."),
    command: Optional[List[str]] = typer.Argument(None, help="The benchmark command line, after `--`; it runs as it "
                                                             "would alone (stdin, stdout, stderr and exit status its own)."),
    host: str = typer.Option("local", "--host", help="The server's host (where the receipt, the log and the process are)."),
    max_age: Optional[str] = typer.Option(None, "--max-age", help="Refuse a receipt older than this (90s, 30m, 1h, 2d)."),
    window: float = typer.Option(10.0, "--window", help="Seconds per window: each is decided on its own."),
    invalid_after: int = typer.Option(2, "--invalid-after", help="Windows in a row of accept len ~1.00, of a silent "
                                                                 "rank or of a pinned adaptive tier that make the run invalid."),
    report: Optional[str] = typer.Option(None, "--report", help="Where the JSON report goes (default: beside the "
                                                                "benchmark's result file, else ./dynspec-guard-NAME-TIME.json); "
                                                                "its chart goes beside it, as .svg."),
    accept_synthetic: bool = typer.Option(False, "--accept-synthetic", help=ACCEPT_SYNTHETIC_HELP),
    accept_eager: bool = typer.Option(False, "--accept-eager", help="Eager decode on a server that captured CUDA "
                                                                    "graphs does not make the run invalid (DS709): you "
                                                                    "mean to measure eager decode; it is noted (DS711)."),
    api_key_env: Optional[str] = typer.Option(None, "--api-key-env", help="Environment variable holding the server's "
                                                                          "--api-key (default: OPENAI_API_KEY), for /server_info."),
    patch: Optional[str] = typer.Option(None, "--patch", help=GATE_PATCH_HELP),
    ssh_config: SshConfig = None,
    known_hosts: KnownHosts = None,
    accept_new_host_key: AcceptNewHostKey = False,
) -> None:
    """Run a benchmark under guard: the gate first (the proven server, the same patched files), then
    the benchmark as a child while the server's log, its /metrics per rank and the proven process
    are watched; per window, whether speculation was live, effective and as the feature promises.
    `dynspec guard myrun -- python -m sglang.bench_serving --port 30000 ...`"""
    from dynspec_cli import place
    from dynspec_cli import engines
    from dynspec_cli.cli import runs
    from dynspec_cli.cli.errors import UsageError
    from dynspec_cli.cli.prove_cmds import _api_key, _bad_input, load_receipt, patch_given
    from dynspec_cli.guard import chart
    from dynspec_cli.guard import report as reports
    from dynspec_cli.guard.watch import Guard
    from dynspec_cli.knowledge.features import load_feature
    from dynspec_cli.prove import receipt as receipts
    from dynspec_cli.prove.plan import parse_age
    from dynspec_cli.report.console import console

    err = console(stderr=True)
    with _bad_input():
        if not command:
            raise UsageError("give the benchmark command after `--` (dynspec guard NAME -- python -m sglang.bench_serving ...)")
        if window <= 0:
            raise UsageError("--window must be a positive number of seconds")
        if invalid_after < 1:
            raise UsageError("--invalid-after must be at least 1")
        age = parse_age(max_age) if max_age is not None else None
        given = patch_given(patch)
        if shutil.which(command[0]) is None:
            sys.stderr.write(f"dynspec guard: {command[0]}: command not found\n")
            raise typer.Exit(127)
        host_obj = runs.open_target(host, ssh_config, known_hosts, accept_new_host_key)
    with host_obj, _bad_input():
        path, doc = load_receipt(host_obj, receipt)
        try:
            summary = receipts.check(host_obj, doc, max_age=age, accept_synthetic=accept_synthetic,
                                     check_server=place.of_receipt(doc).gate_server, patch=given)
        except receipts.GateFailed as e:
            sys.stderr.write(f"dynspec guard: gate FAILED {e}: the benchmark was not started\n")
            raise typer.Exit(REFUSED)
        target = _target(host_obj, doc)
        feature = load_feature(doc.get("feature"))
        th = (doc.get("prove") or {}).get("threshold")
        threshold = int(th) if th is not None else None
        target.api_key, target.api_key_source = _api_key(api_key_env, target)
        ranks = _ranks(target.record.argv if target.record else [], engines.of(feature).serving)
        err.print(f"dynspec guard: gate ok — {summary}")
        err.print(f"dynspec guard: watching {target.label}: windows of {window:g} s, threshold {'none' if threshold is None else threshold}, "
                  f"{len(ranks)} DP rank(s); the report follows the benchmark's output")
        g = Guard(target, feature, doc, threshold=threshold, window=window, hold=invalid_after, ranks=ranks,
                  on_window=lambda w: _live(err, w), accept_eager=accept_eager).run(list(command))
        code = INVALID if g.reasons else (g.child.exit_code if g.child.exit_code is not None else 1)
        out = reports.document(g, name=doc["run"]["name"], receipt_path=path, gate=summary, feature=feature.name,
                               threshold=threshold, window=window, hold=invalid_after, ranks=ranks, exit_code=code,
                               provenance=receipts.provenance(doc))
        out["path"] = reports.result_path(list(command), doc["run"]["name"], report)
        out["chart"] = chart.path_for(out["path"])
        reports.write(out, out["path"])
        chart.write(out, out["chart"])
        reports.render(out, g, err)
    raise typer.Exit(code)


def _live(err, w) -> None:
    """One line per window that is not plainly fine, as it happens."""
    from dynspec_cli.guard.windows import GOOD

    if w.state not in GOOD:
        msgs = [e.message for e in w.events if e.fatal] or [f"{r.name} {r.state}" for r in w.ranks.values()
                                                           if r.state not in GOOD]
        err.print(f"[red]dynspec guard: window {w.index} ({w.start:.0f}–{w.end:.0f} s): {w.state}[/] — {'; '.join(msgs)}")


def _target(host, doc):
    """The proven server as prove reached it: its run's record on `host`, by the receipt's placement."""
    from dynspec_cli import place
    from dynspec_cli.cli.errors import UsageError

    name = doc["run"]["name"]
    found = place.of_receipt(doc).find(host, name, place.Request())
    if found is None:
        raise UsageError(f"no run named {name!r} on {host.name}")
    p, rec = found
    return p.prove_target(rec)


def _ranks(argv: list[str], serving) -> list[str]:
    """The streams to expect: one per DP rank, named as the engine's Serving.rank_label says (sglang
    tags their lines DP0, DP1, ...; vLLM names each engine, `Engine 001:`, and labels its /metrics
    engine="1")."""
    from dynspec_cli.prove.plan import threshold_from_argv

    dp = 1
    for flag in serving.dp_flags:
        dp = threshold_from_argv(argv, flag) or dp
    return [f"{serving.rank_label[1]}{i}" for i in range(dp)] if dp > 1 else [""]


def register(app: typer.Typer) -> None:
    app.command(epilog=GUARD_EXIT)(guard)
