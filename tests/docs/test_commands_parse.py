"""Every `dynspec ...` command line in README.md and docs/*.md names a real command and real options of
that command, as the typer app defines them (dynspec_cli/cli/app.py); a runnable line (in a code block)
also parses as typer parses it. Nothing is run: each line is parsed in-process with click's make_context."""
from __future__ import annotations

import pytest
import typer
import typer.main

from dynspec_cli.cli.app import app
from tests.docs.pages import ROOT, Cmd, commands, pages

ROOT_CMD = typer.main.get_command(app)
# click's, or the copy recent typer releases vendor (typer._click): the one typer's own errors derive from
ClickException = next(k for k in typer.BadParameter.__mro__ if k.__name__ == "ClickException")


def is_group(cmd) -> bool:
    return hasattr(cmd, "commands")
CMDS = [c for p in pages() for c in commands(p)]


def spellings(cmd) -> set[str]:
    out = {"--help"}
    for p in cmd.params:
        if p.param_type_name == "option":
            out |= set(p.opts) | set(p.secondary_opts)
    return out


def resolve(cmd, argv: list[str], path: list[str], exact: bool) -> list[tuple]:
    """(command path, command, its arguments) for each command the words name; a synopsis may name
    alternatives as `watch/status/stop`."""
    if not is_group(cmd) or not argv or argv[0].startswith("-"):
        return [(path, cmd, argv)]
    names = [argv[0]] if exact else argv[0].split("/")
    out = []
    for name in names:
        sub = cmd.commands.get(name)
        assert sub is not None, f"`dynspec {' '.join(path + [name])}`: no such command (commands: {', '.join(sorted(cmd.commands))})"
        out += resolve(sub, argv[1:], path + [name], exact)
    return out


def check(c: Cmd) -> None:
    for path, cmd, args in resolve(ROOT_CMD, c.argv, [], c.exact):
        known = spellings(cmd)
        before = args[:args.index("--")] if "--" in args else args
        for word in before:
            if word.startswith("-") and len(word) > 1 and not word[1:2].isdigit():
                assert word.split("=", 1)[0] in known, (
                    f"`dynspec {' '.join(path)}` has no option {word.split('=', 1)[0]} "
                    f"(it has: {', '.join(sorted(known))})")
        if c.exact and not is_group(cmd):
            try:
                cmd.make_context(" ".join(["dynspec", *path]), list(args))
            except ClickException as e:
                raise AssertionError(f"`dynspec {' '.join(path)}` refuses these arguments: {e.format_message()}") from None


def test_the_pages_show_commands():
    """The extraction finds the lines a reader sees: the README's three steps, runnable lines in every page
    that has a code block, and the synopses."""
    where = {c.where.split(":")[0] for c in CMDS}
    assert {"README.md", "docs/guard.md", "docs/launch.md", "docs/preflight.md", "docs/verify.md"} <= where
    readme = [c.argv[0] for c in CMDS if c.where.startswith("README.md") and c.exact]
    assert {"demo", "preflight", "launch", "guard"} <= set(readme), readme
    assert any(not c.exact for c in CMDS) and len(CMDS) > 60, len(CMDS)


@pytest.mark.parametrize("c", CMDS, ids=[f"{c.where} {' '.join(c.argv[:2])}" for c in CMDS])
def test_every_documented_command_line_parses(c):
    check(c)


@pytest.mark.parametrize("line, problem", [
    ("dynspec verfy server.log", "no such command"),
    ("dynspec launch p.toml --hots gpu1", "has no option --hots"),
    ("dynspec guard my-run --windows 5 -- python bench.py", "has no option --windows"),
    ("dynspec group lunch g.toml", "no such command"),
    ("dynspec prove my-run --duration soon", "refuses these arguments"),
    ("dynspec launch", "refuses these arguments"),
])
def test_a_wrong_line_is_caught(line, problem):
    """The check fails on the mistakes a page could make: a misspelt command or option, a value the
    option's type refuses, a missing argument."""
    (c,) = [Cmd("x", line, line.split()[1:], True)]
    with pytest.raises(AssertionError, match=problem):
        check(c)


def test_a_synopsis_is_checked_for_its_options():
    check(Cmd("x", "", ["watch/status/stop", "NAME", "--host", "H"], False))
    with pytest.raises(AssertionError, match="has no option --grace"):
        check(Cmd("x", "", ["watch/status", "NAME", "--grace", "3"], False))
