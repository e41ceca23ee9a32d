"""The server a Slurm job runs, for prove, its receipt and the gate: node 0's pid (node.sh writes
it before exec), that process as node 0 itself sees it (through a step of the job), and whether
the job still serves; the gate's check of all three against the receipt."""
from __future__ import annotations

import json
from typing import Any, Optional

from dynspec_cli import inject
from dynspec_cli.place.slurm.record import SlurmRecord, load_record
from dynspec_cli.place.slurm.scheduler import SlurmError, hostnames, job_state, on_cluster, one_line, run
from dynspec_cli.transport import Host


def server_pid(login: Host, rec: SlurmRecord, rank: int = 0) -> Optional[int]:
    """The pid node.sh wrote (its own, kept by exec) before starting the server on node `rank`."""
    try:
        text = login.read_file(f"{rec.jobdir}/server-n{rank}.pid").decode("ascii", "replace").strip()
    except (FileNotFoundError, PermissionError):
        return None
    return int(text) if text.isdigit() else None


def node_process(login: Host, job_id: str, node: str, python: str, pid: int) -> dict[str, Any]:
    """pid on `node` as that node sees it, through a step of the job itself (`srun --overlap`):
    alive, start (clock ticks since boot), cmdline_sha256, boot_id."""
    res = run(login, ["srun", f"--jobid={job_id}", "--overlap", f"--nodelist={node}", "--nodes=1", "--ntasks=1",
                       "--quiet", python, "-", "process", str(int(pid))], timeout=60,
               input=inject.program("hostcheck.py").encode("utf-8"))  # (srun hands its stdin to the task)
    try:
        doc = json.loads(res.text.strip().splitlines()[-1])
    except (ValueError, IndexError):
        raise SlurmError(f"srun on {node} in job {job_id}: {one_line(res)}") from None
    return {**doc, "node": node}


def server_gone(login: Host, rec: SlurmRecord) -> Optional[str]:
    """Why the run's server is not serving any more (None: the job still runs)."""
    st = job_state(login, rec.job_id)
    return None if st.state == "RUNNING" else f"Slurm job {rec.job_id} is {st.shown()}"


def check_gate(host: Host, doc: dict) -> str:
    """The proven Slurm job still RUNNING on the same nodes (squeue/scontrol on the login host),
    still the run's job, and node 0's server the proven process (seen on node 0 through srun)."""
    from dynspec_cli.prove import receipt as receipts

    s, srv = doc["slurm"], doc.get("server") or {}
    jid, nodes, name = str(s.get("job_id")), list(s.get("nodes") or []), (doc.get("run") or {}).get("name")
    login = on_cluster(host, s.get("conf"))
    try:
        rec = load_record(host, name) if name else None
        if rec is not None and rec.job_id != jid:
            raise receipts.GateFailed("job", f"run {name} is now Slurm job {rec.job_id}, not the proven job {jid}; prove again")
        st = job_state(login, jid)
        if st.state != "RUNNING":
            raise receipts.GateFailed("job", f"Slurm job {jid} is {st.shown()}, not RUNNING: the proven server is gone")
        now_nodes = hostnames(login, st.nodelist)
        if now_nodes != nodes:
            raise receipts.GateFailed("nodes", f"Slurm job {jid} runs on {','.join(now_nodes) or '?'}, not on the proven "
                                      f"{','.join(nodes)}")
        pid = srv.get("pid")
        if not isinstance(pid, int) or srv.get("leader_start") is None or not srv.get("node"):
            raise receipts.GateFailed("process", "the receipt holds no server pid and start time on node 0; prove again")
        seen = node_process(login, jid, srv["node"], srv.get("python") or "python3", pid)
    except SlurmError as e:
        raise receipts.GateFailed("job", str(e)) from None
    if not seen.get("alive"):
        raise receipts.GateFailed("process", f"the proven server (pid {pid}) is not running on {srv['node']}")
    if srv.get("boot_id") and seen.get("boot_id") != srv.get("boot_id"):
        raise receipts.GateFailed("process", f"{srv['node']} rebooted since the proof")
    if seen.get("start") != srv.get("leader_start"):
        raise receipts.GateFailed("process", f"pid {pid} on {srv['node']} is another process than the proven server "
                                    f"(start time {seen.get('start')} != {srv.get('leader_start')})")
    if seen.get("cmdline_sha256") != srv.get("cmdline_sha256"):
        raise receipts.GateFailed("cmdline", f"the command line of pid {pid} on {srv['node']} differs from the proven server's")
    return f"pid {pid} on {srv['node']}, Slurm job {jid}"
