"""The placement of one server on the nodes of a Slurm job, submitted with sbatch on a login host
(the `SlurmPlacement` the sequence drives, and the commands' answers for Slurm runs)."""
from __future__ import annotations

from typing import Optional

from dynspec_cli.place.slurm.guard import Guard
from dynspec_cli.place.slurm.record import SlurmRecord, node_record, remove_record, save
from dynspec_cli.place.slurm.scheduler import SlurmError, cancel, job_state, queued
from dynspec_cli.place.slurm.server import check_gate, node_process, server_gone, server_pid
from dynspec_cli.place.slurm.submit import submit
from dynspec_cli.place.slurm.watch import watch
from dynspec_cli.run import records

STILL_LISTED = "it is still listed by squeue"


class SlurmPlacement:
    def __init__(self, login, feature=None, *, sp=None, job=None, name: str = "", stall_timeout: float = 120.0,
                 pending_timeout: Optional[float] = None):
        self.login, self._feature, self.sp, self.job = login, feature, sp, job
        self.name = name or sp.prof.name
        self.ready_timeout = sp.prof.ready_timeout if sp is not None else None
        self.stall_timeout, self.pending_timeout = stall_timeout, pending_timeout
        self.guard: Optional[Guard] = None  # cancels the job should dynspec die while it answers for it
        self.rec: Optional[SlurmRecord] = None

    @property
    def feature(self):
        if self._feature is None:  # a recorded run's, loaded when it is watched
            from dynspec_cli.knowledge.features import load_feature

            self._feature = load_feature(self.rec.feature)
        return self._feature

    # the sequence's steps (place/sequence.py)
    def preflight(self):
        return None  # the preflight runs on every node, inside the job (the job ends itself when dead)

    def refuses(self, pre) -> bool:
        return False

    def start(self, pre, *, probe: bool, replace: bool) -> SlurmRecord:
        """Submit. A Ctrl-C during sbatch is held until the job id is recorded, then raised."""
        rec, self.guard, interrupted = submit(self.login, self.sp, self.feature, self.job)
        self.rec = rec
        if interrupted:
            raise KeyboardInterrupt
        return rec

    def watching(self, rec, *, keep: bool, detach: bool) -> None:
        if not rec.job_id:
            raise SlurmError(f"run {rec.name}: no Slurm job was submitted (dynspec stopped before sbatch answered)")
        if self.guard is None and not (detach or keep):  # re-attached: dynspec answers for the job again
            self.guard = Guard(self.login, rec.jobdir)

    def watch(self, rec, *, timeout, keep, on_update):
        return watch(self.login, rec, self.feature, timeout=timeout, pending_timeout=self.pending_timeout,
                     stall_timeout=self.stall_timeout, keep=keep, on_change=on_update)

    def started(self, since: float) -> Optional[SlurmRecord]:
        return self.rec

    def unresolved(self, rec) -> Optional[str]:
        if not rec.job_id:  # a second Ctrl-C abandoned sbatch: the guard cancels what it submitted
            self._end_guard(fire=True)
            return "sbatch was abandoned before it answered; the guard cancels what it submitted"
        return None

    def release(self, rec) -> None:
        self._end_guard(fire=False)

    def stop(self, rec) -> Optional[str]:
        self._end_guard(fire=True)
        gone = cancel(self.login, rec.job_id)
        rec.cancelled_at = records.now()
        save(self.login, rec)
        return None if gone else STILL_LISTED

    def hint(self, verb: str, rec) -> str:
        from dynspec_cli.run.hints import command

        return command(verb, rec.name, host=self.login)

    def mark(self, rec, why: str) -> None:
        rec.unwatched = why
        save(self.login, rec)

    def _end_guard(self, *, fire: bool) -> None:
        if self.guard is not None:
            self.guard.fire() if fire else self.guard.release()
            self.guard = None

    # what prove, gate and guard need of the run (prove/session.py Target.where, prove/receipt.py)
    def prove_target(self, rec):
        """Rank 0 serves HTTP, so the load generator runs on the login host against node 0's
        NodeAddr:port; node 0's log is read there (the shared filesystem)."""
        import msgspec

        from dynspec_cli.prove.plan import PlanError
        from dynspec_cli.prove.session import Target
        from dynspec_cli.run.hints import command

        if not rec.addrs:
            raise PlanError(f"Slurm run {rec.name} (job {rec.job_id}) has no nodes recorded yet: "
                            f"{command('watch', rec.name, host=self.login)} until it is live, then prove")
        self.rec = rec
        nrec = msgspec.structs.replace(node_record(rec, 0), name=rec.name)
        return Target(self.login, rec.python, f"http://{rec.addrs[0]}:{rec.port}", rec.logs[0], rec.offsets[0], nrec,
                      where=self)

    @property
    def job_id(self) -> Optional[str]:
        return self.rec.job_id if self.rec is not None else None

    def label(self, t) -> str:
        s = self.rec
        return f"{s.name} (Slurm job {s.job_id}, node {s.nodes[0]}) via {t.host.name} ({t.base})"

    def gone(self, t) -> Optional[str]:
        return server_gone(t.host, self.rec)

    def receipt_server(self) -> dict:
        """Node 0's server (rank 0, the HTTP endpoint) as node 0 sees it."""
        srec = self.rec
        pid = server_pid(self.login, srec, 0)
        seen = node_process(self.login, srec.job_id, srec.nodes[0], srec.python, pid) if pid else {}
        return {"pid": pid, "pgid": None, "leader_start": seen.get("start"), "cmdline_sha256": seen.get("cmdline_sha256"),
                "boot_id": seen.get("boot_id"), "python": srec.python, "node": srec.nodes[0]}

    def check_server(self, host, doc: dict) -> str:
        return check_gate(host, doc)

    def receipt_part(self) -> dict:
        s = self.rec
        return {"slurm": {"job_id": s.job_id, "nodes": list(s.nodes), "addrs": list(s.addrs), "conf": s.slurm_conf}}

    # what the commands show (report.py)
    def screen(self, out, json_out: bool):
        from dynspec_cli.place.slurm.report import Screen

        return Screen(out, json_out, self.login, self.sp)

    def render(self, out, result, json_out: bool) -> int:
        from dynspec_cli.place.slurm.report import render

        return render(out, self.login, result, json_out)

    def dry_run(self) -> int:
        from dynspec_cli.place.slurm.report import render_dry_run

        return render_dry_run(self.job)

    def end(self, rec, *, grace: float, out) -> int:
        """`dynspec stop`: scancel, confirmed gone from squeue (`grace` is Slurm's own KillWait)."""
        from dynspec_cli.place.slurm.report import render_stopped

        if not rec.job_id:
            remove_record(self.login, rec.name)
            return render_stopped(out, rec, was=False, gone=True, submitted=False)
        login = self.login
        was = queued(login, rec.job_id)
        gone = cancel(login, rec.job_id)
        if was:
            rec.cancelled_at = records.now()
        rec.state = job_state(login, rec.job_id).state
        save(login, rec)
        return render_stopped(out, rec, was=was, gone=gone, submitted=True)
