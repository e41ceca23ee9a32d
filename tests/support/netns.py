"""Several real hosts on one machine for tests: network namespaces, each with its own OpenSSH sshd.

`NetnsLab(n)` creates a Linux bridge in the root namespace holding 10.231.X.1/24 (X: the first
of 10.231.20-219 not in use on this machine), and n namespaces `dsn<pid>-<i>`, each joined to the
bridge by a veth pair, holding 10.231.X.(10+i)/24 and running `/usr/sbin/sshd -D -e -f cfg` on
port 22 of that address (host keys and sshd_config from tests/support/sshd.py's helpers).
Addresses exist only on these veths and the bridge; no route is added anywhere else, so traffic
stays between the namespaces and the root namespace of this machine. A private ssh_config
(aliases node0..node{n-1}) and known_hosts are written in the lab's directory (never ~/.ssh).

Everything is torn down by `stop()` (the session fixture calls it, also on failure; the suite's
cleanup on exit, SIGINT or SIGTERM is the last resort: tests/support/procs.py). Needs root and
iproute2; `netns_unavailable()` says why not otherwise.

Fixture: `netns_lab` (session-scoped, 4 namespaces); tests use lab.ssh_config / lab.known_hosts,
lab.alias(i), lab.addr(i), lab.kill_sessions(i).
"""
from __future__ import annotations

import getpass
import os
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import pytest

from tests.support.procs import on_cleanup
from tests.support.sshd import SSHD, _dynspec_home_env, keygen, require_openssh, session_pids

IP = shutil.which("ip") or "/usr/sbin/ip"


def _ip(*args: str, ns: Optional[str] = None, check: bool = True) -> subprocess.CompletedProcess:
    cmd = ([IP, "netns", "exec", ns, IP] if ns else [IP]) + list(args)
    return subprocess.run(cmd, capture_output=True, text=True, check=check, stdin=subprocess.DEVNULL)


def netns_unavailable() -> Optional[str]:
    """Why namespaces cannot be built here (None: they can)."""
    if os.geteuid() != 0:
        return "netns tests need root (ip netns add)"
    if not os.access(IP, os.X_OK):
        return "netns tests need iproute2 (apt-get install -y iproute2)"
    probe = f"dsnprobe{os.getpid()}"
    r = subprocess.run([IP, "netns", "add", probe], capture_output=True, text=True)
    if r.returncode != 0:
        return f"ip netns add failed: {r.stderr.strip()[:200]}"
    subprocess.run([IP, "netns", "del", probe], capture_output=True)
    r = subprocess.run([IP, "link", "add", f"dsnpb{os.getpid() % 100000}", "type", "bridge"], capture_output=True, text=True)
    if r.returncode != 0:
        return f"cannot create a bridge: {r.stderr.strip()[:200]}"
    subprocess.run([IP, "link", "del", f"dsnpb{os.getpid() % 100000}"], capture_output=True)
    return None


def _free_subnet() -> int:
    used = subprocess.run([IP, "-4", "-o", "addr", "show"], capture_output=True, text=True).stdout
    for x in range(20, 220):
        if f"10.231.{x}." not in used:
            return x
    raise RuntimeError("no free 10.231.X.0/24 test subnet")


@dataclass
class NsHost:
    index: int
    ns: str
    addr: str
    dir: Path
    host_key: Path
    proc: Optional[subprocess.Popen] = None
    log: Optional[Path] = None

    def session_pids(self) -> list[int]:
        """sshd processes serving connections (children of the listener and theirs)."""
        return [] if self.proc is None else session_pids(self.proc.pid)


@dataclass
class NetnsLab:
    dir: Path
    n: int
    user: str = field(default_factory=getpass.getuser)
    subnet: int = 0
    bridge: str = ""
    hosts: list[NsHost] = field(default_factory=list)
    veths: list[str] = field(default_factory=list)
    user_key: Optional[Path] = None
    stopped: bool = False

    @property
    def ssh_config(self) -> Path:
        return self.dir / "ssh_config"

    @property
    def known_hosts(self) -> Path:
        return self.dir / "known_hosts"

    def alias(self, i: int) -> str:
        return f"node{i}"

    def addr(self, i: int) -> str:
        return self.hosts[i].addr

    def start(self) -> "NetnsLab":
        require_openssh()
        on_cleanup(self.stop)  # (before anything exists: an interrupted start is torn down too)
        Path("/run/sshd").mkdir(mode=0o755, parents=True, exist_ok=True)
        self.dir.mkdir(parents=True, exist_ok=True)
        tag = os.getpid() % 100000
        self.subnet = _free_subnet()
        self.bridge = f"dsnbr{tag}"
        _ip("link", "add", self.bridge, "type", "bridge")
        _ip("addr", "add", f"10.231.{self.subnet}.1/24", "dev", self.bridge)
        _ip("link", "set", self.bridge, "up")
        self.user_key = self.dir / "id_user"
        pub = keygen(self.user_key, "dynspec-netns-user")
        auth = self.dir / "authorized_keys"
        auth.write_text(pub + "\n")
        auth.chmod(0o600)
        for i in range(self.n):
            ns = f"dsn{tag}-{i}"
            addr = f"10.231.{self.subnet}.{10 + i}"
            hdir = self.dir / ns
            hdir.mkdir()
            key = hdir / "ssh_host_ed25519_key"
            keygen(key, f"{ns}-host")
            h = NsHost(i, ns, addr, hdir, key)
            self.hosts.append(h)
            _ip("netns", "add", ns)
            outer, inner = f"dsn{tag}h{i}", f"dsn{tag}n{i}"
            _ip("link", "add", outer, "type", "veth", "peer", "name", inner)
            self.veths.append(outer)
            _ip("link", "set", inner, "netns", ns)
            _ip("link", "set", outer, "master", self.bridge)
            _ip("link", "set", outer, "up")
            _ip("link", "set", "lo", "up", ns=ns)
            _ip("addr", "add", f"{addr}/24", "dev", inner, ns=ns)
            _ip("link", "set", inner, "up", ns=ns)
            self._start_sshd(h, auth)
        self.write_files()
        for h in self.hosts:
            self._wait_ssh(h)
        return self

    def _start_sshd(self, h: NsHost, auth: Path) -> None:
        cfg = h.dir / "sshd_config"
        cfg.write_text(f"""\
Port 22
ListenAddress {h.addr}
HostKey {h.host_key}
PidFile {h.dir / 'sshd.pid'}
AuthorizedKeysFile {auth}
AllowUsers {self.user}
PermitRootLogin prohibit-password
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
UseDNS no
PrintMotd no
X11Forwarding no
MaxStartups 200
MaxSessions 200
LogLevel VERBOSE
SetEnv SHLVL=1{_dynspec_home_env()}
""")
        h.log = h.dir / "sshd.log"
        logf = open(h.log, "ab")
        h.proc = subprocess.Popen([IP, "netns", "exec", h.ns, SSHD, "-D", "-e", "-f", str(cfg)],
                                  stdin=subprocess.DEVNULL, stdout=logf, stderr=logf, start_new_session=True)
        logf.close()

    def _wait_ssh(self, h: NsHost) -> None:
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            if h.proc.poll() is not None:
                break
            try:
                with socket.create_connection((h.addr, 22), timeout=1) as s:
                    if s.recv(64).startswith(b"SSH-"):
                        return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError(f"sshd in {h.ns} did not start: {h.log.read_text(errors='replace')[-1500:]}")

    def write_files(self) -> None:
        blocks = [f"Host {self.alias(h.index)}\n  HostName {h.addr}\n  Port 22\n  User {self.user}\n"
                  f"  IdentityFile {self.user_key}\n  IdentitiesOnly yes\n" for h in self.hosts]
        blocks.append(f"Host *\n  UserKnownHostsFile {self.known_hosts}\n  GlobalKnownHostsFile /dev/null\n  BatchMode yes\n")
        self.ssh_config.write_text("".join(blocks))
        lines = []
        for h in self.hosts:
            kind, b64 = Path(f"{h.host_key}.pub").read_text().split()[:2]
            lines.append(f"{h.addr} {kind} {b64}\n")
        self.known_hosts.write_text("".join(lines))

    def kill_sessions(self, i: int, sig: int = signal.SIGKILL) -> list[int]:
        """Kill every SSH connection to node i (its sshd session processes): clients see the TCP
        connection die; the listener stays, so they can reconnect."""
        pids = self.hosts[i].session_pids()
        for pid in pids:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        return pids

    def accepted_logins(self, i: int) -> int:
        return self.hosts[i].log.read_text(errors="replace").count("Accepted publickey")

    def netns_pids(self, i: int) -> list[int]:
        r = subprocess.run([IP, "netns", "pids", self.hosts[i].ns], capture_output=True, text=True)
        return [int(x) for x in r.stdout.split()]

    def stop(self) -> None:
        if self.stopped:
            return
        self.stopped = True
        for h in self.hosts:
            # everything still running in the namespace (servers of a failed test, sshd sessions)
            for pid in self.netns_pids(h.index):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            if h.proc is not None and h.proc.poll() is None:
                h.proc.kill()
            if h.proc is not None:
                try:
                    h.proc.wait(5)
                except subprocess.TimeoutExpired:
                    pass
        for h in self.hosts:
            _ip("netns", "del", h.ns, check=False)
        for v in self.veths:
            _ip("link", "del", v, check=False)
        if self.bridge:
            _ip("link", "del", self.bridge, check=False)


@pytest.fixture(scope="session")
def netns_lab(tmp_path_factory):
    why = netns_unavailable()
    if why:
        print(f"\nnetns tests skipped: {why}")
        pytest.skip(why)
    lab = NetnsLab(tmp_path_factory.mktemp("netns"), 4)
    try:
        lab.start()
    except BaseException:
        lab.stop()
        raise
    yield lab
    lab.stop()
