"""How a Slurm run is shown: one line whenever the job's state or a node's verdict changes (plain
lines: also in CI logs), the end of a launch or watch, and of a stop; the check of a user's own
sbatch script (`dynspec preflight --sbatch FILE`, plain text: it runs without rich)."""
from __future__ import annotations

import sys


def _escape(s: str) -> str:
    from rich.markup import escape

    return escape(s)


class Screen:
    """The Slurm launch's screen (place/sequence.py `Screen`)."""

    def __init__(self, out, json_out: bool, login, sp=None):
        self.out, self.json_out, self.login, self.sp = out, json_out, login, sp

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def preflight(self, result) -> None:
        pass  # on the nodes, in the job

    def started(self, p, rec) -> None:
        if not self.json_out:
            self.out.print(f"[bold]submitted[/] {rec.name}: Slurm job {rec.job_id} ({self.sp.slurm.nodes} node(s)), "
                           f"logs {', '.join(rec.logs)}; job log {rec.batch_log}")

    def update(self, rec, st, states) -> None:
        if self.json_out:
            return
        nodes = "  ".join(f"n{s.rank}:{s.verdict}{'/ready' if s.ready else ''}" for s in states)
        where = f" on {','.join(rec.nodes)}" if rec.nodes else ""
        self.out.print(f"job {rec.job_id}: {_escape(st.shown())}{where}  {nodes}")


def render_dry_run(job) -> int:
    sys.stdout.write(f"# {job.jobdir}/job.sbatch\n{job.batch}\n# {job.jobdir}/node.sh (every task)\n"
                     f"{job.node_sh}# the job's environment, given to sbatch on its stdin (secrets shown as ***)\n"
                     f"{job.env_shown}")
    return 0


def _interrupted(out, login, result) -> int:
    """Ctrl-C: the job is cancelled (confirmed gone from squeue), or left with --detach; either way
    its id is printed."""
    from dynspec_cli.run.hints import command
    from dynspec_cli.verdict.codes import INTERRUPTED

    rec = result.record
    if result.detached:
        out.print(f"\ndetached: job {rec.job_id} keeps running; re-attach with: "
                  f"{command('watch', rec.name, host=login)}", markup=False)
    elif result.stopped:
        out.print(f"\ninterrupted: cancelled job {rec.job_id}; it is gone from squeue")
    elif result.left == "it is still listed by squeue":
        out.print(f"\ninterrupted: cancelled job {rec.job_id}; {result.left}")
    else:
        job = f"job {rec.job_id}" if rec is not None and rec.job_id else "its job"
        sys.stderr.write(f"dynspec: interrupted: run {result.name} ({job}) may still be queued ({result.left}); "
                         f"stop it with: {command('stop', result.name, host=login)}\n")
    return INTERRUPTED


def render(out, login, result, json_out: bool) -> int:
    """The end of a Slurm launch or watch; returns the exit code."""
    from dynspec_cli.report.jsonout import emit

    rec = result.record
    if result.kind == "interrupted":
        return _interrupted(out, login, result)
    if result.kind == "started":
        if json_out:
            emit({"name": rec.name, "job_id": rec.job_id, "logs": rec.logs, "jobdir": rec.jobdir})
        else:
            from dynspec_cli.run.hints import command

            out.print(f"  watch it to its verdict: {command('watch', rec.name, host=login)}\n"
                      f"  stop it: {command('stop', rec.name, host=login)}", markup=False)
        return 0
    o = result.outcome
    if json_out:
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


def render_stopped(out, rec, *, was: bool, gone: bool, submitted: bool) -> int:
    if not submitted:
        out.print(f"nothing to stop: {rec.name} submitted no Slurm job (dynspec stopped before sbatch answered); "
                  f"its record is removed")
        return 0
    if not gone:
        sys.stderr.write(f"dynspec: error: job {rec.job_id} ({rec.name}) is still listed by squeue after scancel\n")
        return 1
    out.print(f"{'cancelled' if was else 'already ended'}: {rec.name} (Slurm job {rec.job_id}); "
              f"nothing of it is left in squeue")
    return 0


def check_sbatch(path: str, json_out: bool) -> int:
    """`dynspec preflight --sbatch FILE`: the findings, exit 1 if the script would not launch right;
    a script it cannot read (or with no launch it can follow) is unknown, exit 3, never a finding."""
    import os

    from dynspec_cli.knowledge.tables import ConfigError
    from dynspec_cli.place.slurm.sbatch_check import check, unreadable

    if not os.path.lexists(path):
        raise ConfigError(f"{path}: no such sbatch script")
    try:
        if not os.path.isfile(path):
            raise OSError(0, "not a regular file")
        with open(path, "rb") as fh:
            data = fh.read(4 << 20)
        if b"\0" in data:
            raise OSError(0, "not text (NUL bytes)")
        res = check(data.decode("utf-8", "replace"))  # (a stray latin-1 byte in a comment is still a script)
    except OSError as e:
        res = unreadable(path, getattr(e, "strerror", None) or str(e))
    res["script"] = path
    if json_out:
        from dynspec_cli.report.jsonout import emit

        emit(res)
    else:
        render_sbatch_check(res, path)
    return res["exit_code"]


def render_sbatch_check(res: dict, path: str) -> None:
    """`dynspec preflight --sbatch FILE` as text (plain: it is written without rich)."""
    from dynspec_cli.knowledge.findings import doc

    out = sys.stdout
    if res["verdict"] == "unknown":
        out.write(f"? {path}: unknown: {res['note']}\n")
        return
    if not res["findings"]:
        out.write(f"✓ {path}: {res['launches']} {'/'.join(res['engines'])} launch(es), "
                  f"{res['nodes'] or 1} node(s): no rank, rendezvous or node-count mistake found\n")
        return
    out.write(f"✗ {path}: this job would not start the server as meant\n")
    for f in res["findings"]:
        d = doc(f["code"])
        where = f" (line {f['line']})" if f.get("line") else ""
        out.write(f"  ✗ {f['code']} {d.name if d else ''}{where}: {f['message']}\n")
        if d is not None and d.fix:
            out.write(f"      fix: {d.fix}\n")
