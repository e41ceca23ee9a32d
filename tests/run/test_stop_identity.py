"""`dynspec stop` signals only processes it can prove are the run's: real processes, records
written as dynspec writes them. Each refusal is one line, exit 2, and the process lives on."""
import json
import os
import signal
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from tests.run.helpers import dynspec, record, write_profile
from tests.support.home import runs_dir
from tests.support.procs import pids_in_group, stat_fields


def start_time(pid: int) -> str:
    return stat_fields(str(pid))[19]


def write_record(name: str, pid: int, tmp_path: Path, **fields) -> None:
    log = tmp_path / f"{name}.log"
    log.write_text("")
    rec = {"name": name, "host": "local", "pid": pid, "pgid": pid, "argv": ["sleep", "300"], "env": {},
           "log": str(log), "log_offset": 0, "port": 1, "started_at": time.time(),
           "feature": "dynamic-spec-disable", **fields}
    runs_dir().mkdir(parents=True, exist_ok=True)
    (runs_dir() / f"{name}.json").write_text(json.dumps(rec))


@pytest.fixture
def procs():
    """Start processes in their own session (setsid); whatever survives is killed afterwards."""
    started = []

    def start(argv, env=None):
        p = subprocess.Popen(argv, start_new_session=True, env={**os.environ, **(env or {})},
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        started.append(p)
        return p

    yield start
    for p in started:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        p.wait()


def group_without_leader(procs, env=None):
    """A process group whose leader has exited and whose two members live on."""
    p = procs(["sh", "-c", "sleep 300 & sleep 300 & exit 0"], env)
    start = start_time(p.pid)
    p.wait()
    assert len(pids_in_group(p.pid)) == 2
    return p.pid, start


def status_of(name: str) -> dict:
    st = dynspec("status", name, "--json")
    assert st.returncode == 0, st.stderr
    (row,) = json.loads(st.stdout)["runs"]
    return row


def refused(name: str, what: str) -> None:
    """stop refuses, and status agrees (issue 22 item 9): a run whose processes stop will not
    touch is not listed as alive, and live processes in its group are noted, not hidden."""
    row = status_of(name)
    assert row["alive"] is False, row
    if row["stopped_at"] is None:
        assert "is another process now" in row["note"] or "not provably this run's" in row["note"], row
    r = dynspec("stop", name, "--grace", "1")
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and what in lines[0] and "nothing was signalled" in lines[0], r.stderr


@pytest.fixture
def name():
    return f"id-{uuid.uuid4().hex[:8]}"


def test_no_start_time_is_refused(tmp_path, procs, name):
    # issue 11: `setsid sleep 300 &` + a record with that pid and no leader_start
    p = procs(["sleep", "300"])
    write_record(name, p.pid, tmp_path)
    refused(name, "no start time")
    assert p.poll() is None


def test_start_time_without_the_launch_token_is_refused(tmp_path, procs, name):
    p = procs(["sleep", "300"])
    write_record(name, p.pid, tmp_path, leader_start=start_time(p.pid), token=uuid.uuid4().hex)
    refused(name, "launch token")
    assert p.poll() is None


def test_leader_gone_and_no_member_carries_the_token_is_refused(tmp_path, procs, name):
    pgid, start = group_without_leader(procs)
    write_record(name, pgid, tmp_path, leader_start=start, token=uuid.uuid4().hex)
    refused(name, "leader is gone")
    assert len(pids_in_group(pgid)) == 2


def test_leader_gone_in_a_record_without_token_is_refused(tmp_path, procs, name):
    pgid, start = group_without_leader(procs)
    write_record(name, pgid, tmp_path, leader_start=start)
    refused(name, "no launch token")
    assert len(pids_in_group(pgid)) == 2


def test_leader_gone_members_carrying_the_token_are_stopped(tmp_path, procs, name):
    token = uuid.uuid4().hex
    pgid, start = group_without_leader(procs, env={"DYNSPEC_RUN_ID": token})
    write_record(name, pgid, tmp_path, leader_start=start, token=token)
    assert status_of(name)["alive"] is True  # stop will stop it: alive
    r = dynspec("stop", name, "--grace", "1")
    assert r.returncode == 0 and "no process remains" in r.stdout, r.stderr
    assert pids_in_group(pgid) == []


def test_pid_reused_is_refused(tmp_path, procs, name):
    p = procs(["sleep", "300"])
    write_record(name, p.pid, tmp_path, leader_start="1", token=uuid.uuid4().hex)
    refused(name, "now belongs to another process")
    assert p.poll() is None


def test_already_stopped_record_whose_group_number_is_taken_is_refused(tmp_path, procs, name):
    p = procs(["sleep", "300"])
    write_record(name, p.pid, tmp_path, stopped_at=time.time() - 60)
    refused(name, "cannot prove")
    assert p.poll() is None


@pytest.mark.parametrize("argv, stops", [(["sleep", "300"], True), (["sleep", "301"], False)])
def test_record_without_token_needs_start_time_and_command_line(tmp_path, procs, name, argv, stops):
    p = procs(["sleep", "300"])
    write_record(name, p.pid, tmp_path, leader_start=start_time(p.pid), argv=argv)
    if stops:
        assert status_of(name)["alive"] is True
        r = dynspec("stop", name, "--grace", "1")
        assert r.returncode == 0 and "stopped:" in r.stdout, r.stderr
        assert p.wait(5) == -signal.SIGTERM
    else:
        refused(name, "command line")
        assert p.poll() is None


def test_launched_run_carries_its_token_and_is_stopped(tmp_path, name):
    prof = write_profile(tmp_path / "p.toml", name, env={"SGLANG_ENABLE_SPEC_V2": "True",
                                                         "STANDIN_CHILDREN_SURVIVE_PARENT": "1"})
    assert dynspec("launch", str(prof), "--no-preflight", "--no-watch").returncode == 0
    rec = record(name)
    assert rec["state"] == "started" and rec["leader_start"] == start_time(rec["pid"])
    environ = Path(f"/proc/{rec['pid']}/environ").read_bytes().split(b"\0")
    assert f"DYNSPEC_RUN_ID={rec['token']}".encode() in environ
    assert not Path(rec["pid_file"]).exists()  # the completed record holds the pid now
    assert status_of(name)["alive"] is True
    r = dynspec("stop", name, "--grace", "5")
    assert r.returncode == 0 and "no process remains" in r.stdout, r.stderr
    assert pids_in_group(rec["pgid"]) == []
