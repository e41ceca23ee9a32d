"""Host.spawn_tracked and Host.dynspec_home, locally and over the real sshd."""
import os
import sys
import time
import uuid
from pathlib import Path

import pytest

from dynspec_cli.transport import LocalHost, SpawnFailed
from tests.support.procs import pids_in_group


def test_spawn_tracked_writes_the_server_pid_before_it_runs(host, tmp_path):
    pid_file = tmp_path / "run.pid"
    log = tmp_path / "server.log"
    token = uuid.uuid4().hex
    # the server itself checks that the pid file names it by the time its code runs
    code = "import os, time; print(open(os.environ['PF']).read().strip() == str(os.getpid()), flush=True); time.sleep(300)"
    s = host.spawn_tracked([sys.executable, "-c", code], env={"PF": str(pid_file), "DYNSPEC_RUN_ID": token},
                           log_path=str(log), pid_file=str(pid_file))
    try:
        assert s.pid == s.pgid and int(pid_file.read_text()) == s.pid
        assert f"DYNSPEC_RUN_ID={token}".encode() in Path(f"/proc/{s.pid}/environ").read_bytes().split(b"\0")
        deadline = time.monotonic() + 10
        while not log.read_text() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert log.read_text() == "True\n"
        assert list(tmp_path.glob("run.pid.tmp.*")) == []  # written atomically
    finally:
        assert host.stop_group(s.pgid, grace=5)
    assert pids_in_group(s.pgid) == []


def test_spawn_tracked_failure_still_leaves_the_pid_file(host, tmp_path):
    pid_file = tmp_path / "run.pid"
    with pytest.raises(SpawnFailed, match="command not found"):
        host.spawn_tracked(["no-such-command-dynspec"], log_path=str(tmp_path / "l"), pid_file=str(pid_file))
    pid = int(pid_file.read_text())

    def gone() -> bool:
        try:
            return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
        except FileNotFoundError:
            return True

    deadline = time.monotonic() + 10  # the failed session may still be exiting when the error comes back
    while not gone() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert gone()


def test_dynspec_home_is_the_hosts_dynspec_home(host):
    # the suite sets DYNSPEC_HOME for itself and (sshd SetEnv) for the test sshd's sessions
    assert host.dynspec_home() == os.environ["DYNSPEC_HOME"]


def test_dynspec_home_defaults_to_dot_dynspec_and_expands_tilde(monkeypatch):
    monkeypatch.delenv("DYNSPEC_HOME")
    assert LocalHost().dynspec_home() == os.path.expanduser("~/.dynspec")
    monkeypatch.setenv("DYNSPEC_HOME", "~/elsewhere/")
    assert LocalHost().dynspec_home() == os.path.expanduser("~/elsewhere")
