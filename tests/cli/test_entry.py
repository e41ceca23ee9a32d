"""The `dynspec` entry point: the fast parsers of verify and preflight agree with the typer commands
they stand in for, usage errors are one line with exit 2, and the plain report is exactly what rich
would print."""
import io
import subprocess
import sys

import pytest
import typer.main

from dynspec_cli.cli.app import app
from dynspec_cli.cli.main import FAST, parse
from dynspec_cli.report import console as report
from tests.cli.test_verify_cli import SEED_LINE

DYNSPEC = [sys.executable, "-m", "dynspec_cli"]


def typer_command(name):
    return typer.main.get_command(app).commands[name]


def typer_params(name, args):
    """What typer parses from these arguments (only values that differ from the defaults; the
    server flags of preflight as `extra`, as the command reads them)."""
    cmd = typer_command(name)
    ctx = cmd.make_context(name, list(args))
    defaults = {p.name: p.get_default(ctx) for p in cmd.params}
    out = {k: (list(v) if isinstance(v, tuple) else v) for k, v in ctx.params.items()
           if v != defaults[k] and v not in (None, ())}
    extra = list(ctx.args)
    if str(out.get("profile", "")).startswith("--"):  # run_preflight moves it back to the flags
        extra.insert(0, out.pop("profile"))
    if extra:
        out["extra"] = extra
    return out


@pytest.mark.parametrize("name", sorted(FAST))
def test_the_fast_table_is_the_typer_command(name):
    """Every option of the typer command, with the same spelling, parameter and kind; nothing more."""
    fast = FAST[name]
    kinds, positional = {}, []
    for p in typer_command(name).params:
        if p.param_type_name == "argument":
            positional.append(p.name)
            continue
        kind = ("flag" if p.is_flag else "texts" if p.multiple else
                "number" if p.type.name == "float" else "text")
        assert p.type.name in ("boolean", "float", "str", "text"), p.type.name
        assert not p.secondary_opts, "a --no-x form the fast parser would not know"
        for spelling in p.opts:
            kinds[spelling] = (p.name, kind)
    assert kinds == fast.options
    assert tuple(positional) == fast.positional
    assert fast.passthrough == bool(typer_command(name).context_settings.get("allow_extra_args"))


@pytest.mark.parametrize("name, args", [
    ("verify", ["a.log"]),
    ("verify", ["--json", "a.log"]),
    ("verify", ["a.log", "--json", "-f", "--timeout", "2.5"]),
    ("verify", ["--follow", "--timeout=7", "a.log", "--feature", "x.toml"]),
    ("verify", ["--patched-class", "A", "--patched-class=B", "a.log", "--sglang-version", "0.5.9"]),
    ("verify", ["--timeout", "-1", "a.log"]),
    ("verify", ["--feature", "--json", "a.log"]),  # an option's value may look like an option, as in click
    ("verify", ["--", "-weird.log"]),
    ("verify", ["-"]),
    ("preflight", ["--python", "/venv/bin/python", "--json", "--", "--speculative-algorithm", "EAGLE3", "--tp", "8"]),
    ("preflight", ["my.toml", "--host", "gpu1", "--env", "A=1", "--env=B=2", "--", "--tp", "8", "--json"]),
    ("preflight", ["--host", "u@h:2222", "--ssh-config", "cfg", "--known-hosts", "kh", "--accept-new-host-key",
                   "--patch", "p.diff", "--patched-class", "X", "--dynamic", "--feature", "f"]),
    ("preflight", ["my.toml"]),
    ("preflight", []),
    ("preflight", ["my.toml", "--", "8"]),
])
def test_fast_parse_equals_typer(name, args):
    assert parse(FAST[name], args) == typer_params(name, args)


@pytest.mark.parametrize("name, args", [
    ("verify", ["--help"]), ("verify", []), ("verify", ["a.log", "b.log"]), ("verify", ["--bogus", "a.log"]),
    ("verify", ["--timeout", "abc", "a.log"]), ("verify", ["--timeout"]), ("verify", ["--json=1", "a.log"]),
    ("verify", ["-fj", "a.log"]),
    ("preflight", ["--help"]), ("preflight", ["--speculative-algorithm", "EAGLE3"]),  # server flags without --
    ("preflight", ["a.toml", "b.toml"]), ("preflight", ["--", "8"]), ("preflight", ["--python"]),
])
def test_everything_else_goes_to_typer(name, args):
    assert parse(FAST[name], args) is None


def run(*args, **kw):
    return subprocess.run(DYNSPEC + list(args), capture_output=True, text=True, timeout=60, **kw)


@pytest.mark.parametrize("args, needle", [
    (["verify", "--bogus", "x.log"], "No such option: --bogus (see: dynspec verify --help)"),
    (["verify", "--timeout", "soon", "x.log"], "'soon' is not a valid float"),
    (["verify"], "Missing argument 'log'"),
    (["nosuch"], "No such command 'nosuch'"),
    (["launch"], "Missing argument 'profile'"),
    # before `--` only dynspec's own options: a typo is not taken as a server flag
    (["preflight", "--hots", "x", "--", "--model-path", "/m"], "no such option: --hots (did you mean --host?)"),
    (["preflight", "--python", "python3", "--hots=x", "--json", "--", "--tp", "2"], "no such option: --hots"),
    (["preflight", "-x", "--"], "no such option: -x;"),
])
def test_usage_errors_are_one_line_exit_2(args, needle):
    r = run(*args)
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.count("\n") == 1 and r.stderr.startswith("dynspec: error: ") and needle in r.stderr, r.stderr


def test_no_arguments_prints_the_help():
    r = run()
    assert r.returncode == 2 and r.stdout.startswith("Usage: dynspec ") and "verify" in r.stdout


def test_help_still_comes_from_typer():
    r = run("verify", "--help")
    assert r.returncode == 0 and "--patched-class" in r.stdout and "Exit codes" in r.stdout


DOCS = [
    {"verdict": "dead", "exit_code": 1, "feature": "dynamic-spec-disable", "sglang_version": "0.5.9",
     "speculative_algorithm": "EAGLE3", "overlap_schedule": False, "launch": {"index": 2, "of": 2, "first_line": 40},
     "worker": {"class": "EAGLEWorker", "module": "sglang.srt.speculative.eagle_worker", "basis": "per line [1] :smile:"},
     "marker": {"found": False}, "server_ready": False,
     "crash": {"exception": "RuntimeError", "line": 9},
     "findings": [{"severity": "error", "code": "DS201", "name": "n", "message": "m [bold]x[/] \\[y]", "line": 3,
                   "text": "[2026-02-27 19:49:17 TP0] [red]not markup[/red]", "fix": "export A=1"},
                  {"severity": "info", "code": "DS304", "name": "i", "message": "m", "fix": "nothing"}]},
    {"verdict": "live", "exit_code": 0, "feature": "f", "sglang_version": None, "speculative_algorithm": None,
     "overlap_schedule": None, "worker": {"candidates": ["A", "B"]},
     "marker": {"found": True, "line": 7, "fields": {"threshold": "5"}, "ranks": ["TP0", "TP1"]},
     "server_ready": True, "crash": None, "findings": []},
]


@pytest.mark.parametrize("doc", DOCS)
def test_plain_report_is_what_rich_prints_off_a_terminal(doc, capsys):
    from rich.console import Console

    lines = report.verdict_lines(doc, source="s [x].log")
    buf = io.StringIO()
    report.show(lines, Console(file=buf, force_terminal=False, highlight=False, soft_wrap=True, width=40))
    report.show(lines)  # stdout is captured: not a terminal
    assert capsys.readouterr().out == buf.getvalue()
    if doc["findings"]:  # log text and messages are text, never markup or emoji codes
        assert "[red]not markup[/red]" in buf.getvalue() and ":smile:" in buf.getvalue()


def test_rich_is_used_on_a_terminal_or_when_colour_is_forced(monkeypatch):
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    monkeypatch.delenv("TTY_COMPATIBLE", raising=False)
    assert report.wants_rich(io.StringIO()) is False
    monkeypatch.setenv("FORCE_COLOR", "1")
    assert report.wants_rich(io.StringIO()) is True



HEAVY = ("sglang", "paramiko", "torch", "typer", "rich")


@pytest.mark.parametrize("args, needle", [
    (["verify", "{log}", "--json"], "EAGLEWorker"),
    (["verify", "{log}"], "EAGLEWorker"),  # the report, into a pipe as in a benchmark script
    # preflight's usual form; no paramiko for a local target; this interpreter has no sglang: dead
    (["preflight", "--python", sys.executable, "--json", "--", "--speculative-algorithm", "EAGLE3"], '"DS210"'),
], ids=["verify-json", "verify-report", "preflight-json"])
def test_gates_start_without_anything_heavy(tmp_path, args, needle):
    """The two gates load neither sglang nor paramiko, and not even typer or rich."""
    log = tmp_path / "s.log"
    log.write_text(SEED_LINE)
    argv = ["dynspec"] + [a.replace("{log}", str(log)) for a in args]
    code = (f"import sys, runpy; sys.argv={argv!r}\n"
            "try:\n runpy.run_module('dynspec_cli', run_name='__main__')\n"
            "except SystemExit as e: sys.stderr.write('EXIT:%s ' % e.code)\n"
            f"bad=[m for m in {HEAVY!r} if m in sys.modules]\n"
            "sys.stderr.write('IMPORTED:'+','.join(bad))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.stderr.strip().endswith("EXIT:1 IMPORTED:"), r.stderr
    assert needle in r.stdout
