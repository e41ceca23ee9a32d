"""`dynspec prove` and `dynspec gate`: the feature seen doing its job, and the cheap check a
benchmark script runs before measuring."""
from __future__ import annotations

import sys
from typing import List, Optional

import typer

from dynspec_cli.cli.options import AcceptNewHostKey, KnownHosts, SshConfig

PROVE_EXIT = ("Exit codes: 0 proven · 1 the feature does not behave as expected (or never speculates) · "
              "2 bad input · 3 inconclusive (e.g. the running batch never exceeded the threshold) · "
              "4 the server died during the run · 130 interrupted.")
GATE_EXIT = ("Exit codes: 0 the receipt says live and proven and the same server process runs the same "
             "patched files (a Slurm run: the same job RUNNING on the same nodes, node 0's proven server "
             "alive) · 1 a check failed (one line says which) · 2 no readable receipt / bad input.")


GATE_PATCH_HELP = ("The diff the benchmark means to measure (a file, or - for standard input): refuse unless the "
                   "receipt proved a run launched with this very diff (its sha256).")


ACCEPT_SYNTHETIC_HELP = ("Pass a server whose acceptance is synthetic or lossy (sglang --speculative-accept-threshold-* "
                         "below 1.0, vLLM rejection_sample_method synthetic or fly): refused otherwise.")


def _fail(msg: str) -> typer.Exit:
    from dynspec_cli.cli.errors import report

    return typer.Exit(report(msg))


def _bad_input():
    from dynspec_cli.cli.options import errors

    return errors()


def prove(
    name: Optional[str] = typer.Argument(None, help="Run name (as given to dynspec launch) or a Slurm run's job id; "
                                                    "or use --url."),
    host: str = typer.Option("local", "--host", help="Where the run lives (ssh_config alias, user@host[:port], local)."),
    url: Optional[str] = typer.Option(None, "--url", help="A server on this machine without a run record (loopback addresses only)."),
    threshold: Optional[int] = typer.Option(None, "--threshold", help="Default: --speculative-disable-batch-threshold in the run's command line (else the marker, else /server_info)."),
    steps: str = typer.Option("1,N,N+1,2N", "--steps", help="Client concurrency per step; N is the threshold."),
    duration: float = typer.Option(20.0, "--duration", help="Seconds of traffic per step."),
    max_requests: int = typer.Option(1000, "--max-requests", help="Requests per step at most (0: no bound)."),
    max_new_tokens: int = typer.Option(128, "--max-new-tokens", help="Tokens generated per request (ignore_eos)."),
    report: Optional[str] = typer.Option(None, "--report", help="Write report.html and prove.json into this directory."),
    json_out: bool = typer.Option(False, "--json", help="Print the result as one JSON object."),
    feature: Optional[str] = typer.Option(None, "--feature", help="Feature name or .toml (default: the run's; with --url dynamic-spec-disable)."),
    log: Optional[str] = typer.Option(None, "--log", help="With --url: the server's log on this machine (Decode batch lines, verdict)."),
    patched_file: Optional[List[str]] = typer.Option(None, "--patched-file", help="A patched file to hash into the receipt (repeatable; default: the files holding the feature's marker under the imported sglang)."),
    api_key_env: Optional[str] = typer.Option(None, "--api-key-env", help="Environment variable holding the server's --api-key (default: OPENAI_API_KEY, as for sglang.bench_serving). The key itself is never printed nor put on a command line."),
    patch: Optional[str] = typer.Option(None, "--patch", help="The diff the server runs (default: the run's, as launch --patch recorded it): its path and sha256 go into the receipt, for `gate --patch`; a run launched with another diff is refused."),
    ssh_config: SshConfig = None,
    known_hosts: KnownHosts = None,
    accept_new_host_key: AcceptNewHostKey = False,
) -> None:
    """Drive the server at concurrency steps below and above the threshold and show, from its own
    Decode batch lines, meta_info, /server_info and /metrics, that speculation is on at running
    batches up to the threshold and off above it. Writes a receipt next to the run record for
    `dynspec gate`."""
    from dynspec_cli import place
    from dynspec_cli.cli import runs
    from dynspec_cli.cli.errors import UsageError
    from dynspec_cli.knowledge.features import load_feature
    from dynspec_cli.prove import session
    from dynspec_cli.prove.plan import loopback_base
    from dynspec_cli.report.console import console
    from dynspec_cli.transport import LocalHost

    out = console(stderr=json_out)
    with _bad_input():
        if (name is None) == (url is None):
            raise UsageError("give a run name or --url (one of them)")
        if url is not None:
            if log is not None:
                import os

                if not os.path.isfile(log):
                    raise UsageError(f"--log {log}: no such file")
            host_obj = LocalHost(python=sys.executable)
            feat = load_feature(feature)
            target = session.Target(host_obj, sys.executable, loopback_base(url), log=log)
        else:
            host_obj = runs.open_target(host, ssh_config, known_hosts, accept_new_host_key)
            found = place.find(host_obj, name, place.Request())  # any placement's run (a Slurm job id too)
            if found is None:
                raise UsageError(f"no run named {name!r} on {host_obj.name}")
            p, rec = found
            feat = load_feature(feature or rec.feature)
            target = p.prove_target(rec)
            if patch is not None and target.record is not None:
                target.record = _with_patch(target.record, patch)
        if patch is not None and url is not None:
            raise UsageError("--patch needs the run's record (a run name): a server given by --url has no receipt to carry it")
        session.check_engine(feat)
        target.api_key, target.api_key_source = _api_key(api_key_env, target)
        with host_obj:
            try:
                code = _prove(target, feat, out, json_out, threshold, steps, duration, max_requests, max_new_tokens,
                              report, patched_file)
            except KeyboardInterrupt:  # run_python kills the load generator's process group on the way out
                sys.stderr.write(f"\ndynspec: interrupted: the load was stopped (the load generator on {host_obj.name} "
                                 f"was killed); no receipt written\n")
                code = 130
    raise typer.Exit(code)


def _with_patch(rec, patch: str):
    """The run's record as prove's receipt sees it with `--patch`: the diff the run was launched with
    (the same one, else UsageError: prove proves the server that runs), or, for a run launched without
    one, this diff's path, sha256 and hunks from its text (its files: RECORD finds them)."""
    import msgspec

    from dynspec_cli.cli.errors import UsageError
    from dynspec_cli.run import patchfile

    path, text = patchfile.read(patch)
    given = patchfile.summary(path, text, None)
    recorded = rec.patch or {}
    if recorded.get("sha256") and recorded["sha256"] != given["sha256"]:
        raise UsageError(f"--patch {path} is not the diff run {rec.name} was launched with ({recorded.get('path')}); "
                         f"prove the run that runs this diff")
    return rec if recorded.get("sha256") else msgspec.structs.replace(rec, patch=given)


def _api_key(env_name, target) -> tuple:
    """The server's --api-key from this machine's environment: the variable named by --api-key-env,
    else OPENAI_API_KEY (what sglang.bench_serving sends). A run started with --api-key needs it."""
    import os

    from dynspec_cli.cli.errors import UsageError

    name = env_name or "OPENAI_API_KEY"
    key = os.environ.get(name) or None
    if env_name and key is None:
        raise UsageError(f"--api-key-env {env_name}: no such environment variable (or it is empty)")
    needs = target.record is not None and any(a == "--api-key" or a.startswith("--api-key=") for a in target.record.argv)
    if needs and key is None:
        raise UsageError(f"run {target.record.name} was started with --api-key: export OPENAI_API_KEY=<the key> "
                         f"(the variable sglang.bench_serving reads) or name another variable with --api-key-env")
    return key, (name if key else None)


def _prove(target, feat, out, json_out, threshold, steps, duration, max_requests, max_new_tokens, report,
           patched_file) -> int:
    from dynspec_cli.prove import receipt as receipts
    from dynspec_cli.prove import report as reports
    from dynspec_cli.prove import session
    from dynspec_cli.report.jsonout import emit

    if target.record is None and target.log:
        from dynspec_cli import engines
        from dynspec_cli.verdict.pipeline import judge_file

        verdict, probe = judge_file(target.log, feat, None, None, engine=engines.of(feat)).to_json(), None
    else:
        verdict, probe = session.fresh_verdict(target, feat)
    gone = session.gone(target)
    if gone:
        sys.stderr.write(f"dynspec: error: {gone}: nothing to prove (run {target.record.name} on {target.host.name})\n")
        return 4
    info = session.server_info(target, feat)
    if info.get("error") and target.record is None:
        sys.stderr.write(f"dynspec: error: {target.base} does not answer ({info['error']})\n")
        return 4
    th, source = session.threshold_of(target, feat, threshold, verdict, info)
    plan = session.make_plan(th, source, steps, duration, max_requests, max_new_tokens)
    server = {"version": info.get("version"), "speculative_algorithm": info.get("speculative_algorithm"),
              "max_running_requests": info.get("max_running_requests"), "server_info_endpoint": info.get("endpoint")}
    proof = session.Proof(target, feat, plan, verdict, probe, server)

    def on_start(index: int, concurrency: int) -> None:
        if not json_out:
            out.print(f"  [dim]step {index}/{len(plan.steps)}: {concurrency} client(s) for up to {plan.duration:g} s …[/]")

    def on_step(s) -> None:
        if json_out:
            return
        rr = s.running_range
        out.print(f"  [dim]      {s.requests_ok} requests, "
                  f"running batch {s.running_mode if rr else 'unknown'}"
                  f"{f' ({rr[0]}–{rr[1]})' if rr and rr[0] != rr[1] else ''}, speculation {s.speculation} → {s.outcome}[/]")

    if not json_out:
        out.print(f"[bold]proving[/] {feat.name} on {target.label}: threshold {'none' if th is None else th} (from {source}), "
                  f"steps {', '.join(map(str, plan.steps))}, {plan.duration:g} s / ≤{plan.max_requests or '∞'} requests each")
    session.Prover(target, feat, plan, on_start=on_start, on_step=on_step).run(proof)
    doc = proof.to_json()
    if target.record is not None:
        if patched_file:
            files = [(p, "given") for p in patched_file]
            note = "given with --patched-file"
        else:
            files, note = receipts.patched_sources(target.host, target.python, feat, target.record.argv,
                                                   target.record.patch)
        rdoc = receipts.build(target.host, target.record, doc, proof.verdict, probe, files, note, target.where)
        doc["receipt"] = receipts.write(target.host, rdoc)
        doc["patched_files"] = rdoc["patched_files"]
    else:
        doc["receipt"] = None
    if report:
        doc["report"] = reports.write_report(doc, report)
    if json_out:
        emit(doc)
    else:
        reports.render(doc, out)
        if doc["receipt"]:
            pf = doc.get("patched_files") or []
            out.print(f"  receipt: {doc['receipt']} [dim]({len(pf)} patched file(s) hashed"
                      f"{'' if pf else ' — the gate will refuse it: pass --patched-file PATH'})[/]")
        else:
            out.print("  [dim]no receipt: --url has no run record[/]")
        for p in doc.get("report") or []:
            out.print(f"  report: {p}")
    return proof.conclusion.exit_code


def gate(
    receipt: str = typer.Argument(..., help="The receipt (path on --host), or a run name (a Slurm run's job id too): "
                                            "~/.dynspec/runs/NAME.receipt.json."),
    host: str = typer.Option("local", "--host", help="The server's host (where the receipt and the process are)."),
    max_age: Optional[str] = typer.Option(None, "--max-age", help="Refuse a receipt older than this (90s, 30m, 1h, 2d)."),
    json_out: bool = typer.Option(False, "--json", help="Print the result as one JSON object."),
    accept_synthetic: bool = typer.Option(False, "--accept-synthetic", help=ACCEPT_SYNTHETIC_HELP),
    patch: Optional[str] = typer.Option(None, "--patch", help=GATE_PATCH_HELP),
    ssh_config: SshConfig = None,
    known_hosts: KnownHosts = None,
    accept_new_host_key: AcceptNewHostKey = False,
) -> None:
    """For benchmark scripts: exit 0 only if the receipt says live and proven and the same server
    process (pid, start time, command line) still runs with the same patched files.
    `dynspec gate myrun --max-age 1h && python -m sglang.bench_serving ...`"""
    from dynspec_cli import place
    from dynspec_cli.cli import runs
    from dynspec_cli.prove import receipt as receipts
    from dynspec_cli.prove.plan import parse_age
    from dynspec_cli.report.jsonout import emit

    with _bad_input():
        age = parse_age(max_age) if max_age is not None else None
        given = patch_given(patch)
        with runs.open_target(host, ssh_config, known_hosts, accept_new_host_key) as target:
            path, doc = load_receipt(target, receipt)
            try:
                summary = receipts.check(target, doc, max_age=age, accept_synthetic=accept_synthetic,
                                         check_server=place.of_receipt(doc).gate_server, patch=given)
            except receipts.GateFailed as e:
                if json_out:
                    emit({"ok": False, "check": e.check, "message": str(e), "receipt": path})
                sys.stderr.write(f"dynspec gate: FAILED {e}\n")
                raise typer.Exit(1)
    if json_out:
        emit({"ok": True, "check": None, "message": summary, "receipt": path})
    else:
        sys.stdout.write(f"dynspec gate: ok — {summary}\n")
    raise typer.Exit(0)


def patch_given(patch: Optional[str]) -> Optional[tuple[str, str]]:
    """(path, sha256) of `--patch` (read here, where the command runs); one line, exit 2, for a bad diff."""
    if patch is None:
        return None
    from dynspec_cli.run import patchfile

    path, text = patchfile.read(patch)
    return path, patchfile.sha256(text)


def load_receipt(target, receipt: str) -> tuple[str, dict]:
    """The receipt a run name, a Slurm job id or a path names on `target`: (path, document);
    typer.Exit(2) with one line when there is none or it does not parse."""
    import json

    from dynspec_cli import place
    from dynspec_cli.prove import receipt as receipts

    path = receipt
    if "/" not in receipt and not receipt.endswith(".json"):
        found = place.find(target, receipt, place.Request()) if receipt.isdigit() else None  # a Slurm job id
        path = receipts.receipt_path(target, found[0].name if found else receipt)
    try:
        return path, json.loads(target.read_file(path))
    except FileNotFoundError:
        raise _fail(f"no receipt at {target.name}:{path} (run dynspec prove first)")
    except (OSError, ValueError) as e:
        raise _fail(f"{target.name}:{path}: not a readable receipt ({e})")


def register(app: typer.Typer) -> None:
    """Called by app.py at its end."""
    app.command(epilog=PROVE_EXIT)(prove)
    app.command(epilog=GATE_EXIT)(gate)
