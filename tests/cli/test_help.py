"""Help as a new user reads it: command lists show whole summaries, every option says what it does,
and each command's epilog lists the exit codes that command returns (not verify's for all)."""
import re
import subprocess
import sys

import pytest
import typer.main

from dynspec_cli.cli.app import app

DYNSPEC = [sys.executable, "-m", "dynspec_cli"]
ROOT = typer.main.get_command(app)


def commands(group=ROOT, path=()):
    for name, cmd in group.commands.items():
        if hasattr(cmd, "commands"):  # (typer has its own click)
            yield from commands(cmd, path + (name,))
        else:
            yield path + (name,), cmd


ALL = {" ".join(p): c for p, c in commands()}


def help_text(*path: str) -> str:
    r = subprocess.run(DYNSPEC + [*path, "--help"], capture_output=True, text=True, timeout=60,
                       env={"COLUMNS": "80", "PATH": "/usr/bin:/bin"})
    assert r.returncode == 0, r.stderr
    return r.stdout


@pytest.mark.parametrize("path", sorted(ALL))
def test_every_option_says_what_it_does(path):
    missing = [p.opts for p in ALL[path].params if not (getattr(p, "help", None) or "").strip()]
    assert missing == []


@pytest.mark.parametrize("group", [(), ("group",)])
def test_command_lists_show_whole_first_sentences(group):
    text = help_text(*group)
    listing = " ".join(text.split("Commands:")[1].split())
    assert "..." not in listing
    # e.g. verify's summary, as its docstring says it (hand-copied), in full
    want = {(): "verify The verdict on whether the patched feature is live, from a server log. explain",
            ("group",): "watch Re-attach to a group and watch every node to the group's verdict. status"}[group]
    assert want in listing


# What each command returns, read from the code (cli/app.py, report/runs.py, cli/demo.py, ...):
CODES = {
    "verify": {0, 1, 2, 3, 4, 5}, "explain": {0, 2}, "demo": {0, 1}, "preflight": {0, 1, 2, 3, 5},
    "launch": {0, 1, 2, 3, 4, 5, 130}, "watch": {0, 1, 2, 3, 4, 5, 130}, "stop": {0, 1, 2}, "status": {0, 2},
    "prove": {0, 1, 2, 3, 4, 130}, "gate": {0, 1, 2}, "guard": {2, 65, 125, 126, 127},
    "group launch": {0, 1, 2, 3, 4}, "group watch": {0, 1, 2, 3, 4}, "group status": {0, 2}, "group stop": {0, 1, 2},
}


@pytest.mark.parametrize("path", sorted(ALL))
def test_each_epilog_lists_that_commands_exit_codes(path):
    epilog = " ".join(help_text(*path.split()).split("Exit codes:")[1].split())
    listed = {int(m) for m in re.findall(r"(?:^|· )(\d+) ", epilog)}
    assert listed == CODES[path], epilog
    if path != "verify":  # verify's table is verify's own
        assert "0 live · 1 dead (the patched code cannot or did not run) · 2 bad input · 3 inconclusive · 4 crashed" \
            not in epilog


def test_the_codes_named_are_the_codes_returned(tmp_path):
    assert subprocess.run(DYNSPEC + ["explain", "DS999"], capture_output=True, timeout=60).returncode == 2
    assert subprocess.run(DYNSPEC + ["explain", "DS201"], capture_output=True, timeout=60).returncode == 0
    r = subprocess.run(DYNSPEC + ["status", "no-such-run-42"], capture_output=True, text=True, timeout=60,
                       env={"DYNSPEC_HOME": str(tmp_path), "PATH": "/usr/bin:/bin"})
    assert r.returncode == 2 and "no run named" in r.stderr
    assert subprocess.run(DYNSPEC + ["status"], capture_output=True, timeout=60,
                          env={"DYNSPEC_HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}).returncode == 0
