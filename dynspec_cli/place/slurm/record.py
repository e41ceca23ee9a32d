"""A Slurm run's record, `~/.dynspec/runs/<name>.slurm.json` on the login host: the job id, the
nodes and their addresses, the logs and their offsets. `watch/status/stop NAME` (or the job id)
read it; it is saved before sbatch answers, so a dynspec killed at any moment leaves it."""
from __future__ import annotations

from typing import Optional

import msgspec

from dynspec_cli.run import records
from dynspec_cli.transport import Host


class SlurmRecord(msgspec.Struct):
    name: str
    job_id: str
    login: str
    jobdir: str
    nnodes: int
    logs: list[str]
    offsets: list[int]
    preflight_files: list[str]
    batch_log: str
    port: int
    python: str
    feature: str
    submitted_at: float
    patched_class: list[str] = []
    sglang_version: Optional[str] = None
    nodes: list[str] = []
    addrs: list[str] = []
    dist_init_addr: Optional[str] = None
    state: Optional[str] = None
    verdict: Optional[str] = None
    cancelled_at: Optional[float] = None
    argv: list[str] = []
    slurm_conf: Optional[str] = None
    restarts: int = 0  # the job's restart count already reported (a requeue is named once)
    unwatched: Optional[str] = None  # why the launch that owned it stopped watching it, leaving it queued or running


def record_path(login: Host, name: str) -> str:
    return f"{records.expand(login, records.RUNS_DIR)}/{name}.slurm.json"


def save(login: Host, rec: SlurmRecord) -> None:
    """Atomic (Host.write_file: a temp file renamed once complete): dynspec killed mid-write
    leaves the previous record, never a cut-off one."""
    login.run(["mkdir", "-p", records.expand(login, records.RUNS_DIR)], check=True, timeout=30, idempotent=True)
    login.write_file(record_path(login, rec.name), msgspec.json.encode(rec), mode=0o600)


def remove_record(login: Host, name: str) -> None:
    try:
        login.remove(record_path(login, name))
    except OSError:
        pass


def _job_id(login: Host, rec: SlurmRecord) -> SlurmRecord:
    """A record saved before sbatch answered: the job id the login host wrote into the job dir."""
    if not rec.job_id:
        try:
            rec.job_id = login.read_file(f"{rec.jobdir}/job.id").decode("ascii", "replace").strip()
        except (FileNotFoundError, PermissionError):
            pass
    return rec


def load_record(login: Host, ref: str) -> Optional[SlurmRecord]:
    """By run name, or by job id (the newest record of that job)."""
    try:
        return _job_id(login, msgspec.json.decode(login.read_file(record_path(login, ref)), type=SlurmRecord))
    except FileNotFoundError:
        pass
    except msgspec.DecodeError:
        return None
    if ref.isdigit():
        for rec in reversed(all_records(login)):  # job ids restart with a new cluster: the newest
            if rec.job_id == ref:
                return rec
    return None


def all_records(login: Host) -> list[SlurmRecord]:
    res = login.run(["sh", "-c", 'for f in "$1"/*.slurm.json; do [ -f "$f" ] && cat "$f" && echo; done', "sh",
                     records.expand(login, records.RUNS_DIR)], timeout=30)
    out = []
    for line in res.text.splitlines():
        if line.strip():
            try:
                out.append(_job_id(login, msgspec.json.decode(line, type=SlurmRecord)))
            except msgspec.DecodeError:
                continue
    return sorted(out, key=lambda r: r.submitted_at)


def node_record(rec: SlurmRecord, rank: int) -> records.RunRecord:
    """A run record for one node's log (what the judging pipeline reads; no pid: Slurm owns the
    processes, the job state tells whether they run)."""
    return records.RunRecord(name=f"{rec.name}-n{rank}", host=rec.login, pid=0, pgid=0, argv=rec.argv, env={},
                             log=rec.logs[rank], log_offset=rec.offsets[rank], port=rec.port,
                             started_at=rec.submitted_at, feature=rec.feature, patched_class=rec.patched_class,
                             sglang_version=rec.sglang_version, python=rec.python)
