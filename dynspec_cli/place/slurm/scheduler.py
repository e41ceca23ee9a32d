"""The scheduler's commands, run on the login host (sbatch's siblings: squeue, scontrol, sacct,
sinfo, scancel), and the job's state as they tell it. Every one goes through `run`: Slurm's own
message becomes one line (SlurmError, exit 2), and asking is retried through a reconnect."""
from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import Optional

from dynspec_cli.run.control import RunError
from dynspec_cli.transport import Host, TransportError

ENDED = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "OUT_OF_MEMORY", "NODE_FAIL", "PREEMPTED", "BOOT_FAIL",
         "DEADLINE", "SPECIAL_EXIT", "REVOKED"}
# ended by Slurm itself, not by the server's own exit: the job's state says why the nodes stopped
BY_SLURM = {"TIMEOUT": "at its time limit ([slurm] time)", "OUT_OF_MEMORY": "for running out of memory",
            "NODE_FAIL": "because a node failed", "PREEMPTED": "to preempt it", "CANCELLED": "on an scancel",
            "DEADLINE": "at its deadline", "BOOT_FAIL": "because a node failed to boot"}
WAITING = {"PENDING", "CONFIGURING", "REQUEUED", "RESV_DEL_HOLD", "REQUEUE_HOLD", "REQUEUE_FED", "SUSPENDED"}


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


def one_line(res) -> str:
    text = (res.stderr.decode("utf-8", "replace") + "\n" + res.text).strip()
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return "; ".join(lines[:2]) or f"exit {res.exit_code}"


def run(login: Host, argv: list[str], *, timeout: float = 60, input: Optional[bytes] = None,
         idempotent: bool = True):
    """A Slurm command on the login host. Asking (squeue, scontrol, sacct) and scancel are
    idempotent: a connection drop under them is retried through a reconnect."""
    try:
        return login.run(argv, timeout=timeout, input=input, idempotent=idempotent)
    except TransportError as e:
        raise SlurmError(f"{argv[0]} on {login.name}: {e}") from None



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
    res = run(login, ["squeue", "-h", "-j", jid, "-O", "State:|,Reason:|,NodeList:|,RestartCnt"], timeout=timeout)
    line = res.text.strip().splitlines()[0] if res.ok and res.text.strip() else ""
    if line:
        st, reason, nodes, restarts = (line.split("|") + ["", "", ""])[:4]
        if st not in ENDED:
            return JobState(st, reason, nodes, restarts=int(restarts) if restarts.strip().isdigit() else 0)
    res = run(login, ["scontrol", "show", "job", "-o", jid], timeout=timeout)
    if res.ok and "JobState=" in res.text:
        kv = dict(re.findall(r"(\w+)=(\S*)", res.text))
        return JobState(kv.get("JobState", "UNKNOWN"), kv.get("Reason", ""), kv.get("NodeList", ""),
                        kv.get("ExitCode", ""), int(kv.get("Restarts", "0") or 0))
    res = run(login, ["sacct", "-n", "-X", "-D", "-P", "-j", jid, "-o", "State,Reason,NodeList,ExitCode"],
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
    res = run(login, ["sinfo", "-h", "-N", "-n", ",".join(nodes), "-o", "%N|%T|%E"], timeout=30)
    out = []
    for line in res.text.splitlines() if res.ok else []:
        node, state, reason = (line.split("|") + ["", ""])[:3]
        if any(w in state.upper() for w in ("DOWN", "FAIL", "NOT_RESPONDING", "NO_RESPOND")) or state.endswith("*"):
            out.append(f"{node} {state.upper()}" + (f": {reason}" if reason and reason != "none" else ""))
    return sorted(set(out))


def queued(login: Host, jid: str) -> bool:
    """Whether `squeue` still lists the job (pending, running or completing)."""
    res = run(login, ["squeue", "-h", "-j", jid, "-o", "%T"], timeout=30)
    st = res.text.strip()
    return res.ok and bool(st) and st not in ENDED


def cancel(login: Host, jid: str, *, wait: float = 60.0) -> bool:
    """`scancel` the job and wait until squeue no longer lists it; True once it is gone."""
    if not queued(login, jid):
        return True
    res = run(login, ["scancel", jid], timeout=30)
    if not res.ok and "Invalid job id" not in one_line(res):
        raise SlurmError(f"scancel {jid}: {one_line(res)}")
    end = time.monotonic() + wait
    while time.monotonic() < end:
        if not queued(login, jid):
            return True
        time.sleep(0.3)
    return False


def hostnames(login: Host, nodelist: str) -> list[str]:
    if not nodelist or nodelist in ("(null)", "None"):
        return []
    res = run(login, ["scontrol", "show", "hostnames", nodelist], timeout=30)
    return res.text.split() if res.ok else []


def node_addr(login: Host, node: str) -> str:
    res = run(login, ["scontrol", "show", "node", "-o", node], timeout=30)
    m = re.search(r"\bNodeAddr=(\S+)", res.text) if res.ok else None
    return m.group(1) if m else node


def check_partition(login: Host, partition: Optional[str]) -> None:
    """An unknown partition, in Slurm's own words, before anything is submitted."""
    if partition is None:
        return
    res = run(login, ["scontrol", "show", "partition", partition], timeout=30)
    if not res.ok:
        raise SlurmError(f"partition {partition!r}: {one_line(res)}")

