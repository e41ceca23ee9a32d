"""`dynspec launch / watch / stop / status` end to end, locally and over a real sshd, with the
GPU-server stand-in as the only stand-in."""
import json
import signal
import socket
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from tests.run.helpers import DYNSPEC, cleanup, dynspec, group_alive, record, wait_for, write_profile
from tests.support.home import runs_dir, started


@pytest.fixture
def name():
    n = f"t-{uuid.uuid4().hex[:8]}"
    yield n
    cleanup(n)


def test_local_dead_launch_is_stopped_and_reported(tmp_path, name):
    prof = write_profile(tmp_path / "p.toml", name)  # 0.5.9, SGLANG_ENABLE_SPEC_V2 unset
    t0 = time.monotonic()
    r = dynspec("launch", str(prof), "--no-preflight", "--json")
    took = time.monotonic() - t0
    assert r.returncode == 1, r.stderr
    doc = json.loads(r.stdout)
    assert doc["verdict"] == "dead" and doc["worker"]["class"] == "EAGLEWorker"
    assert doc["run"]["stopped"] is True
    assert any("SGLANG_ENABLE_SPEC_V2=True" in (f["fix"] or "") for f in doc["findings"])
    rec = record(name)
    assert not group_alive(rec["pgid"]) and rec["stopped_at"] and rec["verdict"] == "dead"
    assert took < 30


def test_local_live_launch_reaches_ready_and_keeps_running(tmp_path, name):
    prof = write_profile(tmp_path / "p.toml", name, env={"SGLANG_ENABLE_SPEC_V2": "True"})
    r = dynspec("launch", str(prof), "--no-preflight", "--json")
    assert r.returncode == 0, r.stderr + r.stdout
    doc = json.loads(r.stdout)
    assert doc["verdict"] == "live" and doc["server_ready"] and doc["run"]["why"] == "ready"
    assert doc["run"]["health"].endswith(" 200")
    rec = record(name)
    assert group_alive(rec["pgid"])
    st = dynspec("status", "--json")
    row = next(x for x in json.loads(st.stdout)["runs"] if x["name"] == name)
    assert row["alive"] and row["verdict"] == "live"
    s = dynspec("stop", name)
    assert s.returncode == 0 and "no process remains" in s.stdout
    assert not group_alive(rec["pgid"])


def test_crash_is_reported_with_its_exception(tmp_path, name):
    prof = write_profile(tmp_path / "p.toml", name, env={"SGLANG_ENABLE_SPEC_V2": "True", "STANDIN_CRASH_AT": "weights"})
    r = dynspec("launch", str(prof), "--no-preflight", "--json")
    assert r.returncode == 4, r.stdout
    doc = json.loads(r.stdout)
    assert doc["verdict"] == "crashed" and doc["crash"]["exception"]
    assert not group_alive(record(name)["pgid"])


def test_sigterm_ignored_escalates_to_sigkill(tmp_path, name):
    prof = write_profile(tmp_path / "p.toml", name, env={"SGLANG_ENABLE_SPEC_V2": "True", "STANDIN_IGNORE_SIGTERM": "1"})
    assert dynspec("launch", str(prof), "--no-preflight", "--json").returncode == 0
    pgid = record(name)["pgid"]
    s = dynspec("stop", name, "--grace", "1")
    assert s.returncode == 0 and not group_alive(pgid)


def test_port_taken_is_refused(tmp_path, name):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        prof = write_profile(tmp_path / "p.toml", name, port=port)
        r = dynspec("launch", str(prof), "--no-preflight")
    assert r.returncode == 2 and f"port {port} is already taken" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_second_launch_of_a_live_run_is_refused_unless_replace(tmp_path, name):
    prof = write_profile(tmp_path / "p.toml", name, env={"SGLANG_ENABLE_SPEC_V2": "True"})
    assert dynspec("launch", str(prof), "--no-preflight", "--json").returncode == 0
    first = record(name)["pgid"]
    prof2 = write_profile(tmp_path / "p2.toml", name, env={"SGLANG_ENABLE_SPEC_V2": "True"})
    r = dynspec("launch", str(prof2), "--no-preflight")
    assert r.returncode == 2 and "is alive" in r.stderr and group_alive(first)
    r = dynspec("launch", str(prof2), "--no-preflight", "--replace", "--json")
    assert r.returncode == 0, r.stderr
    assert not group_alive(first) and record(name)["pgid"] != first


def test_stale_record_is_not_signalled(tmp_path, name):
    prof = write_profile(tmp_path / "p.toml", name)
    assert dynspec("launch", str(prof), "--no-preflight").returncode == 1  # dead, stopped
    rec = record(name)
    rec["stopped_at"] = None  # as if dynspec had died before recording the stop
    (runs_dir() / f"{name}.json").write_text(json.dumps(rec))
    r = dynspec("stop", name)
    assert r.returncode == 0 and "already stopped" in r.stdout


def test_no_watch_then_watch_reattaches(tmp_path, name):
    prof = write_profile(tmp_path / "p.toml", name, env={"SGLANG_ENABLE_SPEC_V2": "True", "STANDIN_PACE": "0.05"})
    r = dynspec("launch", str(prof), "--no-preflight", "--no-watch", "--json")
    assert r.returncode == 0
    w = dynspec("watch", name, "--json")
    assert w.returncode == 0, w.stderr
    assert json.loads(w.stdout)["verdict"] == "live"
    dynspec("stop", name)


def test_no_watch_prints_the_next_steps_and_they_work_pasted(tmp_path, name):
    import shlex

    prof = write_profile(tmp_path / "p.toml", name, env={"SGLANG_ENABLE_SPEC_V2": "True", "STANDIN_PACE": "0.05"})
    r = dynspec("launch", str(prof), "--no-preflight", "--no-watch")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith(f"started {name} on local: pid ")
    watch = next(ln for ln in r.stdout.splitlines() if "watch it to its verdict: " in ln).split(": ", 1)[1]
    stop = next(ln for ln in r.stdout.splitlines() if "stop it: " in ln).split(": ", 1)[1]
    assert watch == f"dynspec watch {name} --host local" and stop == f"dynspec stop {name} --host local"
    w = subprocess.run(DYNSPEC + shlex.split(watch)[1:], capture_output=True, text=True, timeout=180)
    assert w.returncode == 0 and "LIVE" in w.stdout, w.stdout + w.stderr
    s = subprocess.run(DYNSPEC + shlex.split(stop)[1:], capture_output=True, text=True, timeout=60)
    assert s.returncode == 0 and f"stopped: {name}" in s.stdout, s.stdout + s.stderr
    assert not group_alive(record(name)["pgid"])


@pytest.mark.parametrize("detach", [False, True])
def test_ctrl_c(tmp_path, name, detach):
    prof = write_profile(tmp_path / "p.toml", name, env={"SGLANG_ENABLE_SPEC_V2": "True", "STANDIN_HANG_AT": "weights"})
    cmd = DYNSPEC + ["launch", str(prof), "--no-preflight"] + (["--detach"] if detach else [])
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert wait_for(lambda: started(name), 30)
    time.sleep(1.0)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    pgid = record(name)["pgid"]
    assert proc.returncode == 130
    if detach:
        assert group_alive(pgid) and f"dynspec watch {name}" in out
        dynspec("stop", name)
    else:
        assert not group_alive(pgid) and "no process remains" in out


def test_secrets_never_printed_or_recorded(tmp_path, name):
    secret = "hf_SECRETSECRET123"
    prof = write_profile(tmp_path / "p.toml", name, env={"HF_TOKEN": secret, "MY_API_KEY": secret, "DB_PASSWORD": secret})
    r = dynspec("launch", str(prof), "--no-preflight", "--json")
    r2 = dynspec("launch", str(prof), "--no-preflight", "--replace")
    for text in (r.stdout, r.stderr, r2.stdout, r2.stderr, (runs_dir() / f"{name}.json").read_text()):
        assert secret not in text
    assert "***" in (runs_dir() / f"{name}.json").read_text()


HOSTILE = ["$(touch {c}/PWNED1)", "`touch {c}/PWNED2`", "; touch {c}/PWNED3", "a'b\"c $HOME", "line\nbreak", "ünïcødé ✓"]


def test_hostile_values_never_execute(tmp_path, name):
    canary = tmp_path / "canary"
    canary.mkdir()
    vals = [h.format(c=canary) for h in HOSTILE]
    env = {f"HOSTILE_{i}": v for i, v in enumerate(vals)}
    prof = write_profile(tmp_path / "p.toml", name, env=env, flags={"served-model-name": vals[0]},
                         log=str(tmp_path / "dir with space $(touch PWNED4)" / "x.log"))
    r = dynspec("launch", str(prof), "--no-preflight", "--json")
    assert r.returncode in (1, 2, 4), r.stderr
    assert list(canary.iterdir()) == [] and not Path("PWNED4").exists()


@pytest.mark.ssh
def test_ssh_dead_launch_fails_fast_and_leaves_nothing(tmp_path, name, ssh_lab):
    prof = write_profile(tmp_path / "p.toml", name, host="dut")
    t0 = time.monotonic()
    r = dynspec("launch", str(prof), "--no-preflight", "--json", ssh=ssh_lab)
    assert r.returncode == 1, r.stderr
    doc = json.loads(r.stdout)
    assert doc["verdict"] == "dead" and doc["run"]["stopped"] and doc["run"]["host"] == "dut"
    assert not group_alive(record(name)["pgid"])
    assert time.monotonic() - t0 < 60


@pytest.mark.ssh
def test_ssh_live_launch_status_watch_stop(tmp_path, name, ssh_lab):
    prof = write_profile(tmp_path / "p.toml", name, host="dut", env={"SGLANG_ENABLE_SPEC_V2": "True"})
    r = dynspec("launch", str(prof), "--no-preflight", "--json", ssh=ssh_lab)
    assert r.returncode == 0, r.stderr
    pgid = record(name)["pgid"]
    st = dynspec("status", "--host", "dut", "--json", ssh=ssh_lab)
    assert any(x["name"] == name and x["alive"] for x in json.loads(st.stdout)["runs"])
    w = dynspec("watch", name, "--host", "dut", "--json", ssh=ssh_lab)
    assert w.returncode == 0 and json.loads(w.stdout)["verdict"] == "live"
    s = dynspec("stop", name, "--host", "dut", ssh=ssh_lab)
    assert s.returncode == 0 and not group_alive(pgid)


@pytest.mark.ssh
def test_ssh_unknown_host_key_is_refused(tmp_path, name, ssh_lab):
    prof = write_profile(tmp_path / "p.toml", name, host="dut")
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    r = subprocess.run(DYNSPEC + ["launch", str(prof), "--no-preflight", "--ssh-config", str(ssh_lab.ssh_config),
                                  "--known-hosts", str(empty)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "host key" in r.stderr.lower() and len(r.stderr.strip().splitlines()) == 1


@pytest.mark.ssh
def test_ssh_connection_killed_mid_watch_recovers(tmp_path, name, ssh_lab):
    from tests.support.sshd import private_sshd  # noqa: F401  (fixture used below through request)

    srv = ssh_lab.add_server("private")
    try:
        prof = write_profile(tmp_path / "p.toml", name, host="private",
                             env={"SGLANG_ENABLE_SPEC_V2": "True", "STANDIN_PACE": "0.04"})
        assert dynspec("launch", str(prof), "--no-preflight", "--no-watch", ssh=ssh_lab).returncode == 0
        cmd = DYNSPEC + ["watch", name, "--host", "private", "--json", "--ssh-config", str(ssh_lab.ssh_config),
                         "--known-hosts", str(ssh_lab.known_hosts)]
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        killed = 0
        for _ in range(2):
            time.sleep(2.0)
            if proc.poll() is None:
                killed += len(srv.kill_sessions())
        out, err = proc.communicate(timeout=180)
        assert proc.returncode == 0, err[-2000:]
        doc = json.loads(out)
        assert doc["verdict"] == "live" and doc["marker"]["ranks"] == ["TP0", "TP1"]
        assert killed > 0  # the connection really died under the watcher
        log = Path(record(name)["log"]).read_text()
        assert log.count("Dynamic speculation disable enabled") == 2  # nothing written twice by the server
        assert dynspec("stop", name, "--host", "private", ssh=ssh_lab).returncode == 0
    finally:
        ssh_lab.remove_server("private")


@pytest.mark.parametrize("host", ["local", pytest.param("dut", marks=pytest.mark.ssh)])
def test_marker_lines_written_in_two_halves_are_judged_whole(tmp_path, name, ssh_lab, host):
    """Every rank's marker line reaches the log in two writes 1 s apart: the watch waits for each
    line's newline, so the launch is live with the marker on TP0-TP7, the same lines `verify` gives
    for the finished file (a half judged as a line said dead, or named a rank late and shifted lines).
    (The finished file also ends with the stop that came after the launch: DS320.)"""
    prof = write_profile(tmp_path / "p.toml", name, host=host, flags={"tp-size": 8},
                         env={"SGLANG_ENABLE_SPEC_V2": "True", "STANDIN_SPLIT_MARKER": "1"})
    r = dynspec("launch", str(prof), "--no-preflight", "--json", ssh=ssh_lab if host != "local" else None)
    assert r.returncode == 0, r.stderr + r.stdout
    launched = json.loads(r.stdout)
    rec = record(name)
    assert dynspec("stop", name, "--host", host, ssh=ssh_lab if host != "local" else None).returncode == 0
    data = Path(rec["log"]).read_bytes()
    ranks = [f"TP{i}" for i in range(8)]
    lines = data.split(b"\n")  # (physical lines: tqdm's \\r is no line end)
    marker_lines = [n for n, x in enumerate(lines, 1) if b"Dynamic speculation disable enabled: threshold=5" in x]
    assert len(marker_lines) == 8 and lines[marker_lines[0] - 1].startswith(b"[") and b" TP0] " in lines[marker_lines[0] - 1]
    verified = json.loads(dynspec("verify", rec["log"], "--json").stdout)
    for doc in (launched, verified):
        assert doc["verdict"] == "live" and doc["marker"]["ranks"] == ranks
        assert doc["marker"]["line"] == marker_lines[0]
    assert sorted((f["code"], f["line"]) for f in launched["findings"]) == \
        sorted((f["code"], f["line"]) for f in verified["findings"] if f["code"] not in ("DS305", "DS320"))


def test_a_python_whose_path_holds_an_equals_sign_launches_and_is_watched(tmp_path, name):
    import sys

    py = tmp_path / "run=3" / "bin" / "python"
    py.parent.mkdir(parents=True)
    py.symlink_to(sys.executable)
    prof = write_profile(tmp_path / "p.toml", name, python=str(py), env={"SGLANG_ENABLE_SPEC_V2": "True"})
    r = dynspec("launch", str(prof), "--no-preflight", "--json")
    assert r.returncode == 0, r.stderr + r.stdout
    doc = json.loads(r.stdout)
    assert doc["verdict"] == "live" and doc["run"]["why"] == "ready" and record(name)["python"] == str(py)
    assert dynspec("stop", name).returncode == 0


@pytest.mark.parametrize("second_env, verdict", [
    ({"SGLANG_ENABLE_SPEC_V2": "True", "STANDIN_CRASH_AT": "weights"}, "crashed"),
    ({}, "dead"),
])
def test_launch_reports_what_verify_reports_on_the_same_log(tmp_path, name, second_env, verdict):
    """The second launch appends to a log that already holds a whole launch: its evidence keeps the
    file's line numbers, and its findings (DS303 included) are the ones `dynspec verify` gives."""
    log = tmp_path / "shared.log"
    first = write_profile(tmp_path / "a.toml", name, env={"SGLANG_ENABLE_SPEC_V2": "True"}, log=str(log))
    assert dynspec("launch", str(first), "--no-preflight", "--json").returncode == 0
    assert dynspec("stop", name).returncode == 0
    lines_before = log.read_bytes().count(b"\n")
    second = write_profile(tmp_path / "b.toml", name, env=second_env, log=str(log))
    r = dynspec("launch", str(second), "--no-preflight", "--json")
    launched = json.loads(r.stdout)
    assert launched["verdict"] == verdict, r.stderr
    v = dynspec("verify", str(log), "--json")
    verified = json.loads(v.stdout)
    assert verified["verdict"] == verdict

    def evidence(doc):  # (DS305 speaks of the file's earlier launches, which a launch does not read)
        return sorted((f["code"], f["line"], f["text"]) for f in doc["findings"] if f["code"] not in ("DS304", "DS305"))

    assert evidence(launched) == evidence(verified)
    assert all(line is None or line > lines_before for _, line, _ in evidence(launched))
    assert launched["launch"]["first_line"] == verified["launch"]["first_line"] > lines_before
    assert "DS313" not in [c for c, _, _ in evidence(launched)]  # a probe with nothing to hook is no news
    if verdict == "crashed":
        assert "DS303" in [c for c, _, _ in evidence(launched)]
        assert launched["crash"]["line"] == verified["crash"]["line"]
