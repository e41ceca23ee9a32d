"""The placement of one server on the nodes of a Slurm job, submitted with sbatch on a login host
(run/slurm.py holds the job's files, the submission, the guard and the watch of every node)."""
from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator, Optional

from dynspec_cli.run import slurm as S

STILL_LISTED = "it is still listed by squeue"


def claims(raw: dict) -> bool:
    return raw.get("scheduler") == "slurm" or "slurm" in raw


class SlurmPlacement:
    def __init__(self, login, feature=None, *, sp=None, job=None, name: str = "", stall_timeout: float = 120.0,
                 pending_timeout: Optional[float] = None):
        self.login, self._feature, self.sp, self.job = login, feature, sp, job
        self.name = name or sp.prof.name
        self.ready_timeout = sp.prof.ready_timeout if sp is not None else None
        self.stall_timeout, self.pending_timeout = stall_timeout, pending_timeout
        self.guard: Optional[S.Guard] = None  # cancels the job should dynspec die while it answers for it
        self.rec: Optional[S.SlurmRecord] = None

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

    def start(self, pre, *, probe: bool, replace: bool) -> S.SlurmRecord:
        """Submit. A Ctrl-C during sbatch is held until the job id is recorded, then raised."""
        rec, self.guard, interrupted = S.launch(self.login, self.sp, self.feature, self.job)
        self.rec = rec
        if interrupted:
            raise KeyboardInterrupt
        return rec

    def watching(self, rec, *, keep: bool, detach: bool) -> None:
        if not rec.job_id:
            raise S.SlurmError(f"run {rec.name}: no Slurm job was submitted (dynspec stopped before sbatch answered)")
        if self.guard is None and not (detach or keep):  # re-attached: dynspec answers for the job again
            self.guard = S.Guard(self.login, rec.jobdir)

    def watch(self, rec, *, timeout, keep, on_update):
        return S.watch(self.login, rec, self.feature, timeout=timeout, pending_timeout=self.pending_timeout,
                       stall_timeout=self.stall_timeout, keep=keep, on_change=on_update)

    def started(self, since: float) -> Optional[S.SlurmRecord]:
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
        gone = S.cancel(self.login, rec.job_id)
        rec.cancelled_at = S.records.now()
        S.save(self.login, rec)
        return None if gone else STILL_LISTED

    def hint(self, verb: str, rec) -> str:
        from dynspec_cli.run.hints import command

        return command(verb, rec.name, host=self.login)

    def mark(self, rec, why: str) -> None:
        rec.unwatched = why
        S.save(self.login, rec)

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
        nrec = msgspec.structs.replace(S.node_record(rec, 0), name=rec.name)
        return Target(self.login, rec.python, f"http://{rec.addrs[0]}:{rec.port}", rec.logs[0], rec.offsets[0], nrec,
                      where=self)

    @property
    def job_id(self) -> Optional[str]:
        return self.rec.job_id if self.rec is not None else None

    def label(self, t) -> str:
        s = self.rec
        return f"{s.name} (Slurm job {s.job_id}, node {s.nodes[0]}) via {t.host.name} ({t.base})"

    def gone(self, t) -> Optional[str]:
        return S.server_gone(t.host, self.rec)

    def receipt_server(self) -> dict:
        """Node 0's server (rank 0, the HTTP endpoint) as node 0 sees it."""
        srec = self.rec
        pid = S.server_pid(self.login, srec, 0)
        seen = S.node_process(self.login, srec.job_id, srec.nodes[0], srec.python, pid) if pid else {}
        return {"pid": pid, "pgid": None, "leader_start": seen.get("start"), "cmdline_sha256": seen.get("cmdline_sha256"),
                "boot_id": seen.get("boot_id"), "python": srec.python, "node": srec.nodes[0]}

    def check_server(self, host, doc: dict) -> str:
        return gate_server(host, doc)

    def receipt_part(self) -> dict:
        s = self.rec
        return {"slurm": {"job_id": s.job_id, "nodes": list(s.nodes), "addrs": list(s.addrs), "conf": s.slurm_conf}}

    # what the commands show (report/slurm.py)
    def screen(self, out, json_out: bool):
        from dynspec_cli.report.slurm import Screen

        return Screen(out, json_out, self.login, self.sp)

    def render(self, out, result, json_out: bool) -> int:
        from dynspec_cli.report.slurm import render

        return render(out, self.login, result, json_out)

    def dry_run(self) -> int:
        from dynspec_cli.report.slurm import render_dry_run

        return render_dry_run(self.job)

    def end(self, rec, *, grace: float, out) -> int:
        """`dynspec stop`: scancel, confirmed gone from squeue (`grace` is Slurm's own KillWait)."""
        from dynspec_cli.report.slurm import render_stopped

        if not rec.job_id:
            S.remove_record(self.login, rec.name)
            return render_stopped(out, rec, was=False, gone=True, submitted=False)
        login = self.login
        was = S.queued(login, rec.job_id)
        gone = S.cancel(login, rec.job_id)
        if was:
            rec.cancelled_at = S.records.now()
        rec.state = S.job_state(login, rec.job_id).state
        S.save(login, rec)
        return render_stopped(out, rec, was=was, gone=gone, submitted=True)


@contextmanager
def open(req) -> Iterator[SlurmPlacement]:
    from dynspec_cli.knowledge.features import load_feature
    from dynspec_cli.run.profiles import single_engine

    sp = S.load(req.profile, env=req.env, sets=req.sets, name=req.name, host=req.host)
    feature = load_feature(sp.prof.feature)
    single_engine(sp.prof, feature, "a Slurm launch")
    with req.open_host(sp.prof.host) as host:
        login = S.on_cluster(host, sp.slurm.conf)
        job = S.prepare(login, sp, feature, probe=not req.extra.get("no_probe"),
                        preflight=not req.extra.get("no_preflight"))
        yield SlurmPlacement(login, feature, sp=sp, job=job, stall_timeout=req.stall_timeout,
                             pending_timeout=sp.slurm.pending_timeout or req.timeout)


def find(target, ref: str, req) -> Optional[tuple[SlurmPlacement, S.SlurmRecord]]:
    """A Slurm run recorded on the login host `target`, by name or job id."""
    rec = S.load_record(target, ref)
    if rec is None:
        return None
    p = SlurmPlacement(S.on_cluster(target, rec.slurm_conf), name=rec.name, stall_timeout=req.stall_timeout)
    p.rec = rec
    return p, rec


def owns_receipt(doc: dict) -> bool:
    return bool(doc.get("slurm"))


def gate_server(host, doc: dict) -> str:
    """The proven Slurm job still RUNNING on the same nodes (squeue/scontrol on the login host),
    still the run's job, and node 0's server the proven process (seen on node 0 through srun)."""
    from dynspec_cli.prove import receipt as receipts

    s, srv = doc["slurm"], doc.get("server") or {}
    jid, nodes, name = str(s.get("job_id")), list(s.get("nodes") or []), (doc.get("run") or {}).get("name")
    login = S.on_cluster(host, s.get("conf"))
    try:
        rec = S.load_record(host, name) if name else None
        if rec is not None and rec.job_id != jid:
            raise receipts.GateFailed("job", f"run {name} is now Slurm job {rec.job_id}, not the proven job {jid}; prove again")
        st = S.job_state(login, jid)
        if st.state != "RUNNING":
            raise receipts.GateFailed("job", f"Slurm job {jid} is {st.shown()}, not RUNNING: the proven server is gone")
        now_nodes = S.hostnames(login, st.nodelist)
        if now_nodes != nodes:
            raise receipts.GateFailed("nodes", f"Slurm job {jid} runs on {','.join(now_nodes) or '?'}, not on the proven "
                                      f"{','.join(nodes)}")
        pid = srv.get("pid")
        if not isinstance(pid, int) or srv.get("leader_start") is None or not srv.get("node"):
            raise receipts.GateFailed("process", "the receipt holds no server pid and start time on node 0; prove again")
        seen = S.node_process(login, jid, srv["node"], srv.get("python") or "python3", pid)
    except S.SlurmError as e:
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




def status_rows(target, names, feature_loader) -> list[dict]:
    """`dynspec status` rows for the Slurm runs recorded on a login host (the job's state as `pid`);
    `names`: only the runs of these names or job ids."""
    rows = []
    for rec in S.all_records(target):
        if names and rec.name not in names and rec.job_id not in names:
            continue
        if not rec.job_id:
            st = S.JobState("GONE", "no job was submitted")
        elif rec.cancelled_at is not None or (rec.state or "") in S.ENDED:
            st = S.JobState(rec.state or "CANCELLED")  # ended for good: no need to ask the scheduler
        else:
            try:
                # short: a record whose cluster is unreachable must not hold up the other runs' status
                st = S.job_state(S.on_cluster(target, rec.slurm_conf), rec.job_id, timeout=5)
            except S.SlurmError as e:
                st = S.JobState("UNKNOWN", str(e))
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
