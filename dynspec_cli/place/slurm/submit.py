"""Submitting the job: its files on the login host, then sbatch, in an order that leaves nothing
unfound whenever dynspec dies (the record and the guard before sbatch; sbatch's answer written
into the job dir by the login host's own shell)."""
from __future__ import annotations

from dynspec_cli.place.slurm.guard import Guard
from dynspec_cli.place.slurm.job import Job
from dynspec_cli.place.slurm.profile import SlurmProfile
from dynspec_cli.place.slurm.record import SlurmRecord, remove_record, save
from dynspec_cli.place.slurm.scheduler import SlurmError, check_partition, one_line, run
from dynspec_cli.run import records
from dynspec_cli.transport import Host


def write_job(login: Host, job: Job) -> None:
    """The job's files on the login host (the logs' folders too)."""
    for d in [job.jobdir] + [log.rsplit("/", 1)[0] or "/" for log in job.logs]:
        login.run(["mkdir", "-p", d], check=True, timeout=30, idempotent=True)
    login.write_file(f"{job.jobdir}/job.sbatch", job.batch.encode(), mode=0o755)
    login.write_file(f"{job.jobdir}/node.sh", job.node_sh.encode(), mode=0o755)


# sbatch's answer goes into the job dir (`job.id`, empty if it failed) from the login host's own
# shell, before dynspec reads it: whenever dynspec dies, the guard and `stop NAME` find the job
SUBMIT = r"""eval "$(cat)"  # the job's environment (secrets included), from stdin
out=$(sbatch --parsable --export=ALL "$1/job.sbatch"); rc=$?
jid=${out%%;*}; case $jid in *[!0-9]*) jid= ;; esac
printf '%s\n' "$jid" >"$1/job.id.tmp" && mv -f -- "$1/job.id.tmp" "$1/job.id"
[ "$rc" = 0 ] && printf '%s\n' "$out"
exit "$rc"
"""


def sbatch(login: Host, job: Job) -> str:
    """`sbatch --parsable` the job written by write_job; the job id."""
    res = run(login, ["sh", "-c", SUBMIT, "sh", job.jobdir], input=job.env_file.encode(), idempotent=False)
    if res.exit_code == 127:
        raise SlurmError(f"sbatch not found on {login.name} (is it the cluster's login host?)")
    if not res.ok:
        raise SlurmError(f"sbatch rejected the job: {one_line(res)}")
    jid = res.text.strip().split(";")[0].strip()
    if not jid.isdigit():
        raise SlurmError(f"sbatch printed no job id: {res.text.strip()[:200]!r}")
    return jid


def submit(login: Host, sp: SlurmProfile, feature, job: Job) -> tuple[SlurmRecord, Guard, bool]:
    """Submit the job: its files, the run record (no job id yet) and the guard come before sbatch,
    whose answer the login host writes into the job dir itself, so whenever dynspec dies from here
    on the guard cancels the job and `stop NAME` finds it. Ctrl-C during the submission is held
    until the job id is recorded; then `interrupted` is True (the caller cancels or detaches)."""
    from dynspec_cli.run import sigint

    check_partition(login, sp.slurm.partition)
    write_job(login, job)
    rec = SlurmRecord(name=sp.prof.name, job_id="", login=login.name, jobdir=job.jobdir, nnodes=sp.slurm.nodes,
                      logs=job.logs, offsets=job.offsets, preflight_files=job.preflight_files,
                      batch_log=job.batch_log, port=sp.prof.port, python=sp.prof.python, feature=feature.name,
                      submitted_at=records.now(), patched_class=list(sp.prof.patched_class),
                      sglang_version=sp.prof.sglang_version, argv=job.argv, slurm_conf=sp.slurm.conf)
    save(login, rec)
    guard = Guard(login, job.jobdir)
    try:
        with sigint.held(f"submitting {rec.name}: its job id is recorded"):
            rec.job_id = sbatch(login, job)
            save(login, rec)
    except KeyboardInterrupt:
        if not rec.job_id:  # a second Ctrl-C abandoned sbatch: the guard cancels what it submitted
            guard.fire()
            raise
        return rec, guard, True
    except BaseException:
        guard.fire()
        if not rec.job_id:
            remove_record(login, rec.name)
        raise
    return rec, guard, False
