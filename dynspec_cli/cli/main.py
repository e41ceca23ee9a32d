"""The `dynspec` command's entry point.

The two gates, `dynspec verify` (run by benchmark scripts before every benchmark:
`dynspec verify --follow server.log && python -m sglang.bench_serving ...`) and `dynspec preflight`
(run before every launch), have start-up budgets of 0.2 s and 0.5 s; typer alone takes ~80 ms of
them. So their usual forms are parsed here, from the tables below, and typer is never imported.
Any form these tables do not fully cover (--help, an unknown or malformed option, a value that is
not a number, preflight's server flags without `--`) goes to the full typer app, which prints its
usual help or error. tests/cli/test_entry.py checks each table against its typer command."""
from __future__ import annotations

import importlib
import os
import sys
from typing import NamedTuple, Optional, Sequence

# kinds of option: flag | text | number | texts (repeatable)
SSH_OPTIONS = {
    "--ssh-config": ("ssh_config", "text"),
    "--known-hosts": ("known_hosts", "text"),
    "--accept-new-host-key": ("accept_new_host_key", "flag"),
}


class Fast(NamedTuple):
    options: dict  # spelling -> (parameter, kind)
    positional: tuple  # parameter names, in order
    required: int  # how many of them must be given
    passthrough: bool  # whether `--` starts the sglang server flags (parameter `extra`)
    run: str  # module:function, called with the parameters as keywords; returns the exit code


FAST = {
    "verify": Fast({
        "--json": ("json_out", "flag"),
        "--follow": ("follow", "flag"),
        "-f": ("follow", "flag"),
        "--timeout": ("timeout", "number"),
        "--feature": ("feature", "text"),
        "--patched-class": ("patched_class", "texts"),
        "--patch": ("patch", "text"),
        "--sglang-version": ("sglang_version", "text"),
        "--engine": ("engine", "text"),
        "--engine-version": ("engine_version", "text"),
    }, ("log",), 1, False, "dynspec_cli.cli.verify:run_verify"),
    "preflight": Fast({
        "--host": ("host", "text"),
        "--python": ("python", "text"),
        "--env": ("env", "texts"),
        "--feature": ("feature", "text"),
        "--patch": ("patch", "text"),
        "--patched-class": ("patched_class", "texts"),
        "--dynamic": ("dynamic", "flag"),
        "--json": ("json_out", "flag"),
        "--engine": ("engine", "text"),
        "--sbatch": ("sbatch", "text"),
        **SSH_OPTIONS,
    }, ("profile",), 0, True, "dynspec_cli.cli.preflight:run_preflight"),
}


def parse(fast: Fast, args: Sequence[str]) -> Optional[dict]:
    """The command's parameters as keywords, or None to let typer handle these arguments."""
    kw: dict = {}
    positional: list[str] = []
    rest = list(args)
    while rest:
        arg = rest.pop(0)
        if arg == "--":
            if not fast.passthrough:
                positional += rest
            elif rest and not positional and not rest[0].startswith("--"):
                return None  # typer would read it as the positional argument
            else:
                kw["extra"] = rest
            break
        if not arg.startswith("-") or arg == "-":
            positional.append(arg)
            continue
        spelling, eq, value = arg.partition("=")
        if spelling not in fast.options:
            return None
        param, kind = fast.options[spelling]
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
    if not fast.required <= len(positional) <= len(fast.positional):
        return None
    kw.update(zip(fast.positional, positional))
    return kw


def unknown_option(fast: Fast, args: Sequence[str]) -> Optional[str]:
    """The line to print when an option before `--` is not one of the command's own: with `--`
    given, whatever precedes it is for dynspec, so a typo (`--hots`) must not become a server flag."""
    if not fast.passthrough or "--" not in args:
        return None
    own = list(args[:list(args).index("--")])
    while own:
        arg = own.pop(0)
        if not arg.startswith("-") or arg == "-":
            continue
        spelling, eq, _ = arg.partition("=")
        if spelling in fast.options:
            if fast.options[spelling][1] != "flag" and not eq and own:
                own.pop(0)  # its value
        elif spelling not in ("--help", "-h"):
            import difflib

            close = difflib.get_close_matches(spelling, list(fast.options), n=1)
            return (f"no such option: {spelling}" + (f" (did you mean {close[0]}?)" if close else "")
                    + "; server flags go after `--`")
    return None


def version() -> str:
    """`dynspec --version`: the release, the interpreter, and where the tables were found (an
    install that lost its tables says so here, not in the middle of a launch)."""
    from dynspec_cli import __version__, resources

    try:
        where = resources.origin()
    except FileNotFoundError as e:
        where = f"TABLES MISSING: {e}"
    return f"dynspec {__version__} (python {sys.version.split()[0]}, {sys.executable}; {where})"


def main() -> None:
    try:
        args = sys.argv[1:]
        if args in (["--version"], ["-V"]):
            sys.stdout.write(version() + "\n")
            sys.exit(0)
        fast = FAST.get(args[0]) if args else None
        if fast and (bad := unknown_option(fast, args[1:])):
            sys.stderr.write(f"dynspec: error: {bad} (see: dynspec {args[0]} --help)\n")
            sys.exit(2)
        kw = parse(fast, args[1:]) if fast else None
        if kw is None:
            code = run_app()
        else:
            module, _, func = fast.run.partition(":")
            code = getattr(importlib.import_module(module), func)(**kw)
    except KeyboardInterrupt:
        sys.stderr.write("dynspec: interrupted\n")
        sys.exit(130)
    except Exception as e:  # a bug: one line unless asked for the traceback
        fate = getattr(e, "dynspec_run_fate", None)  # place/sequence.py: what became of the run it watched
        if os.environ.get("DYNSPEC_DEBUG"):
            if fate:
                sys.stderr.write(f"dynspec: {fate}\n")
            raise
        sys.stderr.write(f"dynspec: internal error: {type(e).__name__}: {e} (set DYNSPEC_DEBUG=1 for the traceback)\n")
        if fate:
            sys.stderr.write(f"dynspec: {fate}\n")
        sys.exit(70)
    sys.exit(code)


class _Interrupted(Exception):
    """A KeyboardInterrupt that left a command (carried past typer, which would exit 130 in silence)."""


def _interrupts_reach_main(app) -> None:
    """Every command's Ctrl-C that the command itself does not handle reaches main(), which says
    `dynspec: interrupted`: typer turns a KeyboardInterrupt into a silent exit 130."""
    import functools

    def wrap(fn):
        if fn is None or getattr(fn, "_dynspec_wrapped", False):
            return fn

        @functools.wraps(fn)
        def run(*args, **kwargs):
            try:
                return fn(*args, **kwargs)
            except KeyboardInterrupt:
                raise _Interrupted() from None

        run._dynspec_wrapped = True
        return run

    todo = [app]
    while todo:
        t = todo.pop()
        for info in t.registered_commands:
            info.callback = wrap(info.callback)
        todo += [g.typer_instance for g in t.registered_groups if g.typer_instance is not None]


def run_app() -> int:
    """The full typer app; a usage error is one line naming the problem, exit 2."""
    import typer

    from dynspec_cli.cli.app import app

    _interrupts_reach_main(app)
    try:
        rv = app(standalone_mode=False, prog_name="dynspec")
    except (typer.Abort, _Interrupted):
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
