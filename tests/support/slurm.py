"""A real Slurm cluster on this machine for tests: Debian's slurmctld + slurmd + munge, no mock.

`slurm_cluster` (session-scoped) builds a private two-node cluster under a temp dir: its own munge
key and socket (`munged --socket`), a slurm.conf with private ports, spool and state dirs,
`SlurmUser=root`, `ProctrackType=proctrack/linuxproc`, `TaskPlugin=task/none`, nodes n1 and n2 as
two `slurmd -N nX` daemons with their own `Port` and `NodeAddr=127.0.0.1`, one partition `debug`
over both. It waits until `sinfo` shows both nodes idle, exports SLURM_CONF for the test process
(and the dynspec it starts), and at the end cancels whatever is still queued, checks that nothing
is left in `squeue`, and stops the daemons.

Slurm's daemons must run as root here (SlurmUser=root, no systemd): the tests skip, with the
reason printed, when not root; in CI (root) they run, and a missing package fails them with the
install command instead of skipping."""
from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.support.procs import on_cleanup

DAEMONS = ("/usr/sbin/slurmctld", "/usr/sbin/slurmd", "/usr/sbin/munged")
CLIENTS = ("sbatch", "squeue", "scontrol", "scancel", "sinfo", "srun")
INSTALL_HINT = "apt-get install -y --no-install-recommends slurmctld slurmd slurm-client munge"
NODES = ("n1", "n2")


def _free_ports(n: int) -> list[int]:
    socks, ports = [], []
    for _ in range(n):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        socks.append(s)
        ports.append(s.getsockname()[1])
    for s in socks:
        s.close()
    return ports


@dataclass
class SlurmCluster:
    root: Path
    conf: Path
    partition: str = "debug"
    nodes: tuple = NODES
    procs: list = field(default_factory=list)
    stopped: bool = False

    @property
    def env(self) -> dict[str, str]:
        return {**os.environ, "SLURM_CONF": str(self.conf)}

    def run(self, *argv: str, check: bool = True, timeout: float = 30) -> subprocess.CompletedProcess:
        return subprocess.run(list(argv), capture_output=True, text=True, env=self.env, timeout=timeout, check=check)

    def queued(self) -> list[str]:
        """Every job slurmctld still lists as pending/running/completing: `squeue` as a user reads it."""
        r = self.run("squeue", "-h", "-o", "%i %T %j", check=False)
        return [ln for ln in r.stdout.splitlines() if ln.strip()]

    def wait_empty(self, timeout: float = 30) -> bool:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if not self.queued():
                return True
            time.sleep(0.3)
        return False

    def idle(self) -> bool:
        r = self.run("sinfo", "-h", "-N", "-o", "%N %t", check=False)
        states = dict(ln.split() for ln in r.stdout.splitlines() if len(ln.split()) == 2)
        return all(states.get(n) == "idle" for n in self.nodes)


def _write_conf(d: Path, ctld_port: int, node_ports: list[int]) -> Path:
    host = socket.gethostname()
    lines = [
        "ClusterName=dynspectest",
        f"SlurmctldHost={host}(127.0.0.1)",
        f"SlurmctldPort={ctld_port}",
        "SlurmUser=root",
        "SlurmdUser=root",
        "AuthType=auth/munge",
        f"AuthInfo=socket={d}/munge/sock",
        "CredType=cred/munge",
        "ProctrackType=proctrack/linuxproc",
        "TaskPlugin=task/none",
        "JobAcctGatherType=jobacct_gather/none",
        "AccountingStorageType=accounting_storage/none",
        "SelectType=select/cons_tres",
        "MpiDefault=none",
        "ReturnToService=2",
        "SchedulerType=sched/backfill",
        "SlurmctldTimeout=30",
        "SlurmdTimeout=30",
        "InactiveLimit=0",
        "KillWait=5",
        "MinJobAge=300",
        f"StateSaveLocation={d}/state",
        f"SlurmctldPidFile={d}/slurmctld.pid",
        f"SlurmctldLogFile={d}/slurmctld.log",
        f"SlurmdSpoolDir={d}/spool/%n",
        f"SlurmdPidFile={d}/slurmd-%n.pid",
        f"SlurmdLogFile={d}/slurmd-%n.log",
    ]
    for name, port in zip(NODES, node_ports):
        lines.append(f"NodeName={name} NodeHostname={host} NodeAddr=127.0.0.1 Port={port} CPUs=1 State=UNKNOWN")
    lines.append(f"PartitionName=debug Nodes={','.join(NODES)} Default=YES MaxTime=INFINITE State=UP")
    conf = d / "slurm.conf"
    conf.write_text("\n".join(lines) + "\n")
    return conf


def start_cluster(root: Path) -> SlurmCluster:
    for sub in ("munge", "state", "spool/n1", "spool/n2"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    key = root / "munge" / "key"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o400)
    (root / "munge").chmod(0o700)
    ctld_port, *node_ports = _free_ports(1 + len(NODES))
    conf = _write_conf(root, ctld_port, node_ports)
    cl = SlurmCluster(root, conf)
    on_cleanup(lambda: stop_cluster(cl))  # (also when interrupted while the daemons start)
    munge = [DAEMONS[2], f"--socket={root}/munge/sock", f"--key-file={key}", "--force", "--foreground",
             f"--pid-file={root}/munge/pid", f"--log-file={root}/munge/log", f"--seed-file={root}/munge/seed"]
    cl.procs.append(subprocess.Popen(munge, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                     start_new_session=True))
    _wait(lambda: (root / "munge" / "sock").exists(), 15, "munged did not create its socket")
    cl.procs.append(subprocess.Popen([DAEMONS[0], "-D", "-i", "-f", str(conf)], env=cl.env,
                                     stdout=subprocess.DEVNULL, stderr=open(root / "slurmctld.err", "wb"),
                                     start_new_session=True))
    _wait(lambda: cl.run("scontrol", "ping", check=False).stdout.count("UP") > 0, 30,
          "slurmctld did not answer scontrol ping", root / "slurmctld.log")
    for n in NODES:
        cl.procs.append(subprocess.Popen([DAEMONS[1], "-D", "-f", str(conf), "-N", n], env=cl.env,
                                         stdout=subprocess.DEVNULL, stderr=open(root / f"slurmd-{n}.err", "wb"),
                                         start_new_session=True))
    _wait(cl.idle, 60, "nodes n1, n2 did not become idle in sinfo", root / "slurmctld.log")
    return cl


def _wait(cond, timeout: float, what: str, log: Path | None = None) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return
        time.sleep(0.2)
    tail = log.read_text(errors="replace")[-2000:] if log is not None and log.exists() else ""
    raise RuntimeError(f"{what} within {timeout:g}s\n{tail}")


def stop_cluster(cl: SlurmCluster) -> list[str]:
    """Cancel what is left, note it (a test that left a job behind is a failure), stop the daemons."""
    if cl.stopped:
        return []
    cl.stopped = True
    left = cl.queued() if cl.procs else []
    if left:
        cl.run("scancel", "--full", *[ln.split()[0] for ln in left], check=False)
        cl.wait_empty(30)
    for p in reversed(cl.procs):
        try:
            os.killpg(p.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    for p in reversed(cl.procs):
        try:
            p.wait(15)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait(5)
    return left


def require_slurm() -> None:
    if os.geteuid() != 0:
        print("\nslurm tests skipped: Slurm's daemons (SlurmUser=root, munged) need root here")
        pytest.skip("slurm tests need root (Slurm's daemons run as SlurmUser=root, no systemd)")
    missing = [p for p in DAEMONS if not os.access(p, os.X_OK)] + [c for c in CLIENTS if shutil.which(c) is None]
    if missing:
        pytest.fail(f"Slurm is needed for the slurm tests ({', '.join(missing)} missing): {INSTALL_HINT}",
                    pytrace=False)


@pytest.fixture(scope="session")
def slurm_cluster():
    require_slurm()
    root = Path(tempfile.mkdtemp(prefix="dynspec-slurm-"))
    root.chmod(0o755)
    cl = start_cluster(root)
    old = os.environ.get("SLURM_CONF")
    os.environ["SLURM_CONF"] = str(cl.conf)
    try:
        yield cl
    finally:
        if old is None:
            os.environ.pop("SLURM_CONF", None)
        else:
            os.environ["SLURM_CONF"] = old
        left = stop_cluster(cl)
        shutil.rmtree(root, ignore_errors=True)
        assert not left, f"jobs left in squeue after the slurm tests: {left}"


@pytest.fixture
def slurm(slurm_cluster):
    """The session cluster, checked empty after each test: nothing a test launched stays queued."""
    yield slurm_cluster
    assert slurm_cluster.wait_empty(30), f"left in squeue: {slurm_cluster.queued()}"
