"""The `dynspec` command's entry point.

`dynspec verify` is the gate benchmark scripts run before every benchmark
(`dynspec verify --follow server.log && python -m sglang.bench_serving ...`), so its usual forms
are parsed here without importing typer, which alone takes a quarter of verify's 0.2 s budget.
Any form this parser does not fully understand (--help, an unknown or malformed option, a value
that is not a number) goes to the full typer app, which prints its usual help or error.
tests/cli/test_entry.py checks VERIFY_OPTIONS against the typer command, option by option."""
from __future__ import annotations

import os
import sys
from typing import Optional, Sequence

# verify's options: spelling -> (parameter, kind); kind: flag | text | number | texts (repeatable)
VERIFY_OPTIONS = {
    "--json": ("json_out", "flag"),
    "--follow": ("follow", "flag"),
    "-f": ("follow", "flag"),
    "--timeout": ("timeout", "number"),
    "--feature": ("feature", "text"),
    "--patched-class": ("patched_class", "texts"),
    "--sglang-version": ("sglang_version", "text"),
}


def parse_verify(args: Sequence[str]) -> Optional[dict]:
    """verify's arguments as keyword arguments of run_verify, or None to let typer handle them."""
    kw: dict = {}
    positional: list[str] = []
    rest = list(args)
    while rest:
        arg = rest.pop(0)
        if arg == "--":
            positional += rest
            break
        if not arg.startswith("-") or arg == "-":
            positional.append(arg)
            continue
        spelling, eq, value = arg.partition("=")
        if spelling not in VERIFY_OPTIONS:
            return None
        param, kind = VERIFY_OPTIONS[spelling]
        if kind == "flag":
            if eq:
                return None
            kw[param] = True
            continue
        if not eq:
            if not rest:
                return None
            value = rest.pop(0)
        if kind == "number":
            try:
                value = float(value)
            except ValueError:
                return None
        if kind == "texts":
            kw.setdefault(param, []).append(value)
        else:
            kw[param] = value
    if len(positional) != 1:
        return None
    return {"log": positional[0], **kw}


def main() -> None:
    try:
        args = sys.argv[1:]
        kw = parse_verify(args[1:]) if args[:1] == ["verify"] else None
        if kw is None:
            code = run_app()
        else:
            from dynspec_cli.cli.verify import run_verify

            code = run_verify(**kw)
    except KeyboardInterrupt:
        sys.stderr.write("dynspec: interrupted\n")
        sys.exit(130)
    except Exception as e:  # a bug: one line unless asked for the traceback
        if os.environ.get("DYNSPEC_DEBUG"):
            raise
        sys.stderr.write(f"dynspec: internal error: {type(e).__name__}: {e} (set DYNSPEC_DEBUG=1 for the traceback)\n")
        sys.exit(70)
    sys.exit(code)


def run_app() -> int:
    """The full typer app; a usage error is one line naming the problem, exit 2."""
    import typer

    from dynspec_cli.cli.app import app

    try:
        rv = app(standalone_mode=False, prog_name="dynspec")
    except typer.Abort:
        raise KeyboardInterrupt from None
    except typer.TyperException as e:
        message = e.format_message()
        if "\n" in message:  # no arguments: the help text
            sys.stdout.write(message + "\n")
            return e.exit_code
        ctx = getattr(e, "ctx", None)
        where = f" (see: {ctx.command_path} --help)" if ctx is not None else ""
        sys.stderr.write(f"dynspec: error: {message}{where}\n")
        return e.exit_code
    return rv if isinstance(rv, int) else 0
