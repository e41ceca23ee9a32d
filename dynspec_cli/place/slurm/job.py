"""The job dynspec submits for a Slurm profile (rendered by `render`, shown by `launch --dry-run`):
  * the batch script, on the first allocated node, takes the head node from `scontrol show
    hostnames "$SLURM_JOB_NODELIST"`, its address from `scontrol show node` (NodeAddr: node names
    often do not resolve) and a free port there, and runs ONE `srun` step, one task per node,
    `--kill-on-bad-exit=1` (a node that dies takes the step down instead of leaving the rest hung);
  * each task runs `node.sh`, which reads its rank from `$SLURM_NODEID` in the task's own shell (the
    batch script's shell would expand it once, before srun, giving every node rank 0), runs dynspec's
    preflight with the server's python (a dead preflight ends the task, so the job, with the report
    in the job's log), then starts the server with `--nnodes/--node-rank/--dist-init-addr` and the
    probe's environment, its output appended to that node's log (one log per node);
  * the profile's [env] and secret flags' values reach the nodes in the job's environment: the
    submitting shell reads them from its stdin and exports them to `sbatch --export=ALL`, which
    keeps them with the job (a requeue gets them again). No secret is on a command line (preflight
    takes `--env NAME` from its environment), in a file of the job dir, or in the run record.

Logs and the job's files live under the login host's home (`~/.dynspec/slurm/<name>-<time>/`), so
they must be on the filesystem the nodes share with the login host, as on every Slurm cluster:
dynspec follows the nodes' logs through the login host."""
from __future__ import annotations

import json
import shlex
import sys
import time
from dataclasses import dataclass

import msgspec

from dynspec_cli.place.slurm.profile import SlurmProfile, SlurmSpec
from dynspec_cli.run import records
from dynspec_cli.transport import Host


@dataclass
class Job:
    """What is submitted: the batch script, the per-node task script, where the logs go."""

    name: str
    jobdir: str
    batch: str
    node_sh: str
    env_file: str  # secrets: `export` lines for sbatch's shell, sent on its stdin, never written
    env_shown: str  # the same with the secrets masked (--dry-run)
    logs: list[str]
    offsets: list[int]
    preflight_files: list[str]
    batch_log: str
    argv: list[str]  # the server's argv (secrets masked), rank and rendezvous as placeholders


def _sbatch_lines(sp: SlurmProfile, name: str, batch_log: str) -> list[str]:
    s = sp.slurm
    # append: the nodes add their preflight reports to the job's log too
    out = [f"--job-name=dynspec-{name}", f"--nodes={s.nodes}", "--ntasks-per-node=1", f"--output={batch_log}",
           "--open-mode=append"]
    for key, opt in (("partition", "partition"), ("account", "account"), ("qos", "qos"), ("time", "time"),
                     ("constraint", "constraint")):
        v = getattr(s, key)
        if v is not None:
            out.append(f"--{opt}={v}")
    if s.gpus_per_node is not None:
        out.append(f"--gpus-per-node={s.gpus_per_node}")
    out += list(s.extra)
    return out


def dynspec_command(login: Host, spec: SlurmSpec) -> str:
    if spec.dynspec:
        return spec.dynspec
    if login.shares_local_files:
        return f"{shlex.quote(sys.executable)} -m dynspec_cli"
    return "dynspec"


def render(login: Host, sp: SlurmProfile, feature, *, jobdir: str, probe_env: dict[str, str] | None,
           preflight: bool, offsets: list[int] | None = None) -> Job:
    """The job's files for `sp`: the batch script, the task every node runs (its own preflight,
    when asked, then its server with the probe's environment) and the job's environment."""
    from dynspec_cli.run.secrets import MASK, redact_argv, redact_env, split_secrets

    prof, n = sp.prof, sp.slurm.nodes
    logs = [records.expand(login, prof.log.replace("{name}", f"{prof.name}-n{r}")) for r in range(n)]
    batch_log = f"{jobdir}/job.log"
    flags = dict(prof.flags)
    flags.update({"nnodes": n, "node-rank": "@RANK@", "dist-init-addr": "@ADDR@"})
    argv = msgspec.structs.replace(prof, flags=flags).argv()
    # secrets (the profile's [env], secret flags' values) travel in the job's environment (sbatch's
    # shell reads them from stdin): never on a command line, never in a file of the job dir
    argv_vars, flag_values = split_secrets(argv, lambda i: f"@SECRET{i}@")
    words = ShellWords(len(flag_values))
    node = _task_head(prof, logs, jobdir)
    if preflight:
        # a secret flag's value does not change the verdict: preflight sees it masked
        node += _task_preflight(login, sp, feature, words(redact_argv(argv)[3:]), jobdir, batch_log)
    node += _task_server(login, prof, feature, redact_argv(argv), words(argv_vars), probe_env, jobdir)
    return Job(prof.name, jobdir, _batch_script(sp, jobdir, batch_log), "\n".join(node) + "\n",
               _env_lines(prof.env, flag_values), _env_lines(redact_env(prof.env), [MASK] * len(flag_values)),
               logs, list(offsets or [0] * n), [f"{jobdir}/preflight-n{r}.json" for r in range(n)], batch_log,
               redact_argv(argv))


def _batch_script(sp: SlurmProfile, jobdir: str, batch_log: str) -> str:
    """Run on the first node: the head node's address and a free port there (the rendezvous),
    then ONE srun step of one task per node."""
    prof, s, q = sp.prof, sp.slurm, shlex.quote
    lines = ["#!/bin/bash"] + [f"#SBATCH {o}" for o in _sbatch_lines(sp, prof.name, batch_log)]
    lines += [
        f"# dynspec launch {prof.name}: one srun step, one task per node; the rank is read in each task",
        "set -u",
        'HEAD_NODE=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n1)',
        # NodeAddr, not the name: node names need not resolve
        'HEAD_ADDR=$(scontrol show node "$HEAD_NODE" | tr " " "\\n" | sed -n "s/^NodeAddr=//p" | head -n1)',
        'HEAD_ADDR=${HEAD_ADDR:-$HEAD_NODE}',
    ]
    if s.dist_init_port:
        lines.append(f"PORT={s.dist_init_port}")
    else:
        lines.append(f"PORT=$({q(prof.python)} -c 'import socket; s=socket.socket(); s.bind((\"\", 0)); "
                     f"print(s.getsockname()[1])')")
    lines += [
        'export DYNSPEC_DIST_INIT_ADDR="$HEAD_ADDR:$PORT"',
        'echo "dynspec: nodes $SLURM_JOB_NODELIST, head $HEAD_NODE ($HEAD_ADDR), dist-init-addr $DYNSPEC_DIST_INIT_ADDR"',
        f"srun --nodes={s.nodes} --ntasks-per-node=1 --kill-on-bad-exit=1 bash {q(jobdir + '/node.sh')}",
        "",
    ]
    return "\n".join(lines)


def _env_lines(env: dict[str, str], values: list[str]) -> str:
    q = shlex.quote
    return "\n".join(["# the job's environment: the profile's [env] and the server's secret flag values"]
                     + [f"export {k}={q(v)}" for k, v in env.items()]
                     + [f"export DYNSPEC_SECRET{i}={q(v)}" for i, v in enumerate(values, 1)]) + "\n"


class ShellWords:
    """argv as the task's shell line: quoted, with the placeholders of the rank, the rendezvous and
    the secret flag values turned into the task's own variables."""

    def __init__(self, secrets: int):
        self.secrets = secrets

    def __call__(self, words: list[str]) -> str:
        q = shlex.quote
        text = " ".join(q(x) for x in words).replace(q("@RANK@"), '"$RANK"').replace(
            q("@ADDR@"), '"$DYNSPEC_DIST_INIT_ADDR"')
        for i in range(self.secrets, 0, -1):
            text = text.replace(f"@SECRET{i}@", f'"$DYNSPEC_SECRET{i}"')
        return text


def _task_head(prof, logs: list[str], jobdir: str) -> list[str]:
    q = shlex.quote
    return ["#!/bin/bash",
            "# one task per node: its rank comes from this task's own SLURM_NODEID",
            "set -u",
            'RANK="$SLURM_NODEID"',
            "LOGS=(" + " ".join(q(x) for x in logs) + ")",
            'LOG="${LOGS[$RANK]}"',
            f"NAME={q(prof.name)}-n$RANK",
            f"PRE={q(jobdir)}/preflight-n$RANK.json"]


def _task_preflight(login: Host, sp: SlurmProfile, feature, server_words: str, jobdir: str,
                    batch_log: str) -> list[str]:
    """The node's own preflight, with the server's python: dead ends the task (so the job) with
    the report in the job's log; a dynspec that cannot run there is no verdict, and no server."""
    prof, q = sp.prof, shlex.quote
    pf = [dynspec_command(login, sp.slurm), "preflight", "--python", prof.python, "--feature", feature.name]
    for c in prof.patched_class:
        pf += ["--patched-class", c]
    for k in prof.env:
        pf += ["--env", k]  # the value from this task's environment (the job's)
    server = " -- " + server_words
    pre_argv = " ".join(q(x) for x in pf[1:])
    # the verdict file appears only once the report is in the job's log (dynspec reads the
    # file and cancels the job); a node's report goes in whole (one cat, O_APPEND)
    return [
        f"{pf[0]} {pre_argv} --json{server} > \"$PRE.tmp\" 2> \"$PRE.err\"",
        "rc=$?; stop=",
        "if ! grep -q '\"verdict\"' \"$PRE.tmp\" 2>/dev/null; then  # dynspec did not run: no verdict, no server",
        "  stop=2",
        '  { echo "dynspec: preflight could not run on node $RANK ($(hostname)): exit $rc:"; '
        'tail -n 5 "$PRE.err"; } > "$PRE.txt" 2>&1',
        '  printf \'{"verdict": "error", "exit_code": %s}\\n\' "$rc" > "$PRE.tmp"',
        'elif [ "$rc" = 1 ]; then',
        "  stop=1",
        '  { echo "dynspec: preflight on node $RANK ($(hostname)) is dead; the server is not started:"; '
        f'{pf[0]} {pre_argv}{server}; }} > "$PRE.txt" 2>&1',
        "fi",
        'if [ -n "$stop" ]; then',
        f'  cat "$PRE.txt" >> {q(batch_log)}; mv -f -- "$PRE.tmp" "$PRE"; exit "$stop"',
        "fi",
        'mv -f -- "$PRE.tmp" "$PRE"',
    ]


def _task_server(login: Host, prof, feature, shown_argv: list[str], command: str,
                 probe_env: dict[str, str] | None, jobdir: str) -> list[str]:
    """The launch's header line in the node's log (as control.start writes it), then the server,
    exec'd so that the pid node.sh writes is the server's."""
    from dynspec_cli.evidence.observation import LAUNCH_PREFIX
    from dynspec_cli.run.secrets import redact_env

    q = shlex.quote
    header = {"name": "@NAME@", "argv": shown_argv, "env": redact_env(prof.env), "started_at": 0,
              "feature": feature.name, "slurm": True}
    penv = dict(probe_env or {})
    envline = " ".join(f"{k}={q(v)}" for k, v in penv.items())
    if penv and "PYTHONPATH" not in prof.env:
        envline = envline.replace(f"PYTHONPATH={q(penv['PYTHONPATH'])}",
                                  f"PYTHONPATH={q(penv['PYTHONPATH'])}\"${{PYTHONPATH:+:$PYTHONPATH}}\"")
    out = [
        f"HDR={q(LAUNCH_PREFIX + json.dumps(header))}",
        'HDR=${HDR//@NAME@/$NAME}; HDR=${HDR//@RANK@/$RANK}; HDR=${HDR//@ADDR@/$DYNSPEC_DIST_INIT_ADDR}',
        'printf "%s\\n" "$HDR" >> "$LOG"',
    ]
    if prof.workdir:
        out.append(f"cd {q(records.expand(login, prof.workdir))} || exit 1")
    out.append(f"echo $$ > {q(jobdir)}/server-n$RANK.pid  # exec keeps the pid: the server's, for prove and gate")
    out.append(f"exec env {envline} {command} >> \"$LOG\" 2>&1" if envline else f"exec {command} >> \"$LOG\" 2>&1")
    return out


def prepare(login: Host, sp: SlurmProfile, feature, *, probe: bool, preflight: bool) -> Job:
    """The job for `sp`, its probe set up on the login host (the nodes share its files) and its
    logs' offsets taken: what `launch` submits and `--dry-run` shows."""
    from dynspec_cli import engines
    from dynspec_cli.run import control

    jobdir = records.expand(login, f"~/.dynspec/slurm/{sp.prof.name}-{time.strftime('%Y%m%d-%H%M%S')}")
    penv = None
    setup = engines.of(feature).probe
    if probe and setup is not None:  # (an engine without an in-server probe starts as it is)
        targets = setup.probe_targets(feature, None, sp.prof.patched_class or None)
        if targets:
            penv = control.probe_env_on(login, sp.prof.python, setup, targets, {"PYTHONPATH": ""})
            pdir = penv["PYTHONPATH"].split(":")[0]
            penv["PYTHONPATH"] = ":".join([pdir] + ([sp.prof.env["PYTHONPATH"]] if "PYTHONPATH" in sp.prof.env else []))
    job = render(login, sp, feature, jobdir=jobdir, probe_env=penv, preflight=preflight)
    job.offsets = [login.size(log) or 0 for log in job.logs]
    return job
