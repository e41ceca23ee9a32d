"""The commands' Slurm side: `launch`, `watch`, `stop`, `status` (and `group launch`) hand a
profile with `scheduler = "slurm"`, or a Slurm run (by name or job id), to these functions. Each
returns the exit code."""
from __future__ import annotations

import sys
from typing import Optional

from dynspec_cli.cli.options import errors as _errors
from dynspec_cli.cli.options import out as _out


def _escape(s: str) -> str:
    from rich.markup import escape

    return escape(s)


class _Shown:
    """One line whenever the job's state or a node's verdict changes (plain lines: also in CI logs)."""

    def __init__(self, out, enabled: bool):
        self.out, self.enabled = out, enabled

    def __call__(self, rec, st, states) -> None:
        if not self.enabled:
            return
        nodes = "  ".join(f"n{s.rank}:{s.verdict}{'/ready' if s.ready else ''}" for s in states)
        where = f" on {','.join(rec.nodes)}" if rec.nodes else ""
        self.out.print(f"job {rec.job_id}: {_escape(st.shown())}{where}  {nodes}")


def _open(login: str, ssh_config, known_hosts, accept_new, python: str = "python3"):
    from dynspec_cli.cli import runs

    return runs.open_target(login, ssh_config, known_hosts, accept_new, python)


def launch(profile: str, *, host: Optional[str], env, set_, name: Optional[str], keep: bool, detach: bool,
           no_watch: bool, no_preflight: bool, no_probe: bool, timeout: Optional[float], stall_timeout: float = 120.0,
           dry_run: bool = False, json_out: bool = False, ssh_config=None, known_hosts=None,
           accept_new_host_key: bool = False) -> int:
    from dynspec_cli.knowledge.features import load_feature
    from dynspec_cli.run import slurm as S
    from dynspec_cli.run.profiles import single_engine

    with _errors():
        sp = S.load(profile, env=env, sets=set_, name=name, host=host)
        feature = load_feature(sp.prof.feature)
        single_engine(sp.prof, feature, "a Slurm launch")
        out = _out(json_out)
        with _open(sp.prof.host, ssh_config, known_hosts, accept_new_host_key) as host:
            login = S.on_cluster(host, sp.slurm.conf)
            job = S.prepare(login, sp, feature, probe=not no_probe, preflight=not no_preflight)
            if dry_run:
                sys.stdout.write(f"# {job.jobdir}/job.sbatch\n{job.batch}\n# {job.jobdir}/node.sh (every task)\n"
                                 f"{job.node_sh}# the job's environment, given to sbatch on its stdin (secrets shown as ***)\n"
                                 f"{job.env_shown}")
                return 0
            rec, guard, interrupted = S.launch(login, sp, feature, job)
            try:
                if interrupted:
                    return _interrupted(login, rec, out, detach, guard)
                if json_out and no_watch:
                    from dynspec_cli.report.jsonout import emit

                    emit({"name": rec.name, "job_id": rec.job_id, "logs": rec.logs, "jobdir": rec.jobdir})
                elif not json_out:
                    out.print(f"[bold]submitted[/] {rec.name}: Slurm job {rec.job_id} ({sp.slurm.nodes} node(s)), "
                              f"logs {', '.join(rec.logs)}; job log {rec.batch_log}")
                if no_watch:
                    guard.release()
                    if not json_out:
                        from dynspec_cli.run.hints import command

                        out.print(f"  watch it to its verdict: {command('watch', rec.name, host=host)}\n"
                                  f"  stop it: {command('stop', rec.name, host=host)}", markup=False)
                    return 0
            except BaseException:
                guard.fire()
                raise
            return _watch(login, rec, feature, out, json_out, timeout=timeout or sp.prof.ready_timeout,
                          pending_timeout=sp.slurm.pending_timeout or timeout, stall_timeout=stall_timeout,
                          keep=keep, detach=detach, guard=guard)


def _watch(login, rec, feature, out, json_out, *, timeout, pending_timeout, stall_timeout, keep, detach,
           guard=None) -> int:
    from dynspec_cli.run import slurm as S

    try:
        code = _watched(login, rec, feature, out, json_out, timeout=timeout, pending_timeout=pending_timeout,
                        stall_timeout=stall_timeout, keep=keep, detach=detach)
    except BaseException:
        if guard is not None:  # watching failed: nobody would watch the job, so it does not stay
            guard.fire()
            S.cancel(login, rec.job_id)
        raise
    if guard is not None:
        guard.release()  # every path above either cancelled the job or leaves it running on purpose
    return code


def _interrupted(login, rec, out, detach, guard=None) -> int:
    """Ctrl-C: the job is cancelled (confirmed gone from squeue), or left with --detach; either way
    its id is printed."""
    from dynspec_cli.run import slurm as S

    if detach:
        if guard is not None:
            guard.release()
        from dynspec_cli.run.hints import command

        out.print(f"\ndetached: job {rec.job_id} keeps running; re-attach with: "
                  f"{command('watch', rec.name, host=login)}", markup=False)
        return 130
    if guard is not None:
        guard.fire()
    gone = S.cancel(login, rec.job_id)
    rec.cancelled_at = S.records.now()
    S.save(login, rec)
    out.print(f"\ninterrupted: cancelled job {rec.job_id}; "
              f"{'it is gone from squeue' if gone else 'it is still listed by squeue'}")
    return 130


def _watched(login, rec, feature, out, json_out, *, timeout, pending_timeout, stall_timeout, keep, detach) -> int:
    from dynspec_cli.run import slurm as S

    try:
        o = S.watch(login, rec, feature, timeout=timeout, pending_timeout=pending_timeout,
                    stall_timeout=stall_timeout, keep=keep, on_change=_Shown(out, not json_out))
    except KeyboardInterrupt:
        return _interrupted(login, rec, out, detach)
    if json_out:
        from dynspec_cli.report.jsonout import emit

        emit(o.to_json(rec))
    else:
        from dynspec_cli.report.console import MARK

        mark, colour = MARK.get(o.verdict, ("?", "yellow"))
        out.print(f"[{colour}]{mark} {o.verdict}[/] {rec.name} (job {rec.job_id}, {_escape(o.job.shown())}): "
                  f"{_escape(o.message)}")
        for s in o.states:
            if s.evidence:
                out.print(f"    node {s.rank} ({s.host}): {s.verdict}: [dim]{_escape(s.evidence[:200])}[/]")
        if o.cancelled:
            out.print(f"cancelled job {rec.job_id}: {'gone from squeue' if o.gone else 'STILL in squeue'}")
    if o.why == "pending":
        sys.stderr.write(f"dynspec: error: {o.message}; cancelled\n")
    elif o.why == "preflight-failed":
        sys.stderr.write(f"dynspec: error: {o.message}\n")
    return o.exit_code


def find(host: str, ref: str, ssh_config, known_hosts, accept_new) -> bool:
    """Whether `ref` names a Slurm run (by name or job id) on the login host."""
    from dynspec_cli.run import slurm as S

    try:
        with _open(host, ssh_config, known_hosts, accept_new) as login:
            return S.load_record(login, ref) is not None
    except Exception:  # noqa: BLE001 - not reachable: the ordinary command reports it
        return False


def _record(h, ref: str):
    from dynspec_cli.run import slurm as S

    rec = S.load_record(h, ref)
    if rec is None:
        raise S.SlurmError(f"no Slurm run {ref!r} on {h.name}")
    return rec


def watch(ref: str, *, host: str, keep: bool, detach: bool, timeout: Optional[float], stall_timeout: float = 120.0,
          json_out: bool = False, ssh_config=None, known_hosts=None, accept_new_host_key: bool = False) -> int:
    from dynspec_cli.knowledge.features import load_feature
    from dynspec_cli.run import slurm as S

    with _errors():
        out = _out(json_out)
        with _open(host, ssh_config, known_hosts, accept_new_host_key) as h:
            rec = _record(h, ref)
            if not rec.job_id:
                raise S.SlurmError(f"run {rec.name}: no Slurm job was submitted (dynspec stopped before sbatch "
                                   f"answered)")
            login = S.on_cluster(h, rec.slurm_conf)
            guard = None if detach or keep else S.Guard(login, rec.jobdir)
            return _watch(login, rec, load_feature(rec.feature), out, json_out, timeout=timeout, pending_timeout=None,
                          stall_timeout=stall_timeout, keep=keep, detach=detach, guard=guard)


def stop(ref: str, *, host: str, ssh_config=None, known_hosts=None, accept_new_host_key: bool = False) -> int:
    from dynspec_cli.run import slurm as S

    with _errors():
        with _open(host, ssh_config, known_hosts, accept_new_host_key) as h:
            rec = _record(h, ref)
            if not rec.job_id:
                S.remove_record(h, rec.name)
                _out(False).print(f"nothing to stop: {rec.name} submitted no Slurm job (dynspec stopped before "
                                  f"sbatch answered); its record is removed")
                return 0
            login = S.on_cluster(h, rec.slurm_conf)
            was = S.queued(login, rec.job_id)
            gone = S.cancel(login, rec.job_id)
            if was:
                rec.cancelled_at = S.records.now()
            rec.state = S.job_state(login, rec.job_id).state
            S.save(login, rec)
    if not gone:
        sys.stderr.write(f"dynspec: error: job {rec.job_id} ({rec.name}) is still listed by squeue after scancel\n")
        return 1
    _out(False).print(f"{'cancelled' if was else 'already ended'}: {rec.name} (Slurm job {rec.job_id}); "
                      f"nothing of it is left in squeue")
    return 0


def status_rows(target, names=None) -> list[dict]:
    """`dynspec status` rows for the Slurm runs recorded on a login host (the job's state as `pid`);
    `names`: only the runs of these names or job ids."""
    from dynspec_cli.run import slurm as S

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
