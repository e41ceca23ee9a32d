"""No secret on a command line or in a job file during a Slurm launch (REAL test cluster): the
profile's [env] (HF_TOKEN) and the server's --api-key travel in the job's environment (sbatch's
shell reads them from stdin). Every process's command line on the machine (the nodes are slurmd's
here) is sampled for the whole launch, preflight on every node included."""
from __future__ import annotations

import json
import os
import threading
import uuid
from pathlib import Path

import pytest

from tests.slurm.helpers import ds, slurm_record, write_slurm_profile

pytestmark = pytest.mark.slurm


def sample_cmdlines(seen: dict, stop: threading.Event) -> None:
    """Every distinct command line of every process, until stop (as `ps` would show them)."""
    me = str(os.getpid())
    while not stop.is_set():
        for d in os.listdir("/proc"):
            if d.isdigit() and d != me:
                try:
                    cmd = Path(f"/proc/{d}/cmdline").read_bytes()
                except OSError:
                    continue
                if cmd:
                    seen.setdefault(cmd.replace(b"\0", b" ").decode(errors="replace"), d)


def test_env_and_api_key_never_on_a_command_line_nor_in_job_files(tmp_path, slurm):
    from tests.multinode.helpers import fake_sglang, python_with

    name = f"sec-{uuid.uuid4().hex[:8]}"
    token, key = f"hf_{uuid.uuid4().hex}", f"sk-{uuid.uuid4().hex}"
    py = python_with(fake_sglang(tmp_path / "site"), tmp_path / "py")  # preflight on each node: reachable
    prof = write_slurm_profile(tmp_path / "s.toml", name, python=str(py), env={"HF_TOKEN": token},
                               flags={"api-key": key})
    seen: dict = {}
    stop = threading.Event()
    sampler = threading.Thread(target=sample_cmdlines, args=(seen, stop), daemon=True)
    sampler.start()
    try:
        r = ds("launch", str(prof), "--json")
    finally:
        stop.set()
        sampler.join(10)
    doc = json.loads(r.stdout)
    try:
        assert r.returncode == 0, (doc["message"], r.stderr[-2000:])
        assert [p["verdict"] for p in doc["preflight"]] == ["reachable", "reachable"]
        # the sampler saw the nodes' preflight and the servers themselves
        assert any(" preflight " in c and "--feature" in c for c in seen)
        servers = [c for c in seen if "fake_sglang_server" in c and "--node-rank" in c]
        assert servers
        assert not [c for c in seen if token in c]  # HF_TOKEN: on no command line at all
        # --api-key: only on the server's own argv (sglang takes it nowhere else), never preflight's or a shell's
        assert all(c in servers for c in seen if key in c)
        assert all(f"--api-key {key}" in c for c in servers if "--api-key" in c)
        rec = slurm_record(name)
        jobdir = Path(rec["jobdir"])
        files = [p for p in jobdir.iterdir() if p.is_file()]
        assert {"job.sbatch", "node.sh", "job.log"} <= {p.name for p in files}
        for f in files + [Path(x) for x in rec["logs"]]:
            lines = f.read_text(errors="replace").splitlines()
            assert not [ln for ln in lines if token in ln], f
            # the key only where sglang itself logs it (its `server_args=ServerArgs(..., api_key='...')` line)
            assert not [ln for ln in lines if key in ln and "server_args=ServerArgs(" not in ln], f
        # ... and it reached the servers, from the job's environment
        for rank in (0, 1):
            pid = (jobdir / f"server-n{rank}.pid").read_text().strip()
            assert f"HF_TOKEN={token}".encode() in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        raw = (Path.home() / ".dynspec" / "runs" / f"{name}.slurm.json").read_text()
        assert token not in raw and key not in raw
        assert rec["argv"][rec["argv"].index("--api-key") + 1] == "***"
    finally:
        assert ds("stop", name).returncode == 0
    assert not slurm.queued()
