"""The scripts and the SSH envelope, checked against real shells (no SSH needed)."""
from __future__ import annotations

import shutil
import subprocess

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dynspec_cli.transport import shell

# text a user could put in argv/env: anything but NUL (and lone surrogates, which are not text)
values = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=40)

LOGIN_SHELLS = ["sh", "dash", "bash", "zsh", "fish", "tcsh"]


def _via(login_shell: str, script: str, env: dict | None = None) -> subprocess.CompletedProcess:
    """What sshd does: hand the command string to the user's login shell with -c (and the
    environment on stdin, as Host does)."""
    return subprocess.run([login_shell, "-c", shell.envelope(script)], input=shell.env_input(env),
                          capture_output=True, timeout=20)


@pytest.mark.parametrize("login_shell", LOGIN_SHELLS)
def test_envelope_survives_login_shells(login_shell, tmp_path):
    if not shutil.which(login_shell):
        pytest.skip(f"{login_shell} not installed (optional: apt-get install {login_shell})")
    canary = tmp_path / "PWNED"
    hostile = [f"$(touch {canary})", f"`touch {canary}`", f"; touch {canary}", f"' ; touch {canary}; '",
               f'" ; touch {canary}; "', f"\\'$(touch {canary})", f"a\ntouch {canary}", "ü ✓ \\\\ \\n %s %%",
               "!!", "~", "*", "$HOME", "-n", ""]
    script = shell.command(["printf", "%s\\0", *hostile], env={"V": hostile[0]})
    res = _via(login_shell, script, {"V": hostile[0]})
    assert res.returncode == 0, res.stderr
    assert res.stdout.decode().split("\0")[:-1] == hostile
    assert not canary.exists()


@settings(max_examples=60, deadline=None)
@given(st.lists(values, min_size=1, max_size=5), values)
def test_envelope_roundtrip_property(args, env_value):
    script = shell.command(["sh", "-c", 'printf "%s\\0" "$V" "$@"', "sh", *args], env={"V": env_value})
    res = _via("bash", script, {"V": env_value})
    assert res.returncode == 0, res.stderr
    assert res.stdout.decode("utf-8").split("\0")[:-1] == [env_value, *args]


def test_envelope_reports_pid_first_on_stderr():
    res = subprocess.run(["bash", "-c", shell.envelope("echo $$; echo oops >&2", report_pid=True)],
                         capture_output=True, text=True)
    pid, rest = res.stderr.split("\n", 1)
    assert pid == res.stdout.strip()  # exec all the way: the reported pid runs the script
    assert rest == "oops\n"


def test_cwd_quoted(tmp_path):
    d = tmp_path / "$(x) 'a' b"
    d.mkdir()
    res = subprocess.run(["sh", "-c", shell.command(["pwd"], cwd=str(d))], capture_output=True, text=True)
    assert res.stdout.strip() == str(d)


@pytest.mark.parametrize("bad", [{"A B": "x"}, {"-i": "x"}, {"A=B": "x"}, {"": "x"}, {"1A": "x"}])
def test_env_names_are_validated(bad):
    with pytest.raises(ValueError):
        shell.command(["true"], env=bad)


@pytest.mark.parametrize("login_shell", ["sh", "dash", "bash"])
def test_a_program_whose_path_holds_an_equals_sign_runs(login_shell, tmp_path):
    """A venv at `.../run=3/venv`: its path is the program, never an environment assignment."""
    if not shutil.which(login_shell):
        pytest.skip(f"{login_shell} not installed")
    prog = tmp_path / "run=3" / "A=B"
    prog.parent.mkdir()
    prog.write_text('#!/bin/sh\nprintf "%s|" "$0" "$@" "$V"\n')
    prog.chmod(0o755)
    res = _via(login_shell, shell.command([str(prog), "x=y"], env={"V": "v=w"}), {"V": "v=w"})
    assert (res.returncode, res.stdout.decode()) == (0, f"{prog}|x=y|v=w|"), res.stderr


@pytest.mark.parametrize("argv", [[], ["-a"], ["echo", "nul\x00byte"]])
def test_bad_argv_rejected(argv):
    with pytest.raises(ValueError):
        shell.command(argv)


def test_argv_must_be_a_list():
    with pytest.raises(TypeError):
        shell.command("echo hi")


def test_envelope_size_is_bounded():
    with pytest.raises(ValueError, match="too long"):
        shell.envelope("x" * 40_000)


def test_env_values_are_in_no_script():
    """A script is a command line (`sh -c SCRIPT`, the login shell's over SSH): values come on stdin."""
    secret = "hf_s3cr3t value"
    env = {"HF_TOKEN": secret}
    scripts = [shell.command(["true"], env=env),
               shell.spawn(["true"], env=env, cwd=None, log_path="/tmp/x.log"),
               shell.spawn_tracked(["true"], env=env, cwd=None, log_path="/tmp/x.log", pid_file="/tmp/x.pid")]
    octal = "".join("\\%03o" % b for b in secret.encode())
    for script in scripts:
        assert secret not in script and secret not in shell.envelope(script) and octal not in shell.envelope(script)
    assert secret.encode() not in shell.env_input(env)  # not even the stdin line spells it out
    res = subprocess.run(["sh", "-c", shell.command(["sh", "-c", 'printf %s "$HF_TOKEN"; cat'], env=env)],
                         input=shell.env_input(env) + b" and the rest", capture_output=True)
    assert res.stdout == b"hf_s3cr3t value and the rest"


@pytest.mark.parametrize("sh", ["sh", "bash"])
def test_write_file_never_commits_a_cut_off_write(sh, tmp_path):
    """The writer killed mid-write closes the pipe: the script's `cat` sees EOF as the end. The
    record that was there stays (a 0-byte or half record made `stop NAME` say "no run named")."""
    rec = tmp_path / "r.json"
    rec.write_bytes(b'{"old": 1}')
    data = b'{"name": "x", "job_id": "12"}'
    cut = subprocess.run([sh, "-c", shell.WRITE_FILE, "sh", str(rec), "600", str(len(data))], input=data[:7])
    assert cut.returncode == 1 and rec.read_bytes() == b'{"old": 1}'
    empty = subprocess.run([sh, "-c", shell.WRITE_FILE, "sh", str(rec), "600", str(len(data))], input=b"")
    assert empty.returncode == 1 and rec.read_bytes() == b'{"old": 1}'
    whole = subprocess.run([sh, "-c", shell.WRITE_FILE, "sh", str(rec), "600", str(len(data))], input=data)
    assert whole.returncode == 0 and rec.read_bytes() == data
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.json"]  # no temp file left
