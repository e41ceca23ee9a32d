"""A job that hits its time limit on the REAL test cluster: `[slurm] time = "1"` (one minute) and a
server that never gets past weight loading, so Slurm ends the job with TIMEOUT. `dynspec watch`
shows TIMEOUT beside the verdict (crashed, exit 4: the job ended before every node was live) and
nothing of the job stays queued.

Cost: Slurm's minimum time limit is one minute, and slurmctld looks for jobs over their limit
every 30 s (a fixed period), so the job ends 60-90 s after it starts, plus KillWait (5 s in the
test slurm.conf; OverTimeLimit is 0)."""
from __future__ import annotations

import json
import time
import uuid

import pytest

from tests.slurm.helpers import ds, slurm_record, write_slurm_profile

pytestmark = pytest.mark.slurm


def test_time_limit_ends_the_job_timeout_beside_the_verdict(tmp_path, slurm):
    name = f"st-{uuid.uuid4().hex[:8]}"
    prof = write_slurm_profile(tmp_path / "s.toml", name, env={"STANDIN_HANG_AT": "weights"}, slurm={"time": "1"})
    t0 = time.monotonic()
    r = ds("launch", str(prof), "--no-preflight", "--no-watch")
    assert r.returncode == 0, r.stderr
    jid = slurm_record(name)["job_id"]
    w = ds("watch", name, "--json", "--timeout", "170", timeout=200)
    took = time.monotonic() - t0
    doc = json.loads(w.stdout)
    assert w.returncode == 4, (doc["message"], w.stderr[-2000:])
    assert doc["job_id"] == jid and doc["job_state"] == "TIMEOUT", doc
    assert doc["verdict"] == "crashed" and doc["why"] == "job-ended"
    assert doc["message"].startswith("the job ended TIMEOUT")
    assert doc["message"].endswith("before every node was live; Slurm ended it at its time limit ([slurm] time)")
    assert 55 < took < 130, took  # at least the one-minute limit; at most the limit + Slurm's 30 s check + KillWait
    print(f"\nslurm time limit: job {jid} ended TIMEOUT after {took:.1f}s")
    assert not slurm.queued()
    assert slurm_record(name)["state"] == "TIMEOUT"
    t = ds("watch", name)  # the ended job, watched again: its state shown beside the verdict
    assert t.returncode == 4 and f"job {jid}, TIMEOUT" in t.stdout, t.stdout + t.stderr


def test_time_limit_after_every_node_was_live_is_not_before(tmp_path, slurm):
    """Live on both nodes, then the job runs into `[slurm] time`: watching it afterwards keeps the
    verdict reached (live, as for a local server that has since exited) and says the job ended
    TIMEOUT after that, never "before every node was live"."""
    name = f"sl-{uuid.uuid4().hex[:8]}"
    prof = write_slurm_profile(tmp_path / "s.toml", name, slurm={"time": "1"})
    r = ds("launch", str(prof), "--no-preflight", "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["verdict"] == "live", r.stderr[-2000:]
    jid = slurm_record(name)["job_id"]
    assert slurm.wait_empty(150), slurm.queued()  # Slurm ends it at its time limit
    w = ds("watch", name, "--json", "--timeout", "60")
    doc = json.loads(w.stdout)
    assert doc["job_state"] == "TIMEOUT" and doc["verdict"] == "live" and w.returncode == 0, (doc, w.stderr[-2000:])
    # (Slurm's exit code for the job, "(exit 0:15)": the SIGTERM of its time limit, may come between)
    assert doc["message"].startswith("every node was live; the job has since ended TIMEOUT"), doc["message"]
    assert doc["message"].endswith("; Slurm ended it at its time limit ([slurm] time)"), doc["message"]
    st = ds("status", jid)
    assert st.returncode == 0 and f"slurm job {jid} TIMEOUT" in st.stdout and "verdict live" in st.stdout, \
        st.stdout + st.stderr
