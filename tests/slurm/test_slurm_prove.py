"""`dynspec prove` and `dynspec gate` on a Slurm run, on the REAL two-node test cluster
(tests/support/slurm.py) with the GPU-server stand-in on both nodes: the load goes from the login
host to node 0's NodeAddr:port, the receipt keeps the job id, the nodes and node 0's server
process, and the gate fails once the job is cancelled."""
from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from tests.slurm.helpers import ds, slurm_record, write_slurm_profile

pytestmark = pytest.mark.slurm

FAST = ["--duration", "1", "--max-new-tokens", "24"]
FLAGS = {"speculative-disable-batch-threshold": 3, "decode-log-interval": 2, "enable-metrics": True}


def test_prove_by_job_id_gate_by_name_and_job_id_then_cancelled_job_fails_the_gate(tmp_path, slurm):
    name = f"sp-{uuid.uuid4().hex[:8]}"
    patched = tmp_path / "eagle_worker_v2.py"
    patched.write_text("# patched: Dynamic speculation disable enabled: threshold=%d\n")
    prof = write_slurm_profile(tmp_path / "s.toml", name, flags=FLAGS)
    r = ds("launch", str(prof), "--no-preflight", "--json")
    assert r.returncode == 0, r.stderr[-3000:]
    rec = slurm_record(name)
    jid = rec["job_id"]
    try:
        p = ds("prove", jid, *FAST, "--patched-file", str(patched), "--json", timeout=240)
        assert p.returncode == 0, (p.stdout[-2000:], p.stderr[-3000:])
        doc = json.loads(p.stdout)
        assert doc["outcome"] == "proven"
        # steps 1,N,N+1,2N with N=3 from the run's command line; speculation off above it
        assert [s["concurrency"] for s in doc["steps"]] == [1, 3, 4, 6]
        assert doc["target"]["url"] == f"http://127.0.0.1:{rec['port']}"  # n1's NodeAddr, from the login host
        assert doc["target"]["job_id"] == jid and doc["target"]["log"] == rec["logs"][0]
        runs = Path.home() / ".dynspec" / "runs"
        assert doc["receipt"] == str(runs / f"{name}.receipt.json")  # next to NAME.slurm.json
        rc = json.loads((runs / f"{name}.receipt.json").read_text())
        assert rc["slurm"]["job_id"] == jid and rc["slurm"]["nodes"] == ["n1", "n2"]
        srv = rc["server"]
        assert srv["node"] == "n1"
        # the recorded pid is node 0's server itself: the stand-in, started with --node-rank 0
        argv = Path(f"/proc/{srv['pid']}/cmdline").read_bytes().split(b"\0")
        assert b"fake_sglang_server" in b" ".join(argv) and argv[argv.index(b"--node-rank") + 1] == b"0"
        assert srv["leader_start"] == Path(f"/proc/{srv['pid']}/stat").read_text().rsplit(")", 1)[1].split()[19]
        g = ds("gate", name)
        assert g.returncode == 0, g.stderr
        assert f"pid {srv['pid']} on n1, Slurm job {jid}" in g.stdout
        g = ds("gate", jid, "--json")
        assert g.returncode == 0 and json.loads(g.stdout)["ok"] is True, g.stderr
        # a receipt for other nodes, or for another process with that pid, is refused while the job runs
        other = tmp_path / "other.receipt.json"
        other.write_text(json.dumps({**rc, "slurm": {**rc["slurm"], "nodes": ["n2", "n1"]}}))
        g = ds("gate", str(other))
        assert g.returncode == 1 and f"Slurm job {jid} runs on n1,n2, not on the proven n2,n1" in g.stderr, g.stderr
        other.write_text(json.dumps({**rc, "server": {**srv, "leader_start": "1"}}))
        g = ds("gate", str(other))
        assert g.returncode == 1 and f"pid {srv['pid']} on n1 is another process than the proven server" in g.stderr
    finally:
        s = ds("stop", name)
    assert s.returncode == 0, s.stderr
    g = ds("gate", name)
    assert g.returncode == 1
    lines = g.stderr.strip().splitlines()
    assert len(lines) == 1 and f"Slurm job {jid} is CANCELLED" in lines[0] and "not RUNNING" in lines[0], g.stderr
    assert not slurm.queued()


def test_prove_of_an_unknown_slurm_job_id_is_one_line_exit_2(slurm):
    r = ds("prove", "987654")
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1 and "no run named '987654'" in lines[0], r.stderr


def test_prove_of_a_pending_job_is_one_line_exit_2_and_gate_finds_no_receipt(tmp_path, slurm):
    name = f"sq-{uuid.uuid4().hex[:8]}"
    prof = write_slurm_profile(tmp_path / "s.toml", name, slurm={"extra": ["--begin=now+1hour"]})
    r = ds("launch", str(prof), "--no-preflight", "--no-watch")
    assert r.returncode == 0, r.stderr
    jid = slurm_record(name)["job_id"]
    try:
        p = ds("prove", name, *FAST)
        lines = p.stderr.strip().splitlines()
        assert p.returncode == 2 and len(lines) == 1, p.stderr
        assert f"Slurm run {name} (job {jid}) has no nodes recorded yet" in lines[0]
        g = ds("gate", jid)  # never proven: no receipt (the job id names the run's receipt), exit 2
        assert g.returncode == 2 and f"{name}.receipt.json" in g.stderr and "run dynspec prove first" in g.stderr
    finally:
        s = ds("stop", jid)
    assert s.returncode == 0 and not slurm.queued(), s.stderr
