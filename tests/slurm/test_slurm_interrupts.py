"""Nothing orphaned at the worst moments of a Slurm launch (REAL test cluster): a signal while sbatch
has just submitted the job and dynspec does not know its id yet, and an SSH drop to the login host
while the nodes load (dynspec's own guard must not cancel a job dynspec still watches)."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from tests.run.helpers import DYNSPEC, wait_for
from tests.slurm.helpers import ds, slurm_record, write_slurm_profile

pytestmark = pytest.mark.slurm


def slow_sbatch(d: Path, mark: Path) -> Path:
    """The real sbatch, then a pause before its answer reaches dynspec: the job is in squeue, its
    id not yet in dynspec's hands (the moment that orphaned 17 of 32 jobs)."""
    d.mkdir()
    (d / "sbatch").write_text(f"#!/bin/sh\n/usr/bin/sbatch \"$@\"; rc=$?\ntouch {mark}\nsleep 2\nexit $rc\n")
    (d / "sbatch").chmod(0o755)
    return d


def job_of(slurm, name: str) -> str:
    ids = slurm.run("squeue", "-h", "-n", f"dynspec-{name}", "-o", "%i").stdout.split()
    assert len(ids) == 1, ids
    return ids[0]


@pytest.mark.parametrize("how", ["ctrl-c", "ctrl-c-detach", "kill-9"])
def test_signal_while_sbatch_answers(tmp_path, slurm, how):
    name = f"si-{uuid.uuid4().hex[:8]}"
    mark = tmp_path / "submitted"
    bindir = slow_sbatch(tmp_path / "bin", mark)
    prof = write_slurm_profile(tmp_path / "s.toml", name, env={"STANDIN_HANG_AT": "weights"})
    proc = subprocess.Popen(DYNSPEC + ["launch", str(prof), "--no-preflight"]
                            + (["--detach"] if how == "ctrl-c-detach" else []),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PATH": f"{bindir}:{os.environ['PATH']}"})
    try:
        assert wait_for(mark.exists, 60)
        jid = job_of(slurm, name)
        proc.send_signal(signal.SIGKILL if how == "kill-9" else signal.SIGINT)
        out, err = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            proc.kill()
    if how == "kill-9":
        # the guard (started before sbatch) finds dynspec gone and the id sbatch wrote: cancelled
        assert slurm.wait_empty(30), f"dynspec was killed during sbatch and its job stayed: {slurm.queued()}"
        s = ds("stop", name)  # the record, written before sbatch, leads to the job
        assert s.returncode == 0 and f"already ended: {name} (Slurm job {jid})" in s.stdout, s.stdout + s.stderr
        return
    assert proc.returncode == 130, err[-2000:]
    assert f"interrupted: submitting {name}" in err  # the Ctrl-C was seen, and said so at once
    assert slurm_record(name)["job_id"] == jid
    if how == "ctrl-c-detach":
        assert f"detached: job {jid} keeps running; re-attach with: dynspec watch {name}" in out
        assert jid in [q.split()[0] for q in slurm.queued()]
        assert ds("stop", name).returncode == 0
    else:
        assert f"interrupted: cancelled job {jid}; it is gone from squeue" in out, out + err
    assert not slurm.queued()


@pytest.mark.ssh
def test_ssh_drop_while_loading_does_not_cancel_the_job(tmp_path, slurm, ssh_lab):
    """The login host over the real sshd; every sshd session is killed once node 0 is loading
    weights. dynspec reconnects and the job stays: live, still RUNNING, not cancelled."""
    name = f"sd-{uuid.uuid4().hex[:8]}"
    prof = write_slurm_profile(tmp_path / "s.toml", name, env={"STANDIN_PACE": "0.04"},
                               slurm={"conf": str(slurm.conf)})
    prof.write_text(prof.read_text().replace('host = "local"', 'host = "dut"'))
    ssh = ["--ssh-config", str(ssh_lab.ssh_config), "--known-hosts", str(ssh_lab.known_hosts)]
    proc = subprocess.Popen(DYNSPEC + ["launch", str(prof), "--no-preflight", "--json", *ssh],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    log0 = tmp_path / f"{name}-n0.log"
    try:
        assert wait_for(lambda: log0.exists() and "Load weight begin" in log0.read_text(errors="replace"), 90)
        assert "The server is fired up" not in log0.read_text() and proc.poll() is None  # still loading
        assert ssh_lab.target.kill_sessions()
        out, err = proc.communicate(timeout=150)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert out.strip(), f"exit {proc.returncode}, no JSON on stdout; stderr: {err[-3000:]}"
    doc = json.loads(out)
    try:
        assert proc.returncode == 0, (doc["message"], err[-2000:])
        assert doc["verdict"] == "live" and not doc["cancelled"]
        jid = doc["job_id"]
        assert any(q.split()[:2] == [jid, "RUNNING"] for q in slurm.queued())
        time.sleep(3)  # (the guard checks every second: it would have fired by now)
        assert any(q.split()[:2] == [jid, "RUNNING"] for q in slurm.queued())
        assert "scancel" not in (Path(doc_jobdir(name)) / "guard.log").read_text()
    finally:
        ds("stop", name, "--host", "dut", *ssh)
        (Path(os.environ["DYNSPEC_SUITE_HOME"]) / "runs" / f"{name}.slurm.json").unlink(missing_ok=True)
    assert not slurm.queued()


def doc_jobdir(name: str) -> str:
    return json.loads((Path(os.environ["DYNSPEC_SUITE_HOME"]) / "runs" / f"{name}.slurm.json").read_text())["jobdir"]
