"""dynspec's command line. Commands import what they need when they run, so start-up stays
fast (`dynspec verify` of a small log is a ~0.1 s affair); sglang is never imported here."""
from __future__ import annotations

import sys
from typing import List, Optional

import typer

EXIT_CODES = """Exit codes: 0 live / reachable · 1 dead (the patched code cannot or did not run) · 2 bad input · 3 inconclusive / unknown · 4 crashed."""

app = typer.Typer(
    name="dynspec",
    help="Is my SGLang patch live? Evidence-backed, version-aware verdicts for patched speculative decoding.\n\n" + EXIT_CODES,
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)


class UsageError(Exception):
    """Bad input: printed as one line, exit 2."""


def _fail(msg: str) -> "typer.Exit":
    sys.stderr.write(f"dynspec: error: {msg}\n")
    return typer.Exit(2)


@app.command(epilog=EXIT_CODES)
def verify(
    log: str = typer.Argument(..., help="The server log (as written by sglang, possibly growing, possibly several appended launches)."),
    json_out: bool = typer.Option(False, "--json", help="Print one JSON object instead of the report."),
    follow: bool = typer.Option(False, "--follow", "-f", help="Follow the growing file; exit as soon as the verdict is decided."),
    timeout: Optional[float] = typer.Option(None, "--timeout", help="With --follow: give up after this many seconds (verdict so far, exit 3 if undecided)."),
    feature: Optional[str] = typer.Option(None, "--feature", help="Bundled feature name or path to a feature .toml (default: dynamic-spec-disable)."),
    patched_class: Optional[List[str]] = typer.Option(None, "--patched-class", help="Class holding the patch (repeatable); default: the feature's typical location."),
    sglang_version: Optional[str] = typer.Option(None, "--sglang-version", help="The sglang release that wrote the log (default: inferred from the log, reported as a range)."),
) -> None:
    """The verdict on whether the patched feature is live, from a server log."""
    from dynspec_cli.cli import verify as run
    from dynspec_cli.evidence.scan import LogError
    from dynspec_cli.knowledge.features import load_feature
    from dynspec_cli.knowledge.tables import ConfigError

    try:
        feat = load_feature(feature)
        if timeout is not None and timeout <= 0:
            raise UsageError("--timeout must be a positive number of seconds")
        if follow:
            v = run.follow_file(log, feat, patched_class, sglang_version, timeout=timeout)
        else:
            v = run.verify_file(log, feat, patched_class, sglang_version)
    except (ConfigError, LogError, UsageError) as e:
        raise _fail(str(e))
    _show(v.to_json(), json_out, source=log)
    raise typer.Exit(v.exit_code)


def _show(doc: dict, json_out: bool, source: str = "") -> None:
    if json_out:
        from dynspec_cli.report.jsonout import emit

        emit(doc)
    else:
        from dynspec_cli.report.console import console, render_verdict

        render_verdict(doc, console(), source=source)


@app.command(epilog=EXIT_CODES)
def explain(code: Optional[str] = typer.Argument(None, help="A finding code such as DS201; omit to list all.")) -> None:
    """What a finding means, why it matters and how to fix it."""
    from dynspec_cli.knowledge.findings import doc, registry
    from dynspec_cli.report.console import console, render_finding_doc

    out = console()
    if code is None:
        for c, d in registry().items():
            out.print(f"{c}  {d.name:<32} {d.severity:<8} {d.what}")
        return
    d = doc(code)
    if d is None:
        raise _fail(f"unknown finding code {code!r} (run `dynspec explain` for the list)")
    render_finding_doc(code.upper(), d, out)


@app.command(epilog=EXIT_CODES)
def demo(
    speed: float = typer.Option(20.0, "--speed", help="Replay speed-up against the recorded pacing."),
    json_out: bool = typer.Option(False, "--json", help="Print each verdict as JSON."),
) -> None:
    """Replay real recorded sglang start-ups through `verify --follow` (no GPU, no network):
    the seed's dead launch, caught at its first line, then the fixed launch reaching live."""
    from dynspec_cli.cli.demo import run_demo

    raise typer.Exit(run_demo(speed=speed, json_out=json_out))


def main() -> None:
    try:
        app()
    except KeyboardInterrupt:
        sys.stderr.write("dynspec: interrupted\n")
        sys.exit(130)
