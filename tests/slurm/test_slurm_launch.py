"""`dynspec launch` of a `scheduler = "slurm"` profile on a REAL two-node Slurm (tests/support/slurm.py:
Debian's slurmctld, two slurmd -N n1/n2, munge), the GPU-server stand-in on the nodes. The same
verdicts as a two-node `group launch` (dead from the warning, live from every node's marker,
crashed), and nothing left in squeue after any of them, Ctrl-C, or a killed dynspec (the `slurm`
fixture asserts the queue is empty after every test)."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from tests.run.helpers import DYNSPEC, wait_for
from tests.slurm.helpers import NODE_DYNSPEC, ds, slurm_record, write_slurm_profile

pytestmark = pytest.mark.slurm


@pytest.fixture
def name():
    return f"s-{uuid.uuid4().hex[:8]}"


def launch_json(prof: Path, *extra: str, timeout: float = 150) -> tuple[subprocess.CompletedProcess, dict]:
    r = ds("launch", str(prof), "--json", *extra, timeout=timeout)
    try:
        doc = json.loads(r.stdout)
    except ValueError:
        raise AssertionError(f"exit {r.returncode}; stdout {r.stdout[-2000:]!r}; stderr {r.stderr[-3000:]!r}")
    return r, doc


def log_header_argv(log: str) -> list[str]:
    """The argv the node's task really ran, from the DYNSPEC-LAUNCH line it wrote (ranks as expanded there)."""
    for line in Path(log).read_text().splitlines():
        if line.startswith("DYNSPEC-LAUNCH "):
            return json.loads(line[len("DYNSPEC-LAUNCH "):])["argv"]
    raise AssertionError(f"no launch header in {log}")


def test_live_on_two_nodes_then_status_watch_by_job_id_stop(tmp_path, slurm, name):
    prof = write_slurm_profile(tmp_path / "s.toml", name)
    r, doc = launch_json(prof, "--no-preflight")
    assert r.returncode == 0, r.stderr
    assert doc["verdict"] == "live" and [n["verdict"] for n in doc["nodes"]] == ["live", "live"]
    assert doc["job_state"] == "RUNNING" and doc["nodes_allocated"] == ["n1", "n2"]
    assert doc["node_addrs"] == ["127.0.0.1", "127.0.0.1"]  # NodeAddr from slurm.conf, not the node name
    assert doc["nodes"][0]["ready"] and doc["nodes"][0]["health"].endswith(" 200")
    # every node logged the patch's marker for its own TP rank: rank 1 really was rank 1
    assert doc["nodes"][0]["detail"]["marker"]["ranks"] == ["TP0"]
    assert doc["nodes"][1]["detail"]["marker"]["ranks"] == ["TP1"]
    rec = slurm_record(name)
    jid = rec["job_id"]
    assert rec["nodes"] == ["n1", "n2"] and len(rec["logs"]) == 2 and rec["logs"][0] != rec["logs"][1]
    a1 = log_header_argv(rec["logs"][1])
    assert a1[a1.index("--node-rank") + 1] == "1" and a1[a1.index("--nnodes") + 1] == "2"
    assert a1[a1.index("--dist-init-addr") + 1].startswith("127.0.0.1:")
    # the job is Slurm's: squeue lists it under dynspec's job name
    assert any(q.split()[0] == jid and q.endswith(f"dynspec-{name}") for q in slurm.queued())
    st = ds("status", "--json")
    rows = [x for x in json.loads(st.stdout)["runs"] if x.get("job_id") == jid]
    assert st.returncode == 0 and rows and rows[0]["job_state"] == "RUNNING" and rows[0]["alive"]
    for ref in (name, jid):  # one run, by its name or its job id (both were "no run named ...")
        one = ds("status", ref)
        assert one.returncode == 0 and f"{name} pid slurm job {jid} RUNNING alive verdict live" in one.stdout, \
            one.stdout + one.stderr
        doc1 = json.loads(ds("status", ref, "--json").stdout)
        assert [r["name"] for r in doc1["runs"]] == [name]
    assert ds("status", "no-such-run").returncode == 2
    w = ds("watch", jid, "--json", "--timeout", "60")
    assert w.returncode == 0, w.stderr
    assert json.loads(w.stdout)["verdict"] == "live"
    s = ds("stop", jid)
    assert s.returncode == 0 and f"Slurm job {jid}" in s.stdout and "nothing of it is left in squeue" in s.stdout, s.stderr
    assert not slurm.queued()
    again = ds("stop", name)
    assert again.returncode == 0 and "already ended" in again.stdout


def test_dead_from_the_warning_is_cancelled(tmp_path, slurm, name):
    # sglang 0.5.9 without SGLANG_ENABLE_SPEC_V2: EAGLE3 runs EAGLEWorker, the patched V2 class never runs
    prof = write_slurm_profile(tmp_path / "s.toml", name, env={"SGLANG_ENABLE_SPEC_V2": None})
    t0 = time.monotonic()
    r, doc = launch_json(prof, "--no-preflight")
    assert r.returncode == 1, r.stderr
    assert doc["verdict"] == "dead" and doc["why"] == "node-dead" and doc["culprit"] in (0, 1)
    culprit = doc["nodes"][doc["culprit"]]["detail"]  # whichever node's log showed it first
    assert culprit["worker"]["class"] == "EAGLEWorker"
    assert any("SGLANG_ENABLE_SPEC_V2=True" in (f["fix"] or "") for f in culprit["findings"])
    assert doc["cancelled"] is True and doc["gone"] is True
    assert not slurm.queued()
    assert slurm_record(name)["verdict"] == "dead"
    assert time.monotonic() - t0 < 60


def test_crashed_is_cancelled(tmp_path, slurm, name):
    prof = write_slurm_profile(tmp_path / "s.toml", name, env={"STANDIN_CRASH_AT": "weights"})
    r, doc = launch_json(prof, "--no-preflight")
    assert r.returncode == 4, r.stderr
    assert doc["verdict"] == "crashed" and doc["why"] in ("node-crashed", "job-ended")
    assert any((n["detail"] or {}).get("crash", {}) and n["detail"]["crash"].get("exception") for n in doc["nodes"])
    assert doc["gone"] is True and not slurm.queued()


def test_dead_preflight_on_the_node_ends_the_job_with_the_report_in_its_log(tmp_path, slurm, name):
    from tests.multinode.helpers import fake_sglang, python_with

    # an installed-looking sglang 0.5.9 with the patch in EAGLEWorkerV2, and no SGLANG_ENABLE_SPEC_V2:
    # 0.5.9's dispatch builds EAGLEWorker for EAGLE3, so preflight on the node is dead (DS201)
    site = fake_sglang(tmp_path / "site")
    py = python_with(site, tmp_path / "py")
    prof = write_slurm_profile(tmp_path / "s.toml", name, python=str(py), env={"SGLANG_ENABLE_SPEC_V2": None})
    r, doc = launch_json(prof)
    assert r.returncode == 1, r.stderr
    assert doc["verdict"] == "dead" and doc["why"] == "preflight", doc["message"]
    assert "preflight on node" in doc["message"] and "the server was not started" in doc["message"]
    assert "DS201" in doc["message"] and "EAGLEWorker, not EAGLEWorkerV2" in doc["message"]
    assert "; fix: " in doc["message"] and "SGLANG_ENABLE_SPEC_V2=True" in doc["message"]  # the fix, shown
    rec = slurm_record(name)
    job_log = Path(rec["batch_log"]).read_text()
    assert "preflight on node" in job_log and "is dead; the server is not started" in job_log
    # the node's whole report is in the job's log before dynspec cancels the job (it used to be cut off)
    culprit = doc["culprit"]
    report = job_log.split(f"preflight on node {culprit} ")[1]
    assert "DEAD" in report and "DS201" in report and "fix:" in report and "SGLANG_ENABLE_SPEC_V2=True" in report
    for log in rec["logs"]:  # no server started on any node
        assert not Path(log).exists() or "DYNSPEC-LAUNCH" not in Path(log).read_text()
    assert not slurm.queued()


@pytest.mark.parametrize("dynspec, why", [
    ("/nonexistent/venv/bin/dynspec", "exited 127 (command not found)"),  # not installed on the nodes
    (f'{sys.executable} -c \'import sys; sys.exit("no dynspec here")\'', "exited 1: no dynspec here"),
])
def test_preflight_that_cannot_run_on_the_nodes_is_a_clear_failure(tmp_path, slurm, name, dynspec, why):
    """`[slurm] dynspec` that does not run on the nodes: no verdict, so no server either (it used to
    be skipped silently and the server started), one line naming it, exit 2, nothing queued."""
    prof = write_slurm_profile(tmp_path / "s.toml", name, slurm={"dynspec": dynspec})
    r = ds("launch", str(prof))
    assert r.returncode == 2, r.stdout + r.stderr
    err = [ln for ln in r.stderr.splitlines() if ln.startswith("dynspec: error:")]
    assert len(err) == 1 and "preflight could not run on node" in err[0] and why in err[0], r.stderr
    assert "[slurm] dynspec" in err[0] and "--no-preflight" in err[0]
    rec = slurm_record(name)
    assert "preflight could not run on node" in Path(rec["batch_log"]).read_text()
    for log in rec["logs"]:  # no server started on any node
        assert not Path(log).exists() or "DYNSPEC-LAUNCH" not in Path(log).read_text()
    assert not slurm.queued()


@pytest.mark.parametrize("how", ["ctrl-c", "detach", "kill-9"])
def test_interrupting_dynspec_leaves_nothing_queued_unless_detached(tmp_path, slurm, name, how):
    prof = write_slurm_profile(tmp_path / "s.toml", name, env={"STANDIN_HANG_AT": "weights"})
    proc = subprocess.Popen(DYNSPEC + ["launch", str(prof), "--no-preflight"]
                            + (["--detach"] if how == "detach" else []),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "DYNSPEC_DEBUG": "1"})
    try:
        rec_path = Path.home() / ".dynspec" / "runs" / f"{name}.slurm.json"
        # (the record is written before sbatch, the job id once sbatch answered)
        assert wait_for(lambda: rec_path.exists() and json.loads(rec_path.read_text())["job_id"], 60)
        jid = json.loads(rec_path.read_text())["job_id"]
        assert wait_for(lambda: any(q.split()[:2] == [jid, "RUNNING"] for q in slurm.queued()), 60)
        time.sleep(1.5)
        proc.send_signal(signal.SIGKILL if how == "kill-9" else signal.SIGINT)
        out, err = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            proc.kill()
    if how == "kill-9":
        assert proc.returncode == -signal.SIGKILL
        assert slurm.wait_empty(30), f"dynspec was killed and its job stayed: {slurm.queued()}"
        return
    assert proc.returncode == 130, err[-3000:]
    if how == "detach":
        assert f"re-attach with: dynspec watch {name}" in out
        assert any(q.split()[:2] == [jid, "RUNNING"] for q in slurm.queued())
        s = ds("stop", name)
        assert s.returncode == 0, s.stderr
    else:
        assert f"cancelled job {jid}" in out and "it is gone from squeue" in out
    assert not slurm.queued()


def test_unknown_partition_is_one_line_exit_2_nothing_queued(tmp_path, slurm, name):
    prof = write_slurm_profile(tmp_path / "s.toml", name, slurm={"partition": "nosuchpart"})
    r = ds("launch", str(prof), "--no-preflight")
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "nosuchpart" in lines[0] and "not found" in lines[0].lower(), r.stderr
    assert not slurm.queued()


@pytest.mark.parametrize("table, words", [
    ({"constraint": "h100"}, "Invalid feature specification"),  # no node has the feature
    ({"gpus-per-node": 8}, "Invalid generic resource (gres) specification"),  # no GPUs configured
])
def test_sbatch_rejection_is_slurms_message_exit_2(tmp_path, slurm, name, table, words):
    prof = write_slurm_profile(tmp_path / "s.toml", name, slurm=table)
    r = ds("launch", str(prof), "--no-preflight")
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("dynspec: error: sbatch rejected the job:"), r.stderr
    assert words in lines[0]  # sbatch's own words
    assert not slurm.queued()


def test_job_that_never_leaves_pending_is_cancelled(tmp_path, slurm, name):
    prof = write_slurm_profile(tmp_path / "s.toml", name, slurm={"extra": ["--begin=now+1hour"],
                                                                 "pending-timeout": 3})
    t0 = time.monotonic()
    r = ds("launch", str(prof), "--no-preflight")
    assert r.returncode == 2, r.stderr
    err = [ln for ln in r.stderr.splitlines() if ln.startswith("dynspec: error:")]
    assert len(err) == 1 and "still PENDING (BeginTime)" in err[0], r.stderr  # Slurm's reason
    assert time.monotonic() - t0 < 30
    assert not slurm.queued()


def test_job_pending_for_resources_is_named_with_slurms_reason(tmp_path, slurm, name):
    """Both nodes are taken by another job: ours stays PENDING (Resources). Past ready_timeout (no
    pending-timeout set) the launch says so, Slurm's reason included, exit 2, and cancels it (it used
    to end as "inconclusive ... node 0 inconclusive in args"); `status NAME|JOBID` shows the reason."""
    blocker = slurm.run("sbatch", "--parsable", "-N", "2", "-p", "debug", "-o", "/dev/null", "--wrap", "sleep 300")
    bid = blocker.stdout.strip().split(";")[0]
    try:
        assert wait_for(lambda: any(q.split()[:2] == [bid, "RUNNING"] for q in slurm.queued()), 30)
        prof = write_slurm_profile(tmp_path / "s.toml", name)
        prof.write_text(prof.read_text().replace("ready_timeout = 120", "ready_timeout = 4"))
        r = ds("launch", str(prof), "--no-preflight")
        assert r.returncode == 2, r.stdout + r.stderr
        err = [ln for ln in r.stderr.splitlines() if ln.startswith("dynspec: error:")]
        assert len(err) == 1 and "still PENDING (Resources) after 4s: Slurm has not started it" in err[0], r.stderr
        assert "in args" not in r.stdout + r.stderr
        assert [q.split()[0] for q in slurm.queued()] == [bid]  # ours is cancelled
        r2 = ds("launch", str(prof), "--no-preflight", "--no-watch", "--name", f"{name}-b")
        assert r2.returncode == 0, r2.stderr
        jid = slurm_record(f"{name}-b")["job_id"]
        # (a job just submitted has reason None until the scheduler's next pass)
        assert wait_for(lambda: slurm.run("squeue", "-h", "-j", jid, "-o", "%r").stdout.strip() == "Resources", 60)
        for ref in (f"{name}-b", jid):
            st = ds("status", ref)
            assert st.returncode == 0 and f"slurm job {jid} PENDING (Resources) alive" in st.stdout, st.stdout + st.stderr
        assert ds("stop", jid).returncode == 0
    finally:
        slurm.run("scancel", bid, check=False)
        ds("stop", f"{name}-b")


@pytest.mark.parametrize("table, words", [
    ({"nodez": 2}, "nodez"),
    ({"nodes": 0}, "nodes = 0"),
    ({"time": "soon"}, "time = 'soon'"),
    ({"extra": ["--nodes=4"]}, "set by dynspec"),
    ({"extra": ["--export=NONE"]}, "set by dynspec"),  # the env travels in the job's environment
    ({"gpus-per-node": "eight"}, "gpus-per-node"),
])
def test_bad_slurm_table_is_one_line_exit_2(tmp_path, table, words):
    prof = write_slurm_profile(tmp_path / "s.toml", "bad", slurm=table)
    r = ds("launch", str(prof), "--dry-run")
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1 and words in lines[0], r.stderr
    assert "[slurm]" in lines[0]


def test_unknown_scheduler_and_dry_run_without_slurm(tmp_path):
    prof = write_slurm_profile(tmp_path / "s.toml", "bad")
    prof.write_text(prof.read_text().replace('scheduler = "slurm"', 'scheduler = "pbs"'))
    r = ds("launch", str(prof), "--dry-run")
    assert r.returncode == 2 and 'the only scheduler is "slurm"' in r.stderr
    plain = tmp_path / "plain.toml"  # the same profile without scheduler/[slurm]: today's launch
    plain.write_text(prof.read_text().replace('scheduler = "pbs"', "").split("[slurm]")[0])
    r = ds("launch", str(plain), "--dry-run")
    assert r.returncode == 2 and "--dry-run: only for profiles with scheduler" in r.stderr


def test_dry_run_renders_the_job_without_submitting(tmp_path, name):
    prof = write_slurm_profile(tmp_path / "s.toml", name, slurm={
        "account": "proj1", "qos": "high", "gpus-per-node": 8, "constraint": "h100", "time": "01:00:00",
        "extra": ["--exclusive"]})
    r = ds("launch", str(prof), "--dry-run")
    assert r.returncode == 0, r.stderr
    batch, node = r.stdout.split("(every task)\n")
    for opt in ("--nodes=2", "--ntasks-per-node=1", "--partition=debug", "--account=proj1", "--qos=high",
                "--gpus-per-node=8", "--constraint=h100", "--time=01:00:00", "--exclusive"):
        assert f"#SBATCH {opt}\n" in batch
    assert len([ln for ln in batch.splitlines() if ln.startswith("srun ")]) == 1 and "--kill-on-bad-exit=1" in batch
    assert "SLURM_NODEID" not in batch  # never expanded by the batch script's shell
    assert 'RANK="$SLURM_NODEID"' in node and '--node-rank "$RANK"' in node
    assert "NodeAddr" in batch and '--dist-init-addr "$DYNSPEC_DIST_INIT_ADDR"' in node
    assert "DYNSPEC_PROBE=" in node  # the probe, injected as for any launch
    assert not (Path.home() / ".dynspec" / "runs" / f"{name}.slurm.json").exists()


def test_group_launch_of_a_slurm_profile_stalled_node_is_crashed_and_cancelled(tmp_path, slurm, name):
    """`dynspec group launch` hands a Slurm profile to the scheduler too; a node whose log stops
    before it is live is crashed ("stalled"), as in a group launch over SSH."""
    prof = write_slurm_profile(tmp_path / "s.toml", name, env={"STANDIN_HANG_AT": "weights"})
    r = ds("group", "launch", str(prof), "--no-preflight", "--json", "--stall-timeout", "3")
    doc = json.loads(r.stdout)
    assert r.returncode == 4, r.stderr
    assert doc["verdict"] == "crashed" and doc["why"] == "stalled" and doc["job_id"]
    assert "stalled in weight loading on node" in doc["message"]
    assert doc["cancelled"] and doc["gone"] and not slurm.queued()


@pytest.mark.ssh
def test_login_host_over_ssh_live_then_stop(tmp_path, slurm, ssh_lab, name):
    """sbatch, squeue, scontrol and scancel run on the login host over the real sshd; the nodes'
    logs are followed through it. `conf` hands the login host this cluster's slurm.conf."""
    from tests.multinode.helpers import fake_sglang, python_with

    # an installed-looking sglang 0.5.9 patched in EAGLEWorkerV2: preflight on each node passes
    py = python_with(fake_sglang(tmp_path / "site"), tmp_path / "py")
    prof = write_slurm_profile(tmp_path / "s.toml", name, python=str(py), slurm={
        "conf": str(slurm.conf), "dynspec": NODE_DYNSPEC})
    prof.write_text(prof.read_text().replace('host = "local"', 'host = "dut"'))
    ssh = ["--ssh-config", str(ssh_lab.ssh_config), "--known-hosts", str(ssh_lab.known_hosts)]
    r, doc = launch_json(prof, *ssh)
    assert r.returncode == 0, doc["message"]
    assert doc["verdict"] == "live" and doc["nodes_allocated"] == ["n1", "n2"]
    assert doc["nodes"][1]["detail"]["marker"]["ranks"] == ["TP1"]
    assert [p["verdict"] for p in doc["preflight"]] == ["reachable", "reachable"]
    print(f"\nslurm over ssh: timings {doc['timings']}")
    jid = doc["job_id"]
    # (status over SSH lists every run in the login user's real ~/.dynspec: tested locally above)
    w = ds("watch", jid, "--host", "dut", "--json", "--timeout", "60", *ssh)
    assert w.returncode == 0 and json.loads(w.stdout)["verdict"] == "live", w.stderr
    s = ds("stop", name, "--host", "dut", *ssh)
    assert s.returncode == 0 and f"Slurm job {jid}" in s.stdout, s.stderr
    assert not slurm.queued()
    # the login session's record is in the suite's dynspec home (tests/support/sshd.py): not left for
    # the tests that list every run there
    (Path(os.environ["DYNSPEC_SUITE_HOME"]) / "runs" / f"{name}.slurm.json").unlink()
