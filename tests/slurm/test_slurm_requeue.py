"""A job Slurm requeues under a watch, on the REAL test cluster (tests/support/slurm.py): the servers
hang in weight loading (STANDIN_HANG_AT=weights), then `scontrol requeue JOBID` (what slurmctld does
itself for a batch job whose node fails: Requeue=1 is the default). Slurm stops both servers and
puts the job back to PENDING (BeginTime) with Restarts=1 (seen on slurm-wlm 22.05.8: COMPLETING with
Restarts=1 at once, then PENDING BeginTime). Watching used to sit on the quiet logs until the stall
timeout ("stalled in weight loading"); the watch names the requeue in one line within seconds,
cancels the requeued job, and nothing stays queued."""
from __future__ import annotations

import json
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from tests.run.helpers import DYNSPEC, wait_for
from tests.slurm.helpers import slurm_record, write_slurm_profile

pytestmark = pytest.mark.slurm

STALL = 120  # the Slurm watch's stall timeout (place.Request: stall_timeout=120.0); the requeue comes long before


def test_requeue_is_named_at_once_not_a_stall(tmp_path, slurm):
    import os

    name = f"rq-{uuid.uuid4().hex[:8]}"
    prof = write_slurm_profile(tmp_path / "s.toml", name, env={"STANDIN_HANG_AT": "weights"})
    p = subprocess.Popen(DYNSPEC + ["launch", str(prof), "--no-preflight", "--json"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env={**os.environ, "DYNSPEC_DEBUG": "1"})
    try:
        logs = [tmp_path / f"{name}-n{r}.log" for r in range(2)]
        assert wait_for(lambda: p.poll() is not None or all(
            f.exists() and "Load weight begin" in f.read_text() for f in logs), 90), (
            slurm.queued(), sorted(str(x) for x in tmp_path.iterdir()), [f.read_text()[-500:] for f in logs if f.exists()])
        assert p.poll() is None, p.communicate()
        jid = slurm_record(name)["job_id"]
        time.sleep(2)  # quiet in weight loading, as a real job stuck there
        t0 = time.monotonic()
        slurm.run("scontrol", "requeue", jid)
        out, err = p.communicate(timeout=STALL)
        took = time.monotonic() - t0
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    doc = json.loads(out)
    assert p.returncode == 4, (doc["message"], err[-2000:])
    assert doc["verdict"] == "crashed" and doc["why"] == "requeued", doc
    msg = doc["message"]
    assert msg.startswith("Slurm requeued the job (restart 1) on n1,n2 before every node was live"), msg
    assert "stalled" not in msg and "\n" not in msg
    assert took < 15, took  # seconds, not the stall timeout's 120 s
    print(f"\nslurm requeue: job {jid} named requeued {took:.1f}s after scontrol requeue: {msg}")
    assert doc["cancelled"] and doc["gone"], doc  # the requeued job does not run again unwatched
    assert not slurm.queued()
    assert slurm_record(name)["restarts"] == 1


def test_node_failure_names_node_fail_and_the_node(tmp_path, slurm):
    """slurmd of n2 killed (SIGKILL) under a job hanging in weight loading: after SlurmdTimeout (30 s
    in the test slurm.conf) slurmctld marks n2 DOWN* "Not responding" and requeues the job (seen on
    22.05.8: PENDING BeginTime, Restarts=1 at about 30 s). The watch names NODE_FAIL and n2 then,
    not 120 s of quiet logs later. n2's slurmd is started again and the node returns (ReturnToService=2)."""
    import os
    import signal

    from tests.support.slurm import DAEMONS

    name = f"nf-{uuid.uuid4().hex[:8]}"
    prof = write_slurm_profile(tmp_path / "s.toml", name, env={"STANDIN_HANG_AT": "weights"})
    p = subprocess.Popen(DYNSPEC + ["launch", str(prof), "--no-preflight", "--json"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env={**os.environ, "DYNSPEC_DEBUG": "1"})
    i = len(slurm.procs) - 1  # slurmd -N n2: the last daemon start_cluster started
    assert slurm.procs[i].args[-2:] == ["-N", "n2"], slurm.procs[i].args
    try:
        logs = [tmp_path / f"{name}-n{r}.log" for r in range(2)]
        assert wait_for(lambda: p.poll() is not None or all(
            f.exists() and "Load weight begin" in f.read_text() for f in logs), 90)
        assert p.poll() is None, p.communicate()
        t0 = time.monotonic()
        slurm.procs[i].send_signal(signal.SIGKILL)
        slurm.procs[i].wait(10)
        out, err = p.communicate(timeout=STALL)
        took = time.monotonic() - t0
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        if slurm.procs[i].poll() is not None:
            slurm.procs[i] = subprocess.Popen([DAEMONS[1], "-D", "-f", str(slurm.conf), "-N", "n2"], env=slurm.env,
                                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                              start_new_session=True)
            assert wait_for(slurm.idle, 90, step=0.5), slurm.run("sinfo", "-N", check=False).stdout
    doc = json.loads(out)
    msg = doc["message"]
    assert p.returncode == 4 and doc["why"] == "requeued", (doc, err[-2000:])
    assert msg.startswith("NODE_FAIL (n2 DOWN*: Not responding): Slurm requeued the job (restart 1) on n1,n2"), msg
    assert doc["culprit"] == 1 and "stalled" not in msg
    assert took < 75, took  # SlurmdTimeout 30 s (+ slurmctld's ping period), not the 120 s stall timeout
    print(f"\nslurm node failure: named {took:.1f}s after slurmd n2 was killed: {msg}")
    assert not slurm.queued()
