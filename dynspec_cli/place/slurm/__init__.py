"""The placement of one server on the nodes of a Slurm job, submitted with sbatch on a login host
(`host`: local or SSH) instead of being started by dynspec. The folder holds all of it:

    profile.py       the profile's [slurm] table
    job.py           the job's files: the batch script, the task every node runs (job.py's docstring)
    scheduler.py     Slurm's commands on the login host, and the job's state as they tell it
    submit.py        the submission (record and guard first, then sbatch)
    guard.py         nothing orphaned when dynspec itself dies
    record.py        the run record on the login host
    watch.py         every node's log judged beside the job's state
    server.py        node 0's server for prove, its receipt and the gate
    placement.py     the SlurmPlacement the sequence drives
    report.py        how a Slurm run is shown
    sbatch_check.py  the check of the user's own sbatch script (`dynspec preflight --sbatch`)

This file is the face the registry sees (place/protocol.py); it imports the rest when asked."""
from __future__ import annotations

from contextlib import contextmanager
from typing import TYPE_CHECKING, Iterator, Optional

import msgspec

from dynspec_cli.place.slurm.profile import SCHEDULER

if TYPE_CHECKING:
    from dynspec_cli.place.slurm.placement import SlurmPlacement
    from dynspec_cli.place.slurm.record import SlurmRecord

SELECTED_BY = f'scheduler = "{SCHEDULER}"'
SCRIPTS = ("sbatch",)


class Options(msgspec.Struct, frozen=True, kw_only=True):
    """What a launch may ask of a Slurm placement alone."""

    dry_run: bool = False  # --dry-run: print the job, submit nothing


def claims(raw: dict) -> bool:
    return raw.get("scheduler") == SCHEDULER or SCHEDULER in raw


@contextmanager
def open(req) -> Iterator["SlurmPlacement"]:
    from dynspec_cli.knowledge.features import load_feature
    from dynspec_cli.place.slurm.job import prepare
    from dynspec_cli.place.slurm.placement import SlurmPlacement
    from dynspec_cli.place.slurm.profile import load
    from dynspec_cli.place.slurm.scheduler import on_cluster
    from dynspec_cli.run.profiles import single_engine

    sp = load(req.profile, env=req.env, sets=req.sets, name=req.name, host=req.host)
    feature = load_feature(sp.prof.feature)
    single_engine(sp.prof, feature, "a Slurm launch")
    with req.open_host(sp.prof.host) as host:
        login = on_cluster(host, sp.slurm.conf)
        job = prepare(login, sp, feature, probe=req.probe, preflight=req.preflight)
        yield SlurmPlacement(login, feature, sp=sp, job=job, stall_timeout=req.stall_timeout,
                             pending_timeout=sp.slurm.pending_timeout or req.timeout)


def find(target, ref: str, req) -> Optional[tuple["SlurmPlacement", "SlurmRecord"]]:
    """A Slurm run recorded on the login host `target`, by name or job id."""
    from dynspec_cli.place.slurm.placement import SlurmPlacement
    from dynspec_cli.place.slurm.record import load_record
    from dynspec_cli.place.slurm.scheduler import on_cluster

    rec = load_record(target, ref)
    if rec is None:
        return None
    p = SlurmPlacement(on_cluster(target, rec.slurm_conf), name=rec.name, stall_timeout=req.stall_timeout)
    p.rec = rec
    return p, rec


def find_group(target, ref: str, req) -> None:
    return None  # a Slurm run is found on its login host by `find` (name or job id), its nodes are the job's


def owns_receipt(doc: dict) -> bool:
    return bool(doc.get("slurm"))  # (the receipt's part, SlurmPlacement.receipt_part)


def gate_server(host, doc: dict) -> str:
    """The proven Slurm job still RUNNING on the same nodes, node 0's server the proven process."""
    from dynspec_cli.place.slurm.server import check_gate

    return check_gate(host, doc)


def server_profile(ref: str, *, host=None, env=None):
    from dynspec_cli.knowledge.tables import ConfigError

    raise ConfigError(f"{ref}: a Slurm profile: preflight runs on every node inside the job (`dynspec launch` "
                      f"submits it); `dynspec preflight` judges one server: give its --python and flags after --")


def check_script(kind: str, path: str, json_out: bool) -> int:
    from dynspec_cli.place.slurm.report import check_sbatch

    return check_sbatch(path, json_out)


def status_rows(target, names, feature_loader) -> list[dict]:
    """`dynspec status` rows for the Slurm runs recorded on a login host (the job's state as `pid`);
    `names`: only the runs of these names or job ids."""
    from dynspec_cli.place.slurm.record import all_records
    from dynspec_cli.place.slurm.scheduler import ENDED, JobState, SlurmError, job_state, on_cluster

    rows = []
    for rec in all_records(target):
        if names and rec.name not in names and rec.job_id not in names:
            continue
        if not rec.job_id:
            st = JobState("GONE", "no job was submitted")
        elif rec.cancelled_at is not None or (rec.state or "") in ENDED:
            st = JobState(rec.state or "CANCELLED")  # ended for good: no need to ask the scheduler
        else:
            try:
                # short: a record whose cluster is unreachable must not hold up the other runs' status
                st = job_state(on_cluster(target, rec.slurm_conf), rec.job_id, timeout=5)
            except SlurmError as e:
                st = JobState("UNKNOWN", str(e))
        last = []
        for log in rec.logs:
            try:
                data = target.read_file(log, max(0, (target.size(log) or 0) - 4096))
                last += [ln for ln in data.decode("utf-8", "replace").splitlines() if ln.strip()][-1:]
            except (FileNotFoundError, PermissionError):
                last.append(f"(no log yet: {log})")
        rows.append({"name": rec.name, "host": rec.login, "pid": f"slurm job {rec.job_id} {st.shown()}",
                     "alive": not st.ended, "verdict": rec.verdict, "port": rec.port, "log": rec.logs[0],
                     "started_at": rec.submitted_at, "stopped_at": rec.cancelled_at, "last_lines": last,
                     "job_id": rec.job_id, "job_state": st.state, "job_reason": st.reason, "nodes": rec.nodes})
    return rows
