"""Run management you can believe: `watch --keep` keeps a crashed server, `status` judges the log
so far (a crash in a live process's log is a crash), `status NAME`, `status --host` in one round
trip for many records (real sshd), and records under DYNSPEC_HOME. Real processes throughout."""
import json
import os
import shutil
import signal
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from tests.run.helpers import cleanup, dynspec, record, write_profile
from tests.support.home import runs_dir
from tests.support.procs import pids_in_group

ROOT = Path(__file__).resolve().parent.parent.parent
SEED_DEAD = ROOT / "configs" / "demo" / "seed-dead.log"  # the seed's real log: EAGLEWorker runs, the patch is dead
SEED_LIVE = ROOT / "configs" / "demo" / "seed-live.log"  # the real log with the marker on every rank, ready


@pytest.fixture
def name():
    n = f"s-{uuid.uuid4().hex[:8]}"
    yield n
    cleanup(n)
    try:
        for pid in pids_in_group(record(n)["pgid"]):
            os.kill(pid, signal.SIGKILL)
    except (OSError, ValueError, KeyError):
        pass


# sglang 0.5.9's real launcher on CPU (tests/fixtures/logs/real-launcher/README.md): the launcher's
# traceback, ending in "ModuleNotFoundError: No module named 'uvicorn'"
REAL_CRASH = ROOT / "tests" / "fixtures" / "logs" / "real-launcher" / "0.5.9" / "v2-true-topk1.log"


@pytest.fixture
def crashed_but_alive(tmp_path, name):
    """A run record as dynspec writes it, for a real live process group (carrying the launch
    token) whose log is a real crashed launch: a server that crashed and did not exit."""
    token = uuid.uuid4().hex
    p = subprocess.Popen(["sleep", "300"], start_new_session=True, env={**os.environ, "DYNSPEC_RUN_ID": token})
    log = tmp_path / f"{name}.log"
    shutil.copyfile(REAL_CRASH, log)
    start = Path(f"/proc/{p.pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    rec = {"name": name, "host": "local", "pid": p.pid, "pgid": p.pid, "argv": ["sleep", "300"], "env": {},
           "log": str(log), "log_offset": 0, "port": 1, "started_at": time.time(), "feature": "dynamic-spec-disable",
           "leader_start": start, "token": token, "sglang_version": "0.5.9"}
    runs_dir().mkdir(parents=True, exist_ok=True)
    (runs_dir() / f"{name}.json").write_text(json.dumps(rec))
    time.sleep(1.1)  # the log has been quiet since the traceback, as watch requires before deciding
    yield rec
    p.kill()
    p.wait()


def test_status_reports_the_crash_in_a_live_process_log(crashed_but_alive, name):
    rec = crashed_but_alive
    st = dynspec("status", name, "--json")
    assert st.returncode == 0, st.stderr
    (row,) = json.loads(st.stdout)["runs"]
    assert row["alive"] is True and row["verdict"] == "crashed", row
    assert row["last_lines"][-1] == "ModuleNotFoundError: No module named 'uvicorn'"
    text = dynspec("status", name)
    assert "alive verdict crashed" in text.stdout, text.stdout
    assert pids_in_group(rec["pgid"]) == [rec["pid"]]  # status never signals anything


def test_watch_keep_keeps_a_crashed_server_and_says_so(crashed_but_alive, name):
    rec = crashed_but_alive
    w = dynspec("watch", name, "--keep", "--json")
    assert w.returncode == 4, w.stderr
    doc = json.loads(w.stdout)
    assert doc["verdict"] == "crashed" and doc["run"]["stopped"] is False
    assert pids_in_group(rec["pgid"]) == [rec["pid"]], "--keep must keep the crashed server's processes"
    w = dynspec("watch", name, "--keep")
    assert "--keep: the server keeps running although it is crashed" in w.stdout and f"dynspec stop {name}" in w.stdout, w.stdout
    w = dynspec("watch", name, "--json")  # without --keep a crashed server's leftovers are stopped
    assert json.loads(w.stdout)["run"]["stopped"] is True and pids_in_group(rec["pgid"]) == []


def test_status_name_filter(tmp_path, name):
    other = f"{name}-other"
    for n in (name, other):
        prof = write_profile(tmp_path / f"{n}.toml", n)
        assert dynspec("launch", str(prof), "--no-preflight", "--no-probe").returncode == 1  # dead, stopped
    try:
        st = dynspec("status", name, "--json")
        assert [r["name"] for r in json.loads(st.stdout)["runs"]] == [name]
        assert json.loads(st.stdout)["runs"][0]["verdict"] == "dead"
        st = dynspec("status", name, other, "--json")
        assert sorted(r["name"] for r in json.loads(st.stdout)["runs"]) == sorted([name, other])
        bad = dynspec("status", "no-such-run-here")
        assert bad.returncode == 2 and bad.stderr.strip() == "dynspec: error: no run named 'no-such-run-here' on local"
    finally:
        cleanup(other)


def test_records_and_default_logs_go_to_dynspec_home(tmp_path, name):
    home = tmp_path / "dhome"
    prof = write_profile(tmp_path / "p.toml", name)
    prof.write_text("\n".join(ln for ln in prof.read_text().splitlines() if not ln.startswith("log =")) + "\n")
    r = dynspec("launch", str(prof), "--no-preflight", "--no-probe", env={"DYNSPEC_HOME": str(home)})
    assert r.returncode == 1, r.stderr
    rec = json.loads((home / "runs" / f"{name}.json").read_text())
    assert rec["log"] == str(home / "logs" / f"{name}.log") and Path(rec["log"]).exists()
    assert not (runs_dir() / f"{name}.json").exists()
    assert not (Path.home() / ".dynspec" / "runs" / f"{name}.json").exists()
    st = dynspec("status", "--json", env={"DYNSPEC_HOME": str(home)})
    assert [x["name"] for x in json.loads(st.stdout)["runs"]] == [name]


# --- many records over a real sshd: one round trip, every row right ------------------------------

def many_records(tmp_path, prefix: str, n: int, sleeps: list) -> dict:
    """n records on this machine (which the test sshd serves): every 4th alive (a real process
    carrying its launch token), the others over; logs: the seed's real dead and live logs."""
    expected = {}
    runs_dir().mkdir(parents=True, exist_ok=True)
    for i in range(n):
        nm = f"{prefix}-{i:03d}"
        log = tmp_path / f"{nm}.log"
        shutil.copyfile(SEED_DEAD if i % 2 else SEED_LIVE, log)
        token = uuid.uuid4().hex
        alive = i % 4 == 0
        pid, start = 0, None
        if alive:
            p = subprocess.Popen(["sleep", "300"], start_new_session=True, env={**os.environ, "DYNSPEC_RUN_ID": token})
            sleeps.append(p)
            pid = p.pid
            start = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
        else:
            pid = 2 ** 22 + i  # beyond pid_max's default: no such process
        rec = {"name": nm, "host": "dut", "pid": pid, "pgid": pid, "argv": ["sleep", "300"], "env": {},
               "log": str(log), "log_offset": 0, "port": 30000 + i, "started_at": 1000.0 + i,
               "feature": "dynamic-spec-disable", "leader_start": start, "token": token,
               "stopped_at": None if alive else 2000.0 + i, "verdict": None}
        (runs_dir() / f"{nm}.json").write_text(json.dumps(rec))
        # a person reading the seed logs: dead -> the patch is dead code; live -> marker on every rank
        expected[nm] = {"alive": alive, "verdict": "dead" if i % 2 else "live",
                        "last": (SEED_DEAD if i % 2 else SEED_LIVE).read_text().strip().splitlines()[-1]}
    return expected


@pytest.mark.ssh
def test_status_over_ssh_is_one_round_trip_and_right_for_100_records(tmp_path, ssh_lab):
    from dynspec_cli.knowledge.features import load_feature
    from dynspec_cli.run import control

    prefix = f"m{uuid.uuid4().hex[:6]}"
    sleeps = []
    try:
        expected = many_records(tmp_path, prefix, 100, sleeps)
        host = ssh_lab.host("dut")
        try:
            host.dynspec_home()  # (resolved once per connection)
            started = []
            real_start = host.start_script
            host.start_script = lambda script, **kw: started.append(script) or real_start(script, **kw)
            # (named: the suite's dynspec home also holds other tests' runs, some of them "starting"
            # records of a killed dynspec, whose resolution rightly costs more calls)
            rows = control.status(host, load_feature, names=sorted(expected))
        finally:
            host.close()
        assert len(started) == 1, f"{len(started)} commands for one status"
        assert len(rows) == 100
        for r in rows:
            want = expected[r["name"]]
            assert (r["alive"], r["verdict"]) == (want["alive"], want["verdict"]), r
            assert r["last_lines"][-1] == want["last"]
        # the CLI gives the same rows
        st = dynspec("status", "--host", "dut", "--json", ssh=ssh_lab)
        cli = {r["name"]: r for r in json.loads(st.stdout)["runs"] if r["name"].startswith(prefix)}
        assert {k: (v["alive"], v["verdict"]) for k, v in cli.items()} == \
               {k: (v["alive"], v["verdict"]) for k, v in expected.items()}
    finally:
        for p in sleeps:
            p.kill()
            p.wait()
        for f in runs_dir().glob(f"{prefix}-*.json"):
            f.unlink()


def test_status_does_not_call_a_reused_pid_alive(tmp_path, name):
    p = subprocess.Popen(["sleep", "300"], start_new_session=True)
    try:
        log = tmp_path / "x.log"
        shutil.copyfile(SEED_LIVE, log)
        rec = {"name": name, "host": "local", "pid": p.pid, "pgid": p.pid, "argv": ["sleep", "300"], "env": {},
               "log": str(log), "log_offset": 0, "port": 1, "started_at": time.time(),
               "feature": "dynamic-spec-disable", "leader_start": "1", "token": uuid.uuid4().hex}
        runs_dir().mkdir(parents=True, exist_ok=True)
        (runs_dir() / f"{name}.json").write_text(json.dumps(rec))
        (row,) = json.loads(dynspec("status", name, "--json").stdout)["runs"]
        assert row["alive"] is False and p.poll() is None
    finally:
        p.kill()
        p.wait()
