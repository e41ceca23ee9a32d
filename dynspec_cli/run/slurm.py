"""Slurm as the way onto a cluster: a profile with `scheduler = "slurm"` and a `[slurm]` table is
submitted with `sbatch` on its login host (`host`: local or SSH) instead of being started by dynspec.

The job (rendered by `render`, shown by `launch --dry-run`):
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
dynspec follows the nodes' logs through the login host.

The run record `~/.dynspec/runs/<name>.slurm.json` on the login host keeps the job id, the nodes and
their addresses, the logs and their offsets: `watch/status/stop NAME` (or the job id) read it."""
from __future__ import annotations

import json
import re
import shlex
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional

import msgspec

from dynspec_cli import inject
from dynspec_cli.resources import tomllib
from dynspec_cli.knowledge.tables import ConfigError
from dynspec_cli.run import records
from dynspec_cli.run.control import RunError
from dynspec_cli.run.profiles import Profile, with_overrides
from dynspec_cli.transport import Host, TransportError
from dynspec_cli import engines

# Slurm's job states (squeue %T / scontrol JobState) that mean the job has ended
ENDED = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "OUT_OF_MEMORY", "NODE_FAIL", "PREEMPTED", "BOOT_FAIL",
         "DEADLINE", "SPECIAL_EXIT", "REVOKED"}
# ended by Slurm itself, not by the server's own exit: the job's state says why the nodes stopped
BY_SLURM = {"TIMEOUT": "at its time limit ([slurm] time)", "OUT_OF_MEMORY": "for running out of memory",
            "NODE_FAIL": "because a node failed", "PREEMPTED": "to preempt it", "CANCELLED": "on an scancel",
            "DEADLINE": "at its deadline", "BOOT_FAIL": "because a node failed to boot"}
WAITING = {"PENDING", "CONFIGURING", "REQUEUED", "RESV_DEL_HOLD", "REQUEUE_HOLD", "REQUEUE_FED", "SUSPENDED"}
_TIME = re.compile(r"^(\d+-)?\d+(:\d{1,2}){0,2}$|^\d+-\d+$")
_WORD = re.compile(r"^[A-Za-z0-9_.,:+-][A-Za-z0-9_.,:+()&|\[\]-]*$")
GROUP_FLAGS = ("nnodes", "node-rank", "dist-init-addr")


class SlurmSpec(msgspec.Struct, forbid_unknown_fields=True, rename="kebab"):
    """The profile's `[slurm]` table."""

    nodes: int = 1
    partition: Optional[str] = None
    account: Optional[str] = None
    qos: Optional[str] = None
    time: Optional[str] = None  # sbatch --time: minutes, MM:SS, HH:MM:SS, D-HH[:MM[:SS]]
    gpus_per_node: Optional[int] = None
    constraint: Optional[str] = None
    extra: list[str] = []  # further sbatch options, each one "--opt=value"
    dist_init_port: int = 0  # 0: a free port on the head node, chosen inside the job
    dynspec: Optional[str] = None  # how the nodes run dynspec (preflight); default: as on the login host
    pending_timeout: Optional[float] = None  # give up (scancel) on a job still PENDING this long
    conf: Optional[str] = None  # SLURM_CONF for the Slurm commands on the login host (default: the host's own)

    def __post_init__(self) -> None:
        if not 1 <= self.nodes <= 4096:
            raise ValueError(f"nodes = {self.nodes}: must be between 1 and 4096")
        for key in ("partition", "account", "qos", "constraint"):
            v = getattr(self, key)
            if v is not None and not _WORD.match(v):
                raise ValueError(f"{key} = {v!r}: not a Slurm name")
        if self.time is not None and not _TIME.match(self.time):
            raise ValueError(f"time = {self.time!r}: use minutes, MM:SS, HH:MM:SS or D-HH:MM:SS")
        if self.gpus_per_node is not None and not 0 <= self.gpus_per_node <= 64:
            raise ValueError(f"gpus-per-node = {self.gpus_per_node}: must be between 0 and 64")
        for opt in self.extra:
            if not opt.startswith("--") or "\n" in opt:
                raise ValueError(f"extra: {opt!r}: give each sbatch option as one '--name=value' string")
            if opt.split("=", 1)[0] in ("--nodes", "-N", "--ntasks-per-node", "--output", "--job-name", "--parsable",
                                        "--open-mode", "--export"):
                raise ValueError(f"extra: {opt!r} is set by dynspec (use the [slurm] keys)")
        if not 0 <= self.dist_init_port <= 65535:
            raise ValueError(f"dist-init-port = {self.dist_init_port}: not a TCP port")
        if self.pending_timeout is not None and self.pending_timeout <= 0:
            raise ValueError("pending-timeout must be positive")


@dataclass
class SlurmProfile:
    prof: Profile
    slurm: SlurmSpec
    source: str


def _profile_file(ref: str) -> Optional[Path]:
    p = Path(ref)
    if p.suffix == ".toml" or p.exists():
        return p
    from dynspec_cli.knowledge.tables import configs_dir

    bundled = configs_dir() / "profiles" / f"{ref}.toml"
    return bundled if bundled.exists() else None


def load(ref: str, *, env: list[str] | None = None, sets: list[str] | None = None, name: str | None = None,
         host: str | None = None) -> SlurmProfile:
    p = _profile_file(ref)
    if p is None:
        raise ConfigError(f"profile {ref!r} not found (give a path to a .toml file)")
    try:
        raw = tomllib.loads(p.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"{p}: cannot read: {e}") from None
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{p}: invalid TOML: {e}") from None
    sched = raw.pop("scheduler", None)
    table = raw.pop("slurm", None)
    if sched != "slurm":
        raise ConfigError(f"{p}: scheduler = {sched!r}: the only scheduler is \"slurm\" (or leave it out)")
    if not isinstance(table, dict):
        raise ConfigError(f"{p}: scheduler = \"slurm\" needs a [slurm] table (nodes, partition, time, ...)")
    try:
        spec = msgspec.convert(table, SlurmSpec, strict=True)
    except (msgspec.ValidationError, ValueError) as e:
        raise ConfigError(f"{p}: [slurm]: {e}") from None
    for k in GROUP_FLAGS:
        for fk in (k, f"--{k}"):
            if fk in (raw.get("flags") or {}):
                raise ConfigError(f"{p}: flags.{fk} is set by dynspec inside the Slurm job (remove it)")
    try:
        prof = msgspec.convert(raw, Profile, strict=True)
    except (msgspec.ValidationError, ValueError) as e:
        raise ConfigError(f"{p}: {e}") from None
    prof.source = str(p)
    prof = with_overrides(prof, host=host, env=env, sets=sets, name=name)
    return SlurmProfile(prof, spec, str(p))


# --------------------------------------------------------------------------------------------------
# the job's files


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
    from dynspec_cli.evidence.observation import LAUNCH_PREFIX
    from dynspec_cli.run.secrets import MASK, redact_argv, redact_env, split_secrets

    prof, s = sp.prof, sp.slurm
    n = s.nodes
    logs = [records.expand(login, prof.log.replace("{name}", f"{prof.name}-n{r}")) for r in range(n)]
    batch_log = f"{jobdir}/job.log"
    pre_files = [f"{jobdir}/preflight-n{r}.json" for r in range(n)]
    flags = dict(prof.flags)
    flags.update({"nnodes": n, "node-rank": "@RANK@", "dist-init-addr": "@ADDR@"})
    argv = msgspec.structs.replace(prof, flags=flags).argv()
    q = shlex.quote

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
        f"srun --nodes={n} --ntasks-per-node=1 --kill-on-bad-exit=1 bash {q(jobdir + '/node.sh')}",
        "",
    ]
    batch = "\n".join(lines)

    # secrets (the profile's [env], secret flags' values) travel in the job's environment (sbatch's
    # shell reads them from stdin): never on a command line, never in a file of the job dir
    argv_vars, flag_values = split_secrets(argv, lambda i: f"@SECRET{i}@")

    def env_lines(env: dict[str, str], values: list[str]) -> str:
        return "\n".join(["# the job's environment: the profile's [env] and the server's secret flag values"]
                         + [f"export {k}={q(v)}" for k, v in env.items()]
                         + [f"export DYNSPEC_SECRET{i}={q(v)}" for i, v in enumerate(values, 1)]) + "\n"

    def shell_words(words: list[str]) -> str:
        text = " ".join(q(x) for x in words).replace(q("@RANK@"), '"$RANK"').replace(
            q("@ADDR@"), '"$DYNSPEC_DIST_INIT_ADDR"')
        for i in range(len(flag_values), 0, -1):
            text = text.replace(f"@SECRET{i}@", f'"$DYNSPEC_SECRET{i}"')
        return text

    header = {"name": "@NAME@", "argv": redact_argv(argv), "env": redact_env(prof.env), "started_at": 0,
              "feature": feature.name, "slurm": True}
    node = ["#!/bin/bash",
            "# one task per node: its rank comes from this task's own SLURM_NODEID",
            "set -u",
            'RANK="$SLURM_NODEID"',
            "LOGS=(" + " ".join(q(x) for x in logs) + ")",
            'LOG="${LOGS[$RANK]}"',
            f"NAME={q(prof.name)}-n$RANK",
            f"PRE={q(jobdir)}/preflight-n$RANK.json"]
    if preflight:
        pf = [dynspec_command(login, s), "preflight", "--python", prof.python, "--feature", feature.name]
        for c in prof.patched_class:
            pf += ["--patched-class", c]
        for k in prof.env:
            pf += ["--env", k]  # the value from this task's environment (the job's)
        # a secret flag's value does not change the verdict: preflight sees it masked
        server = " -- " + shell_words(redact_argv(argv)[3:])
        pre_argv = " ".join(q(x) for x in pf[1:])
        # the verdict file appears only once the report is in the job's log (dynspec reads the
        # file and cancels the job); a node's report goes in whole (one cat, O_APPEND)
        node += [
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
    penv = dict(probe_env or {})
    envline = " ".join(f"{k}={q(v)}" for k, v in penv.items())
    if penv and "PYTHONPATH" not in prof.env:
        envline = envline.replace(f"PYTHONPATH={q(penv['PYTHONPATH'])}",
                                  f"PYTHONPATH={q(penv['PYTHONPATH'])}\"${{PYTHONPATH:+:$PYTHONPATH}}\"")
    hdr = LAUNCH_PREFIX + json.dumps(header)
    cmd = shell_words(argv_vars)
    node += [
        f"HDR={q(hdr)}",
        'HDR=${HDR//@NAME@/$NAME}; HDR=${HDR//@RANK@/$RANK}; HDR=${HDR//@ADDR@/$DYNSPEC_DIST_INIT_ADDR}',
        'printf "%s\\n" "$HDR" >> "$LOG"',
    ]
    if prof.workdir:
        node.append(f"cd {q(records.expand(login, prof.workdir))} || exit 1")
    node.append(f"echo $$ > {q(jobdir)}/server-n$RANK.pid  # exec keeps the pid: the server's, for prove and gate")
    node.append(f"exec env {envline} {cmd} >> \"$LOG\" 2>&1" if envline else f"exec {cmd} >> \"$LOG\" 2>&1")
    return Job(prof.name, jobdir, batch, "\n".join(node) + "\n", env_lines(prof.env, flag_values),
               env_lines(redact_env(prof.env), [MASK] * len(flag_values)), logs, list(offsets or [0] * n),
               pre_files, batch_log, redact_argv(argv))


# --------------------------------------------------------------------------------------------------
# the scheduler's commands (on the login host)


class ClusterHost:
    """The login host, with the profile's SLURM_CONF on every command it runs (sbatch, squeue, ...
    and the job they submit, which inherits sbatch's environment). Everything else is the host's."""

    def __init__(self, host: Host, conf: Optional[str]):
        self._host, self._env = host, ({"SLURM_CONF": conf} if conf else {})

    @property
    def slurm_env(self) -> dict[str, str]:
        return self._env

    def __getattr__(self, name: str):
        return getattr(self._host, name)

    def run(self, argv, *, env=None, **kw):
        return self._host.run(argv, env={**self._env, **(env or {})}, **kw)

    def start_script(self, script: str, *, stdin: bool):
        if self._env:
            from dynspec_cli.transport import shell

            script = f"SLURM_CONF={shell.quote(self._env['SLURM_CONF'])}; export SLURM_CONF\n{script}"
        return self._host.start_script(script, stdin=stdin)


def on_cluster(host: Host, conf: Optional[str]):
    return ClusterHost(host, conf) if conf else host


def cluster_env(login: Host) -> dict[str, str]:
    """What the login host's Slurm commands need in their environment (SLURM_CONF), for a
    process dynspec spawns there."""
    return dict(login.slurm_env) if isinstance(login, ClusterHost) else {}


class SlurmError(RunError):
    """The scheduler refused or could not be asked (one line, with its own message; exit 2)."""


def _one_line(res) -> str:
    text = (res.stderr.decode("utf-8", "replace") + "\n" + res.text).strip()
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return "; ".join(lines[:2]) or f"exit {res.exit_code}"


def _run(login: Host, argv: list[str], *, timeout: float = 60, input: Optional[bytes] = None,
         idempotent: bool = True):
    """A Slurm command on the login host. Asking (squeue, scontrol, sacct) and scancel are
    idempotent: a connection drop under them is retried through a reconnect."""
    try:
        return login.run(argv, timeout=timeout, input=input, idempotent=idempotent)
    except TransportError as e:
        raise SlurmError(f"{argv[0]} on {login.name}: {e}") from None


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


def submit(login: Host, job: Job) -> str:
    """`sbatch --parsable` the job written by write_job; the job id."""
    res = _run(login, ["sh", "-c", SUBMIT, "sh", job.jobdir], input=job.env_file.encode(), idempotent=False)
    if res.exit_code == 127:
        raise SlurmError(f"sbatch not found on {login.name} (is it the cluster's login host?)")
    if not res.ok:
        raise SlurmError(f"sbatch rejected the job: {_one_line(res)}")
    jid = res.text.strip().split(";")[0].strip()
    if not jid.isdigit():
        raise SlurmError(f"sbatch printed no job id: {res.text.strip()[:200]!r}")
    return jid


@dataclass
class JobState:
    state: str  # PENDING RUNNING COMPLETED FAILED ... ; GONE once Slurm no longer knows the job
    reason: str = ""
    nodelist: str = ""
    exit_code: str = ""
    restarts: int = 0  # how often Slurm has requeued the job (squeue RestartCnt, scontrol Restarts)

    @property
    def ended(self) -> bool:
        return self.state in ENDED or self.state == "GONE"

    def shown(self) -> str:
        if self.state in WAITING and self.reason and self.reason != "None":
            return f"{self.state} ({self.reason})"
        if self.ended and self.exit_code and self.exit_code != "0:0":
            return f"{self.state} (exit {self.exit_code})"
        return self.state


def job_state(login: Host, jid: str, timeout: float = 30) -> JobState:
    """squeue while the job is queued or running, then `scontrol show job` (kept MinJobAge s), then
    sacct (with accounting: one row per run of a requeued job, `-D`); GONE when none of them knows it."""
    res = _run(login, ["squeue", "-h", "-j", jid, "-O", "State:|,Reason:|,NodeList:|,RestartCnt"], timeout=timeout)
    line = res.text.strip().splitlines()[0] if res.ok and res.text.strip() else ""
    if line:
        st, reason, nodes, restarts = (line.split("|") + ["", "", ""])[:4]
        if st not in ENDED:
            return JobState(st, reason, nodes, restarts=int(restarts) if restarts.strip().isdigit() else 0)
    res = _run(login, ["scontrol", "show", "job", "-o", jid], timeout=timeout)
    if res.ok and "JobState=" in res.text:
        kv = dict(re.findall(r"(\w+)=(\S*)", res.text))
        return JobState(kv.get("JobState", "UNKNOWN"), kv.get("Reason", ""), kv.get("NodeList", ""),
                        kv.get("ExitCode", ""), int(kv.get("Restarts", "0") or 0))
    res = _run(login, ["sacct", "-n", "-X", "-D", "-P", "-j", jid, "-o", "State,Reason,NodeList,ExitCode"],
               timeout=timeout)
    rows = [ln.split("|") for ln in res.text.strip().splitlines()] if res.ok else []
    if rows:
        parts = (rows[-1] + ["", "", "", ""])[:4]
        return JobState(parts[0].split()[0] if parts[0] else "UNKNOWN", parts[1], parts[2], parts[3], len(rows) - 1)
    return JobState("GONE")


def down_nodes(login: Host, nodes: list[str]) -> list[str]:
    """Those of `nodes` Slurm has marked down or failing, each with its state and reason (sinfo)."""
    if not nodes:
        return []
    res = _run(login, ["sinfo", "-h", "-N", "-n", ",".join(nodes), "-o", "%N|%T|%E"], timeout=30)
    out = []
    for line in res.text.splitlines() if res.ok else []:
        node, state, reason = (line.split("|") + ["", ""])[:3]
        if any(w in state.upper() for w in ("DOWN", "FAIL", "NOT_RESPONDING", "NO_RESPOND")) or state.endswith("*"):
            out.append(f"{node} {state.upper()}" + (f": {reason}" if reason and reason != "none" else ""))
    return sorted(set(out))


def queued(login: Host, jid: str) -> bool:
    """Whether `squeue` still lists the job (pending, running or completing)."""
    res = _run(login, ["squeue", "-h", "-j", jid, "-o", "%T"], timeout=30)
    st = res.text.strip()
    return res.ok and bool(st) and st not in ENDED


def cancel(login: Host, jid: str, *, wait: float = 60.0) -> bool:
    """`scancel` the job and wait until squeue no longer lists it; True once it is gone."""
    if not queued(login, jid):
        return True
    res = _run(login, ["scancel", jid], timeout=30)
    if not res.ok and "Invalid job id" not in _one_line(res):
        raise SlurmError(f"scancel {jid}: {_one_line(res)}")
    end = time.monotonic() + wait
    while time.monotonic() < end:
        if not queued(login, jid):
            return True
        time.sleep(0.3)
    return False


def hostnames(login: Host, nodelist: str) -> list[str]:
    if not nodelist or nodelist in ("(null)", "None"):
        return []
    res = _run(login, ["scontrol", "show", "hostnames", nodelist], timeout=30)
    return res.text.split() if res.ok else []


def node_addr(login: Host, node: str) -> str:
    res = _run(login, ["scontrol", "show", "node", "-o", node], timeout=30)
    m = re.search(r"\bNodeAddr=(\S+)", res.text) if res.ok else None
    return m.group(1) if m else node


def check_partition(login: Host, partition: Optional[str]) -> None:
    """An unknown partition, in Slurm's own words, before anything is submitted."""
    if partition is None:
        return
    res = _run(login, ["scontrol", "show", "partition", partition], timeout=30)
    if not res.ok:
        raise SlurmError(f"partition {partition!r}: {_one_line(res)}")


# --------------------------------------------------------------------------------------------------
# the run record


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


def lines_before(login: Host, log: str, offset: int) -> int:
    from dynspec_cli.run.control import lines_before as lb

    return lb(login, log, offset)


# --------------------------------------------------------------------------------------------------
# the server process on a node (for prove and gate)



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
    res = _run(login, ["srun", f"--jobid={job_id}", "--overlap", f"--nodelist={node}", "--nodes=1", "--ntasks=1",
                       "--quiet", python, "-", "process", str(int(pid))], timeout=60,
               input=inject.program("hostcheck.py").encode("utf-8"))  # (srun hands its stdin to the task)
    try:
        doc = json.loads(res.text.strip().splitlines()[-1])
    except (ValueError, IndexError):
        raise SlurmError(f"srun on {node} in job {job_id}: {_one_line(res)}") from None
    return {**doc, "node": node}


def server_gone(login: Host, rec: SlurmRecord) -> Optional[str]:
    """Why the run's server is not serving any more (None: the job still runs)."""
    st = job_state(login, rec.job_id)
    return None if st.state == "RUNNING" else f"Slurm job {rec.job_id} is {st.shown()}"


# --------------------------------------------------------------------------------------------------
# launching


def prepare(login: Host, sp: SlurmProfile, feature, *, probe: bool, preflight: bool) -> Job:
    from dynspec_cli.run import control

    jobdir = records.expand(login, f"~/.dynspec/slurm/{sp.prof.name}-{time.strftime('%Y%m%d-%H%M%S')}")
    penv = None
    setup = engines.of(feature).probe
    if probe and setup is not None:
        targets = setup.probe_targets(feature, None, sp.prof.patched_class or None)
        if targets:
            penv = control.probe_env_on(login, sp.prof.python, setup, targets, {"PYTHONPATH": ""})
            pdir = penv["PYTHONPATH"].split(":")[0]
            penv["PYTHONPATH"] = ":".join([pdir] + ([sp.prof.env["PYTHONPATH"]] if "PYTHONPATH" in sp.prof.env else []))
    job = render(login, sp, feature, jobdir=jobdir, probe_env=penv, preflight=preflight)
    job.offsets = [login.size(log) or 0 for log in job.logs]
    return job


def launch(login: Host, sp: SlurmProfile, feature, job: Job) -> tuple[SlurmRecord, "Guard", bool]:
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
            rec.job_id = submit(login, job)
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


def fill_nodes(login: Host, rec: SlurmRecord, st: JobState) -> None:
    """Once the job has nodes: their names (rank order) and addresses, and the rendezvous."""
    if rec.nodes or not st.nodelist:
        return
    names = hostnames(login, st.nodelist)
    if not names:
        return
    rec.nodes = names
    rec.addrs = [node_addr(login, n) for n in names]
    save(login, rec)


# --------------------------------------------------------------------------------------------------
# watching

def _readiness(rec: SlurmRecord) -> tuple[str, ...]:
    """(A SlurmRecord names no engine: the registry's DEFAULT, the multi-node engine that runs there.)"""
    return engines.get(node_record(rec, 0).engine).serving.readiness


HEALTH_AT = r"""
import sys, urllib.request
addr, port, paths = sys.argv[1], sys.argv[2], sys.argv[3:]
last = "unreachable"
for path in paths:
    try:
        with urllib.request.urlopen(f"http://{addr}:{port}{path}", timeout=5) as r:
            print(path, r.status); sys.exit(0)
    except Exception as e:
        last = f"{path} {getattr(e, 'code', None) or type(e).__name__}"
print(last)
"""


@dataclass
class SlurmOutcome:
    verdict: str
    exit_code: int
    why: str  # live | node-dead | node-crashed | stalled | timeout | preflight | job-ended | pending | requeued
    # | interrupted
    message: str
    states: list
    job: JobState
    cancelled: bool = False
    gone: bool = False  # nothing of the job is queued any more
    culprit: Optional[int] = None
    preflight: Optional[list] = None
    timings: dict = field(default_factory=dict)  # seconds from the start of watching (just after sbatch)

    def to_json(self, rec: SlurmRecord) -> dict[str, Any]:
        nodes = []
        for s in self.states:
            nodes.append({"rank": s.rank, "host": s.host, "name": s.name, "verdict": s.verdict, "phase": s.phase,
                          "ready": s.ready, "health": s.health, "evidence": s.evidence, "why": s.why,
                          "stalled": s.stalled, "error": s.error, "log": rec.logs[s.rank],
                          "detail": s.v.to_json() if s.v is not None else None})
        return {"name": rec.name, "job_id": rec.job_id, "job_state": self.job.state, "job_reason": self.job.reason,
                "nodes_allocated": rec.nodes, "node_addrs": rec.addrs, "verdict": self.verdict,
                "exit_code": self.exit_code, "why": self.why, "culprit": self.culprit, "message": self.message,
                "cancelled": self.cancelled, "gone": self.gone, "nodes": nodes, "preflight": self.preflight,
                "timings": self.timings}


class JobWatch:
    """The job's state, polled in one thread for every node's loop."""

    def __init__(self, login: Host, jid: str, every: float = 0.5):
        self.login, self.jid, self.every = login, jid, every
        self.state = JobState("UNKNOWN")
        self.lock = threading.Lock()
        self.error: Optional[str] = None

    def poll(self) -> JobState:
        try:
            st = job_state(self.login, self.jid)
            self.error = None
        except SlurmError as e:
            self.error = str(e)
            return self.state
        with self.lock:
            self.state = st
        return st


def _watch_node(login: Host, rec: SlurmRecord, rank: int, feature, state, jw: JobWatch, stop: threading.Event,
                stall_timeout: float, on_change: Callable[[], None]) -> None:
    from dynspec_cli.run.group import node_evidence
    from dynspec_cli.run.watch import stalled
    from dynspec_cli.verdict.pipeline import Pipeline, judge_stream

    nrec = node_record(rec, rank)
    pipe = Pipeline.for_record(nrec, feature, engines.get(nrec.engine))
    first_data: list[float] = []

    def publish(v) -> None:
        if not first_data and pipe.consumed > nrec.log_offset:
            first_data.append(time.monotonic())
            state.first_data = first_data[0]
        state.v, state.verdict = v, v.verdict
        state.phase = "ready" if v.server_ready else ((v.launch or {}).get("phase") or "args")
        state.evidence = node_evidence(pipe, v)[:300]
        on_change()

    def on_tick(v, quiet):
        if stop.is_set():
            state.why = "stopped"
            return v
        if pipe.consumed > nrec.log_offset and not first_data:
            first_data.append(time.monotonic())
            state.first_data = first_data[0]
        st = jw.state
        if st.ended:
            state.why = "exited"
            time.sleep(0.3)
            from dynspec_cli.run.watch import drain

            drain(login, nrec, pipe)
            return pipe.final(exited=True)
        if rank == 0 and not state.ready and v.verdict == "live" and pipe.decided(v) and v.server_ready and rec.addrs:
            try:
                res = login.run_python(login.python, HEALTH_AT, [rec.addrs[0], str(rec.port), *_readiness(rec)], timeout=30)
                text = res.text.strip()
            except TransportError:
                text = ""
            state.health = text or None
            if text.endswith(" 200"):
                state.ready = True
                publish(v)
        # a node is stalled only once the job runs (pending time is the scheduler's, not the server's)
        if first_data and stall_timeout and not (v.verdict == "live" and pipe.decided(v)) and quiet >= stall_timeout:
            state.stalled, state.why = True, "stalled"
            return stalled(pipe, v, quiet, f"node {rank} ({rec.nodes[rank] if rank < len(rec.nodes) else '?'})")
        return None

    events = login.follow(nrec.log, nrec.log_offset)
    try:
        v, why = judge_stream(events, pipe, on_update=publish, on_tick=on_tick,
                              decided=lambda v: v.verdict in ("dead", "crashed"), tick_every=0.5)
        state.why = state.why or why
        publish(v)
    except BaseException as e:  # noqa: BLE001 - one node's loop must not end the others silently
        state.error = f"{type(e).__name__}: {e}"
        state.why = "error"
    finally:
        close = getattr(events, "close", None)
        if close is not None:
            try:
                close()
            except Exception:  # noqa: BLE001
                pass
        state.done = True
        on_change()


def read_preflight(login: Host, rec: SlurmRecord) -> list[Optional[dict]]:
    out: list[Optional[dict]] = []
    for f in rec.preflight_files:
        try:
            out.append(json.loads(login.read_file(f)))
        except (OSError, ValueError):  # not there yet, or this read failed (a drop): the next poll reads it
            out.append(None)
    return out


def watch(login: Host, rec: SlurmRecord, feature, *, timeout: Optional[float], pending_timeout: Optional[float],
          stall_timeout: float, keep: bool, on_change: Callable[[SlurmRecord, JobState, list], None] | None = None
          ) -> SlurmOutcome:
    """Every node's log judged (group verdict: live only when every node is) beside the job's state.
    Dead/crashed/stalled/timeout: scancel and confirm the job gone, unless `keep`. KeyboardInterrupt
    propagates (the caller cancels or detaches)."""
    from dynspec_cli.run.group import NodeState, decide

    jw = JobWatch(login, rec.job_id)
    states = [NodeState(r, "?", f"{rec.name}-n{r}") for r in range(rec.nnodes)]
    stop = threading.Event()
    changed = threading.Event()
    threads: list[threading.Thread] = []
    t0 = time.monotonic()
    started: Optional[float] = None
    outcome: Optional[SlurmOutcome] = None
    last_shown = None
    was_live = rec.verdict == "live"  # an earlier watch saw every node live (a later exit does not undo it)
    try:
        while outcome is None:
            st = jw.poll()
            if st.restarts > rec.restarts or (st.state == "NODE_FAIL" and st.state != rec.state):
                outcome = _requeued(login, rec, states, st, was_live)
                break
            if st.state not in WAITING and st.state != "UNKNOWN" and not threads:
                fill_nodes(login, rec, st)
                for s in states:
                    s.host = rec.nodes[s.rank] if s.rank < len(rec.nodes) else "?"
                started = time.monotonic()
                for s in states:
                    s.first_data = None
                threads = [threading.Thread(target=_watch_node, daemon=True, name=f"dynspec-slurm-n{r}",
                                            args=(login, rec, r, feature, states[r], jw, stop, stall_timeout,
                                                  changed.set)) for r in range(rec.nnodes)]
                for t in threads:
                    t.start()
            if (st.shown(), [s.verdict for s in states], states[0].ready) != last_shown and on_change is not None:
                last_shown = (st.shown(), [s.verdict for s in states], states[0].ready)
                on_change(rec, st, states)
            pre = read_preflight(login, rec) if threads or st.ended else []
            stopped = [(r, p) for r, p in enumerate(pre) if p and p.get("verdict") in ("dead", "error")]
            if stopped:
                outcome = _preflight_stopped(login, rec, states, st, pre, *stopped[0])
                break
            if threads:
                was_live = was_live or all(s.verdict == "live" for s in states)
                g = decide(states)
                if g is not None and g.verdict != "live" and jw.state.state in BY_SLURM:
                    outcome = _ended(states, jw.state, was_live)  # the nodes stopped because Slurm ended the job
                    break
                if g is not None:
                    outcome = SlurmOutcome(g.verdict, g.exit_code, g.why, g.message, states, st, culprit=g.culprit)
                    break
                if st.ended and all(s.done for s in states):
                    outcome = _ended(states, st, was_live)
                    break
            elif st.ended:
                outcome = _ended(states, st, was_live)
                break
            now = time.monotonic()
            # a job Slurm never started is named as such, whichever limit ran out ([slurm]
            # pending-timeout, else the watch's own): nothing of the server ran to be judged
            waited = pending_timeout if pending_timeout is not None else timeout
            if started is None and waited is not None and now - t0 >= waited:
                outcome = SlurmOutcome("inconclusive", 2, "pending", f"job {rec.job_id} still {st.shown()} after "
                                       f"{waited:g}s: Slurm has not started it", states, st)
                break
            if timeout is not None and now - (started or t0) >= timeout:
                outcome = SlurmOutcome("inconclusive", 3, "timeout", "timed out: " + "; ".join(
                    f"node {s.rank} {s.verdict} in {s.phase}" for s in states), states, st)
                break
            changed.wait(0.5 if threads else jw.every)
            changed.clear()
    finally:
        stop.set()
        for t in threads:
            t.join(10)
    if outcome.preflight is None and threads:
        outcome.preflight = read_preflight(login, rec)
    firsts = [getattr(s, "first_data", None) for s in states]
    outcome.timings = {"to_running": None if started is None else round(started - t0, 3),
                       "to_first_log": round(min(f for f in firsts if f) - t0, 3) if any(firsts) else None,
                       "to_verdict": round(time.monotonic() - t0, 3)}
    if outcome.verdict != "live" and not keep:
        outcome.cancelled = queued(login, rec.job_id)
        outcome.gone = cancel(login, rec.job_id)
        if outcome.cancelled:
            rec.cancelled_at = records.now()
    else:
        outcome.gone = not queued(login, rec.job_id)
    outcome.job = jw.poll()
    if on_change is not None:
        on_change(rec, outcome.job, states)
    rec.verdict, rec.state = outcome.verdict, outcome.job.state
    save(login, rec)
    return outcome


def _preflight_stopped(login: Host, rec: SlurmRecord, states, st: JobState, pre: list, r: int,
                       p: dict) -> SlurmOutcome:
    """Node r's preflight ended the job: dead (with the first error and its fix), or it could not
    run at all (`[slurm] dynspec` missing on the nodes: exit 127, or failing), which is no verdict."""
    where = f"node {r} ({states[r].host})"
    if p["verdict"] == "error":
        rc = p.get("exit_code")
        try:
            err = login.read_file(f"{rec.preflight_files[r]}.err").decode("utf-8", "replace").strip().splitlines()
        except (FileNotFoundError, PermissionError):
            err = []
        why = " (command not found)" if rc == 127 else (f": {err[-1].strip()}" if err else "")
        msg = (f"preflight could not run on {where}: [slurm] dynspec exited {rc}{why}; the server was not "
               f"started (set [slurm] dynspec to how the nodes run dynspec, or launch with --no-preflight)")
        return SlurmOutcome("inconclusive", 2, "preflight-failed", msg, states, st, culprit=r, preflight=pre)
    first = next((f for f in p.get("findings") or [] if f.get("severity") == "error"), None)
    msg = f"preflight on {where} is dead" + (f": {first['code']} {first['message']}" if first else "") + (
        f"; fix: {first['fix']}" if first and first.get("fix") else "") + "; the server was not started"
    return SlurmOutcome("dead", 1, "preflight", msg, states, st, culprit=r, preflight=pre)


def _requeued(login: Host, rec: SlurmRecord, states, st: JobState, was_live: bool) -> SlurmOutcome:
    """Slurm requeued the job (its restart count went up: `scontrol requeue`, a node failure,
    preemption) or a node failed under it (NODE_FAIL): named at once, with the nodes it ran on
    and those now down, instead of the servers' logs going quiet until the stall timeout."""
    down = down_nodes(login, rec.nodes)
    what = (f"NODE_FAIL ({'; '.join(down)}): " if down else "") + (
        f"Slurm requeued the job (restart {st.restarts})" if st.restarts > rec.restarts else
        f"the job ended {st.shown()}; Slurm ended it {BY_SLURM['NODE_FAIL']}")
    where = f" on {','.join(rec.nodes) or '?'}"
    rec.restarts = st.restarts
    now = f"; it is now {st.shown()}" if st.restarts and not st.ended else ""
    if was_live:
        return SlurmOutcome("live", 0, "requeued", f"every node was live; since then {what}{where}{now}", states, st)
    return SlurmOutcome("crashed", 4, "requeued", f"{what}{where} before every node was live{now}", states, st,
                        culprit=next((i for i, n in enumerate(rec.nodes) if any(d.startswith(n + " ") for d in down)),
                                     None))


def _ended(states, st: JobState, was_live: bool) -> SlurmOutcome:
    """The job ended. `was_live`: every node was live before (then a node that never serves HTTP,
    rank 1 and up, reads as exited before ready once the job ends: that is the end, not a crash)."""
    from dynspec_cli.run.group import group_verdict

    gv = group_verdict([s.verdict for s in states])
    why = f"; Slurm ended it {BY_SLURM[st.state]}" if st.state in BY_SLURM else ""
    if was_live or gv == "live":  # the verdict was reached; the job ended afterwards (as a local server that exited)
        return SlurmOutcome("live", 0, "job-ended", f"every node was live; the job has since ended {st.shown()}{why}",
                            states, st)
    if st.state == "COMPLETED":
        return SlurmOutcome(gv if gv != "live" else "inconclusive", 3 if gv != "dead" else 1, "job-ended",
                            f"the job ended {st.shown()} before the verdict", states, st)
    return SlurmOutcome("crashed" if gv != "dead" else "dead", 4 if gv != "dead" else 1, "job-ended",
                        f"the job ended {st.shown()} before every node was live{why}", states, st)


# --------------------------------------------------------------------------------------------------
# nothing orphaned when dynspec itself is killed

# The guard: a detached shell on the login host (its own session: neither a Ctrl-C at the terminal
# nor a dropped SSH connection reaches it). It cancels the job once dynspec is gone: on this
# machine when dynspec's pid is (at once); over SSH when dynspec's heartbeat has been quiet for
# longer than a dropped connection is given to come back. `release` (live, --detach, --keep,
# --no-watch) ends it; `fire` cancels at once. It waits for sbatch's answer (job.id) if need be.
GUARD = r"""d=$1; g=$2; grace=$3; pid=$4; last=; quiet=0
alive() {
  if [ -d /proc/self ]; then
    IFS= read -r l 2>/dev/null </proc/"$1"/stat || return 1
    s=${l##*") "}; s=${s%% *}
    case $s in Z|X|x) return 1;; esac
    return 0
  fi
  kill -0 "$1" 2>/dev/null
}
while :; do
  [ -e "$d/$g.release" ] && exit 0
  [ -e "$d/$g.fire" ] && { why="dynspec stopped watching"; break; }
  if [ -n "$pid" ]; then
    alive "$pid" || { why="dynspec (pid $pid) is gone"; break; }
  else
    beat=$(cat "$d/$g.beat" 2>/dev/null)
    if [ "$beat" = "$last" ]; then quiet=$((quiet + 1)); else quiet=0; last=$beat; fi
    [ "$quiet" -ge "$grace" ] && { why="no word from dynspec for ${grace}s"; break; }
  fi
  sleep 1
done
n=0
while [ ! -e "$d/job.id" ] && [ "$n" -lt 120 ]; do sleep 1; n=$((n + 1)); done
jid=$(cat "$d/job.id" 2>/dev/null)
[ -n "$jid" ] || { echo "dynspec guard $g: $why; no job was submitted"; exit 0; }
echo "dynspec guard $g: $why: scancel $jid"
scancel "$jid"
"""
HEARTBEAT_EVERY = 3.0


class Guard:
    """Nothing orphaned when dynspec itself dies (SIGKILL, a crash, a connection that stays down):
    the GUARD shell on the login host, for the job of the job dir `jobdir`."""

    def __init__(self, login: Host, jobdir: str):
        import os
        import uuid

        self.login, self.jobdir = login, jobdir
        self.token = f"guard-{uuid.uuid4().hex[:8]}"
        here = login.shares_local_files  # this machine: dynspec's pid tells
        self.grace = int(login.reconnect_for + 30)
        self._stop = threading.Event()
        self._beat()
        login.spawn_tracked(["sh", "-c", GUARD, "sh", jobdir, self.token, str(self.grace),
                             str(os.getpid()) if here else ""], env=cluster_env(login) or None,
                            log_path=f"{jobdir}/guard.log", pid_file=f"{jobdir}/{self.token}.pid")
        if not here:
            threading.Thread(target=self._beating, daemon=True, name="dynspec-slurm-guard").start()

    def _beat(self) -> None:
        self.login.write_file(f"{self.jobdir}/{self.token}.beat", f"{time.time():.3f}\n".encode())

    def _beating(self) -> None:
        while not self._stop.wait(HEARTBEAT_EVERY):
            try:
                self._beat()
            except (OSError, TransportError):
                pass  # a drop: the next beat (the guard allows `grace` seconds)

    def release(self) -> None:
        """The job stays (live, --detach, --keep, --no-watch)."""
        self._end("release")

    def fire(self) -> None:
        """Cancel through the guard as well (the caller also cancels and confirms it)."""
        self._end("fire")

    def _end(self, word: str) -> None:
        self._stop.set()
        try:
            self.login.write_file(f"{self.jobdir}/{self.token}.{word}", b"")
        except (OSError, TransportError):
            pass  # unreachable: the guard's heartbeat goes quiet and it cancels the job
