"""`dynspec prove` and `dynspec gate` end to end against the GPU-server stand-in
(tests/standin/fake_sglang_server.py), launched with dynspec itself; locally and over a real sshd.

The stand-in logs `Decode batch` lines whose accept length falls to 1.00 while the running batch
exceeds the patched threshold (STANDIN_IGNORE_THRESHOLD=1: a broken feature)."""
import json
import os
import signal
import subprocess
import time
import urllib.request
import uuid
from pathlib import Path

import pytest

from tests.run.helpers import DYNSPEC, cleanup, dynspec, group_alive, record, wait_for, write_profile
from tests.support.procs import pids_in_group, pids_with
from tests.support.home import runs_dir

TH = 3
FAST = ["--duration", "1", "--max-new-tokens", "24"]
LIVE_ENV = {"SGLANG_ENABLE_SPEC_V2": "True"}
FLAGS = {"speculative-disable-batch-threshold": TH, "decode-log-interval": 2, "enable-metrics": True}
NO_SPEC = {"speculative-algorithm": None, "speculative-draft-model-path": None, "speculative-num-steps": None,
           "speculative-eagle-topk": None, "speculative-num-draft-tokens": None}
SERVERS = {  # name -> (env, flags); all launched at once
    "good": (LIVE_ENV, FLAGS),
    "broken": ({**LIVE_ENV, "STANDIN_IGNORE_THRESHOLD": "1"}, FLAGS),
    "nospec": (LIVE_ENV, {**FLAGS, **NO_SPEC}),
    "zeroaccept": ({**LIVE_ENV, "STANDIN_ACCEPT_PROB": "0"}, FLAGS),
    "victim": (LIVE_ENV, FLAGS),
    "locked": (LIVE_ENV, {**FLAGS, "api-key": "sk-dynspec-SECRET-9f3b"}),  # sglang's --api-key
    # threshold 5 (write_profile's), sglang's default --decode-log-interval (40)
    "default-interval": (LIVE_ENV, {"enable-metrics": True}),
}
SECRET = SERVERS["locked"][1]["api-key"]


def healthy(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as r:
            return r.status == 200
    except OSError:
        return False


@pytest.fixture(scope="module")
def servers(tmp_path_factory):
    d = tmp_path_factory.mktemp("prove")
    tag = uuid.uuid4().hex[:6]
    names = {k: f"pv-{k}-{tag}" for k in SERVERS}
    procs, profiles = {}, {}
    for key, (env, flags) in SERVERS.items():
        profiles[key] = write_profile(d / f"{key}.toml", names[key], env=env, flags=flags)
        # --keep: a dead verdict (no speculative algorithm) must not stop the server
        procs[key] = subprocess.Popen(DYNSPEC + ["launch", str(profiles[key]), "--no-preflight", "--keep", "--json"],
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        for key, p in procs.items():
            out, err = p.communicate(timeout=120)
            assert p.returncode in ((5,) if key == "zeroaccept" else (0, 1)), f"{key}: {err}{out}"
        for key in SERVERS:
            assert wait_for(lambda: healthy(record(names[key])["port"]), 60), f"{key} never became healthy"
        yield {"dir": d, "names": names, "profiles": profiles}
    finally:
        for n in names.values():
            forget(n)


def forget(name: str) -> None:
    """Kill what is left of a run, then drop its record and receipt."""
    cleanup(name)
    for f in (receipt_file(name), receipt_file(name).with_name(f"{name}.json")):
        f.unlink(missing_ok=True)


@pytest.fixture(scope="module")
def patched(tmp_path_factory):
    p = tmp_path_factory.mktemp("patched") / "eagle_worker_v2.py"
    p.write_text("# patched: Dynamic speculation disable enabled: threshold=%d\n")
    return p


def receipt_file(name: str) -> Path:
    return runs_dir() / f"{name}.receipt.json"


def prove(name: str, *args: str, timeout: float = 120, ssh=None) -> subprocess.CompletedProcess:
    return dynspec("prove", name, *FAST, *args, timeout=timeout, ssh=ssh)


def loadgens() -> list[int]:
    """Pids of load generators driving a step (their JSON argument carries the tag and a concurrency)."""
    out = []
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                cmd = (p / "cmdline").read_bytes()
                state = (p / "stat").read_text().rsplit(")", 1)[1].split()[0]
            except OSError:
                continue
            if b"dynspec-loadgen" in cmd and b'"concurrency"' in cmd and state != "Z":
                out.append(int(p.name))
    return out


# --- a feature that does its job ------------------------------------------------------------------
def test_correct_feature_is_proven_with_report_and_receipt(servers, patched, tmp_path):
    name = servers["names"]["good"]
    rep = tmp_path / "report"
    r = prove(name, "--json", "--report", str(rep), "--patched-file", str(patched))
    assert r.returncode == 0, r.stderr + r.stdout
    doc = json.loads(r.stdout)
    assert doc["outcome"] == "proven" and doc["verdict"] == "live" and doc["threshold"] == TH
    assert doc["threshold_source"].startswith("--speculative-disable-batch-threshold")
    assert [s["concurrency"] for s in doc["steps"]] == [1, TH, TH + 1, 2 * TH]
    groups = [g for s in doc["steps"] for g in s["groups"] if g["evaluated"]]
    assert any(g["running"] <= TH and g["speculation"] == "on" and g["accept_len"] > 1.5 for g in groups)
    assert any(g["running"] > TH and g["speculation"] == "off" for g in groups)
    assert all(g["passed"] for g in groups)
    first = doc["steps"][0]
    assert first["tokens_per_verify"] > 1.5 and first["requests_with_spec"] > 0  # /generate meta_info
    assert first["server_info_avg_accept_length"]["after"] is not None  # /server_info internal_states
    assert first["metrics_spec_accept_length"]["after"] is not None  # --enable-metrics
    last = doc["steps"][-1]  # at 2N clients the batch is 2N but for the drain at the end
    assert last["running_mode"] == 2 * TH
    assert next(g for g in last["groups"] if g["running"] == 2 * TH)["speculation"] == "off"
    # report files
    html = (rep / "report.html").read_text()
    assert "<svg" in html and f"threshold {TH}" in html and "<script" not in html and "PROVEN" in html
    assert json.loads((rep / "prove.json").read_text())["outcome"] == "proven"
    # the receipt, next to the run record
    assert doc["receipt"] == str(receipt_file(name))
    rc = json.loads(receipt_file(name).read_text())
    rec = record(name)
    assert rc["schema"] == "dynspec-receipt/1" and rc["live"] and rc["proven"]
    assert rc["server"]["pid"] == rec["pid"] and rc["server"]["leader_start"] == rec["leader_start"]
    import hashlib

    assert rc["server"]["cmdline_sha256"] == hashlib.sha256(Path(f"/proc/{rec['pid']}/cmdline").read_bytes()).hexdigest()
    assert rc["patched_files"] == [{"path": str(patched), "sha256": hashlib.sha256(patched.read_bytes()).hexdigest(),
                                    "source": "given"}]
    assert rc["worker_class"] == "EAGLEWorkerV2" and rc["profile"]["argv"] == rec["argv"]


def test_gate_accepts_the_fresh_receipt_and_refuses_age_and_changed_file(servers, patched):
    name = servers["names"]["good"]
    assert receipt_file(name).exists()
    g = dynspec("gate", name, "--max-age", "1h")
    assert g.returncode == 0 and "live and proven" in g.stdout, g.stderr
    g = dynspec("gate", str(receipt_file(name)), "--max-age", "0s")
    assert g.returncode == 1 and "FAILED age" in g.stderr and len(g.stderr.strip().splitlines()) == 1
    original = patched.read_text()
    patched.write_text(original + "# edited after prove\n")
    try:
        g = dynspec("gate", name)
        assert g.returncode == 1 and "FAILED patched-files" in g.stderr and str(patched) in g.stderr
    finally:
        patched.write_text(original)
    assert dynspec("gate", name).returncode == 0
    assert dynspec("gate", name, "--max-age", "soon").returncode == 2


def test_server_restart_makes_the_gate_fail(servers, patched):
    name = servers["names"]["good"]
    assert dynspec("gate", name).returncode == 0
    old = record(name)["pid"]
    # another port: the old one may be held by TIME_WAIT connections the load left behind
    prof = write_profile(servers["dir"] / "good-again.toml", name, env=LIVE_ENV, flags=FLAGS)
    r = dynspec("launch", str(prof), "--no-preflight", "--replace", "--json")
    assert r.returncode == 0, r.stderr
    assert record(name)["pid"] != old
    g = dynspec("gate", name)
    assert g.returncode == 1 and "FAILED process" in g.stderr and str(old) in g.stderr


def test_running_batch_that_never_exceeds_the_threshold_is_inconclusive(servers):
    name = servers["names"]["good"]
    r = prove(name, "--steps", "1,2")
    assert r.returncode == 3, r.stderr + r.stdout
    assert "never exceeded the threshold" in r.stdout and "concurrency" in r.stdout


def test_a_short_run_is_inconclusive_not_a_failure(servers):
    """4 s steps of 32-token requests: at 6 clients every 40-pass log interval sees requests finish
    and the batch dip to 5, where the feature speculates again, so each line at batch 6 mixes
    speculating and plain passes (accept len ~1.1-1.3 against ~2.7 below the threshold)."""
    name = servers["names"]["default-interval"]
    r = dynspec("prove", name, "--duration", "4", "--max-new-tokens", "32", "--json", timeout=120)
    assert r.returncode == 3, r.stderr + r.stdout
    doc = json.loads(r.stdout)
    assert doc["outcome"] == "inconclusive", doc["conclusion"]
    assert doc["conclusion"]["message"].startswith("too little evidence at running batch 6 (> threshold 5)")
    six = next(g for g in doc["steps"][2]["groups"] if g["running"] == 6)
    assert six["evaluated"] is False and six["passed"] is None and six["not_evaluated"]
    assert not any(g["passed"] is False for s in doc["steps"] for g in s["groups"])


def test_url_mode_loads_from_here_and_writes_no_receipt(servers):
    rec = record(servers["names"]["good"])
    r = dynspec("prove", "--url", f"http://127.0.0.1:{rec['port']}", "--log", rec["log"], "--steps", "1,N+1", *FAST, "--json")
    assert r.returncode == 0, r.stderr + r.stdout
    doc = json.loads(r.stdout)
    assert doc["receipt"] is None and doc["target"]["url"] == f"http://127.0.0.1:{rec['port']}"
    assert doc["threshold_source"] == "the marker line"


def test_bad_input(servers):
    name = servers["names"]["good"]
    for args, words in [(["--url", "http://10.1.2.3:30000"], "loopback"), ([], "run name or --url"),
                        (["no-such-run-xyz"], "no run named"), ([name, "--steps", "N*N"], "--steps")]:
        r = dynspec("prove", *args)
        assert r.returncode == 2 and words in r.stderr and len(r.stderr.strip().splitlines()) == 1, (args, r.stderr)


def test_ctrl_c_stops_the_load_at_once(servers):
    name = servers["names"]["good"]
    proc = subprocess.Popen(DYNSPEC + ["prove", name, "--duration", "60", "--steps", "2"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert wait_for(lambda: loadgens(), 30), "the load generator never started"
        time.sleep(0.5)
        t0 = time.monotonic()
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
        assert proc.returncode == 130 and "interrupted" in err, (out, err)
        assert time.monotonic() - t0 < 10
        assert wait_for(lambda: not loadgens(), 5)
    finally:
        if proc.poll() is None:
            proc.kill()


# --- features that do not do their job ------------------------------------------------------------
def test_ignored_threshold_fails(servers, patched):
    name = servers["names"]["broken"]
    r = prove(name, "--steps", "1,2N", "--json", "--patched-file", str(patched))
    assert r.returncode == 1, r.stderr + r.stdout
    doc = json.loads(r.stdout)
    assert doc["outcome"] == "fails" and "stayed on" in doc["conclusion"]["message"]
    above = doc["steps"][1]
    assert above["running_mode"] == 2 * TH and above["speculation"] == "on" and above["outcome"] == "fail"
    # the log the receipt's verdict is read from now holds prove's own Decode batch lines, speculating above the
    # threshold: that verdict is dead (DS321, the effect contradicts the feature), so the gate fails on it first
    assert doc["verdict"] == "dead"
    g = dynspec("gate", name)
    assert g.returncode == 1 and "FAILED live: the receipt's verdict is dead" in g.stderr


@pytest.mark.parametrize("key", ["nospec", "zeroaccept"])
def test_server_that_never_speculates_fails(servers, key):
    r = prove(servers["names"][key], "--steps", "1,N+1", "--json")
    assert r.returncode == 1, r.stderr + r.stdout
    doc = json.loads(r.stdout)
    assert "never turned on" in doc["conclusion"]["message"]
    assert all(s["speculation"] == "off" for s in doc["steps"])
    if key == "nospec":
        assert doc["verdict"] == "dead" and doc["steps"][0]["tokens_per_verify"] is None
    else:
        assert doc["verdict"] == "ineffective" and doc["steps"][0]["accept_len"] <= 1.05  # live, accepting nothing


def test_server_dying_during_the_run_exits_4(servers):
    name = servers["names"]["victim"]
    proc = subprocess.Popen(DYNSPEC + ["prove", name, "--duration", "30", "--steps", "2", "--json"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert wait_for(lambda: loadgens(), 30)
        time.sleep(0.5)
        os.killpg(record(name)["pgid"], signal.SIGKILL)
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 4, err + out
        doc = json.loads(out)
        assert doc["outcome"] == "died" and "during step 1" in doc["conclusion"]["message"]
        assert not group_alive(record(name)["pgid"])
        r = dynspec("prove", name)
        assert r.returncode == 4 and "is not running" in r.stderr
    finally:
        if proc.poll() is None:
            proc.kill()


# --- over SSH -------------------------------------------------------------------------------------
@pytest.mark.ssh
def test_ssh_prove_and_gate(tmp_path, ssh_lab, patched):
    name = f"pv-ssh-{uuid.uuid4().hex[:6]}"
    prof = write_profile(tmp_path / "p.toml", name, host="dut", env=LIVE_ENV, flags=FLAGS)
    try:
        r = dynspec("launch", str(prof), "--no-preflight", "--json", ssh=ssh_lab)
        assert r.returncode == 0, r.stderr
        r = prove(name, "--host", "dut", "--steps", "1,2N", "--patched-file", str(patched), ssh=ssh_lab)
        assert r.returncode == 0, r.stderr + r.stdout
        assert "PROVEN" in r.stdout and f"threshold {TH}" in r.stdout and "accept length by running batch" in r.stdout
        assert f"receipt: {receipt_file(name)}" in r.stdout
        g = dynspec("gate", name, "--host", "dut", "--max-age", "30m", ssh=ssh_lab)
        assert g.returncode == 0 and "live and proven" in g.stdout, g.stderr
        # Ctrl-C: the remote load generator (here: on this machine, behind sshd) goes too
        proc = subprocess.Popen(DYNSPEC + ["prove", name, "--host", "dut", "--duration", "60", "--steps", "2",
                                           "--ssh-config", str(ssh_lab.ssh_config), "--known-hosts", str(ssh_lab.known_hosts)],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            assert wait_for(lambda: loadgens(), 30), "the remote load generator never started"
            proc.send_signal(signal.SIGINT)
            assert proc.wait(30) == 130
            assert wait_for(lambda: not loadgens(), 10)
        finally:
            if proc.poll() is None:
                proc.kill()
        assert dynspec("stop", name, "--host", "dut", ssh=ssh_lab).returncode == 0
    finally:
        forget(name)


# --- a server started with --api-key --------------------------------------------------------------


def test_api_key_server_needs_the_key_and_it_never_shows(servers, monkeypatch):
    """Without the key: one line naming the variable to set, before any load. With it (from
    OPENAI_API_KEY, as sglang.bench_serving): proven, and the key is on no command line on the
    host, in no output and in no receipt."""
    import threading

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    name = servers["names"]["locked"]
    r = prove(name)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "started with --api-key" in r.stderr and "OPENAI_API_KEY" in r.stderr
    r = prove(name, "--api-key-env", "DYNSPEC_NO_SUCH_VAR")
    assert r.returncode == 2 and "DYNSPEC_NO_SUCH_VAR" in r.stderr
    r = dynspec("prove", name, *FAST, "--api-key-env", "WRONG_KEY", env={"WRONG_KEY": "sk-wrong"})
    assert r.returncode == 2 and "refuses the API key in $WRONG_KEY (HTTP 401)" in r.stderr, r.stderr

    seen, stop = set(), threading.Event()

    def watch_cmdlines():
        while not stop.is_set():
            seen.update(pids_with(SECRET))
            time.sleep(0.05)

    server_pids = {record(name)["pid"]}  # the server's own command line holds its --api-key
    t = threading.Thread(target=watch_cmdlines, daemon=True)
    t.start()
    try:
        r = dynspec("prove", name, *FAST, "--json", env={"OPENAI_API_KEY": SECRET})
    finally:
        stop.set()
        t.join()
    assert r.returncode == 0, r.stderr + r.stdout
    doc = json.loads(r.stdout)
    assert doc["outcome"] == "proven" and doc["steps"][0]["requests_ok"] > 0
    assert seen - server_pids - set(pids_in_group(record(name)["pgid"])) == set(), "the key showed on a command line"
    for text in (r.stdout, r.stderr, receipt_file(name).read_text()):
        assert SECRET not in text


def test_api_key_server_via_url_says_which_variable_to_set(servers, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    port = record(servers["names"]["locked"])["port"]
    r = dynspec("prove", "--url", f"http://127.0.0.1:{port}", *FAST)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "wants its --api-key (HTTP 401)" in r.stderr and "OPENAI_API_KEY" in r.stderr

