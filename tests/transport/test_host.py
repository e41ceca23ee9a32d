"""One test body, two hosts: LocalHost and SSHHost (a real sshd on 127.0.0.1).

The SSH host is this same machine, so files and processes it creates are checked locally.
"""
from __future__ import annotations

import os
import signal
import sys
import time
import uuid
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dynspec_cli.transport import CommandFailed, CommandTimeout, SpawnFailed
from tests.support.procs import pids_in_group, pids_with

HOSTILE = [
    "$(touch {c}/dollar)", "`touch {c}/backtick`", "; touch {c}/semicolon", "&& touch {c}/and",
    "| touch {c}/pipe", "' ; touch {c}/single ; '", '" ; touch {c}/double ; "', "\\'; touch {c}/bs",
    "line\ntouch {c}/newline", "a b  c\t", "ünïcødé ✓ 日本", "*", "~", "$HOME", "${PATH}", "-n", "--",
    "", "'", '"', "\\", "%s%n", ">{c}/redirect", "<{c}/in", "!!", "#comment",
]


def hostile(canary: Path) -> list[str]:
    return [v.replace("{c}", str(canary)) for v in HOSTILE]


def python_for(host) -> str:
    return host.python


def test_run_captures_output_and_exit_code(host):
    res = host.run(["sh", "-c", "echo out; echo err >&2; exit 3"])
    assert (res.exit_code, res.stdout, res.stderr) == (3, b"out\n", b"err\n")
    assert not res.ok
    with pytest.raises(CommandFailed, match="exited with 3: err"):
        host.run(["sh", "-c", "echo err >&2; exit 3"], check=True)


def test_run_env_adds_to_environment_and_cwd(host, tmp_path):
    res = host.run(["sh", "-c", 'echo "$A|$B|$(pwd)"; command -v sh >/dev/null && echo path-ok'],
                   env={"A": "1", "B": "two words"}, cwd=str(tmp_path))
    assert res.stdout.decode() == f"1|two words|{tmp_path}\npath-ok\n"


def test_run_missing_cwd_fails_cleanly(host, tmp_path):
    res = host.run(["true"], cwd=str(tmp_path / "nope"))
    assert res.exit_code == 126


def test_run_large_input_and_output_do_not_deadlock(host):
    data = os.urandom(1 << 20)
    res = host.run(["cat"], input=data, timeout=60)
    assert res.stdout == data


def test_run_timeout_kills_the_process_group(host):
    marker = f"300.{uuid.uuid4().int % 10**9}"  # a sleep nobody else runs
    t0 = time.monotonic()
    with pytest.raises(CommandTimeout) as e:
        host.run(["sh", "-c", f"echo started; sleep {marker} & sleep {marker}"], timeout=1)
    assert time.monotonic() - t0 < 10
    assert e.value.stdout == b"started\n"
    assert "\n" not in str(e.value)
    _wait_until(lambda: not pids_with(f"sleep {marker}"), 5)


def test_run_python_sends_script_on_stdin(host):
    res = host.run_python(python_for(host), "import sys, os; print(sys.argv[1:], os.environ['X'])",
                          ["a b", "$(c)"], env={"X": "x y"})
    assert res.stdout == b"['a b', '$(c)'] x y\n"


def test_stream_python_yields_while_running(host):
    script = "import time\nfor i in range(3):\n    print(i, flush=True)\n    time.sleep(0.2)\n"
    t0 = time.monotonic()
    gen = host.stream_python(python_for(host), script)
    first = next(gen)
    assert first.startswith(b"0") and time.monotonic() - t0 < 2.5
    rest = b"".join(gen)
    assert (first + rest).split() == [b"0", b"1", b"2"]


def test_stream_python_failure_raises(host):
    with pytest.raises(CommandFailed, match="ZeroDivisionError"):
        list(host.stream_python(python_for(host), "print('x'); 1/0"))


def test_stream_python_close_kills_it(host):
    marker = uuid.uuid4().hex
    gen = host.stream_python(python_for(host), "import time\nwhile True:\n    print(1)\n    time.sleep(0.05)\n",
                             [marker])
    next(gen)
    gen.close()
    _wait_until(lambda: not pids_with(marker), 5)


def test_hostile_values_never_execute(host, tmp_path):
    canary = tmp_path / "canary"
    canary.mkdir()
    values = hostile(canary)
    cwd = tmp_path / "$(touch x) `y` 'q' ü"
    cwd.mkdir()
    env = {f"V{i}": v for i, v in enumerate(values)}
    script = ("import json, os, sys\n"
              "print(json.dumps([sys.argv[1:], [os.environ['V' + str(i)] for i in range(N)], os.getcwd()]))"
              ).replace("N", str(len(values)))
    res = host.run([python_for(host), "-c", script, *values], env=env, cwd=str(cwd))
    assert res.ok, res.stderr
    import json

    assert json.loads(res.stdout) == [values, values, str(cwd)]
    for v in values[:3] + values[8:11]:  # as file names too
        if v and "/" not in v:
            host.write_file(str(tmp_path / v), v.encode())
            assert host.read_file(str(tmp_path / v)) == v.encode()
            assert host.exists(str(tmp_path / v))
            host.remove(str(tmp_path / v))
    spawned = host.spawn_detached(["sh", "-c", 'printf "%s" "$V0"', *values], env=env,
                                  cwd=str(cwd), log_path=str(tmp_path / "$(log) ü.log"))
    _wait_until(lambda: not host.is_alive(spawned.pid), 5)
    assert (tmp_path / "$(log) ü.log").read_text() == values[0]
    assert list(canary.iterdir()) == []
    assert not (cwd / "x").exists()


text = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=30)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(args=st.lists(text, max_size=4), value=text)
def test_arbitrary_text_roundtrips(host, args, value):
    res = host.run(["sh", "-c", 'printf "%s\\0" "$V" "$@"', "sh", *args], env={"V": value})
    assert res.stdout.decode("utf-8").split("\0")[:-1] == [value, *args]


def test_files(host, tmp_path):
    p = str(tmp_path / "f.bin")
    data = bytes(range(256)) * 10
    host.write_file(p, data, mode=0o640)
    assert (os.stat(p).st_mode & 0o777) == 0o640
    assert host.read_file(p) == data
    assert host.read_file(p, 10, 5) == data[10:15]
    assert host.read_file(p, 2550) == data[2550:]
    assert host.read_file(p, 9999) == b""
    assert host.size(p) == len(data)
    assert host.exists(p)
    host.write_file(p, b"new")  # atomic replace, default mode 0600
    assert Path(p).read_bytes() == b"new" and (os.stat(p).st_mode & 0o777) == 0o600
    host.remove(p)
    assert not host.exists(p) and host.size(p) is None
    host.remove(p)  # missing is fine
    with pytest.raises(FileNotFoundError):
        host.read_file(p)
    with pytest.raises(IsADirectoryError):
        host.read_file(str(tmp_path))
    with pytest.raises(IsADirectoryError):
        host.remove(str(tmp_path))
    with pytest.raises(OSError):
        host.write_file(str(tmp_path / "no" / "dir"), b"x")
    assert list(tmp_path.iterdir()) == []  # no temp file left behind


def test_home(host):
    assert host.home() == os.path.expanduser("~")


def test_spawn_detached_reports_the_real_pid_and_appends_to_log(host, tmp_path):
    log = tmp_path / "server.log"
    log.write_text("before\n")
    marker = uuid.uuid4().hex
    s = host.spawn_detached([sys.executable, "-c", "import os, sys, time; print(os.environ['K'], os.getcwd(), "
                             "sys.stdin.read() == '', flush=True); time.sleep(300)", marker],
                            env={"K": "v a l"}, cwd=str(tmp_path), log_path=str(log))
    try:
        assert s.pid == s.pgid
        cmdline = Path(f"/proc/{s.pid}/cmdline").read_bytes().split(b"\0")
        assert cmdline[0] == sys.executable.encode() and marker.encode() in cmdline  # not a wrapper shell
        stat = Path(f"/proc/{s.pid}/stat").read_text().rsplit(")", 1)[1].split()
        assert int(stat[2]) == s.pid and int(stat[3]) == s.pid  # pgid, sid: own session
        assert _sig_ignored(s.pid, signal.SIGHUP)  # nohup semantics
        _wait_until(lambda: log.read_text().count("\n") == 2, 10)
        assert log.read_text() == f"before\nv a l {tmp_path} True\n"
        assert host.is_alive(s.pid) and host.group_alive(s.pgid)
    finally:
        assert host.stop_group(s.pgid, grace=5)
    assert not host.is_alive(s.pid)


def test_spawn_failures_are_reported(host, tmp_path):
    with pytest.raises(SpawnFailed, match="command not found"):
        host.spawn_detached(["no-such-command-dynspec"], log_path=str(tmp_path / "l"))
    with pytest.raises(SpawnFailed):
        host.spawn_detached(["true"], log_path=str(tmp_path / "missing-dir" / "l"))


def test_signal_group_reaches_children(host, tmp_path):
    marker = uuid.uuid4().hex
    s = host.spawn_detached(["sh", "-c", f"sleep 300 & sleep 300 & echo {marker}; wait"],
                            log_path=str(tmp_path / "log"))
    _wait_until(lambda: len(pids_in_group(s.pgid)) >= 3, 5)
    assert host.signal_group(s.pgid, signal.SIGTERM)
    _wait_until(lambda: not host.group_alive(s.pgid), 5)
    assert pids_in_group(s.pgid) == []
    assert not host.signal_group(s.pgid, signal.SIGTERM)  # nothing left to signal


def test_exited_process_is_not_alive(host, tmp_path):
    # the exited process is reparented and may stay a zombie (pid 1 in a container may never reap)
    s = host.spawn_detached(["true"], log_path=str(tmp_path / "log"))
    _wait_until(lambda: not host.is_alive(s.pid), 5)
    assert not host.group_alive(s.pgid)


# --- helpers -------------------------------------------------------------------------------------
def _wait_until(cond, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout}s")
        time.sleep(0.02)


def _sig_ignored(pid: int, sig: int) -> bool:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("SigIgn:"):
            return bool(int(line.split()[1], 16) & (1 << (sig - 1)))
    return False
