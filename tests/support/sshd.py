"""Real OpenSSH servers on 127.0.0.1 for tests: no mocks.

`SSHLab` starts Debian's `/usr/sbin/sshd -D -e -f <cfg>` twice (the target and a ProxyJump
bastion), each on a free port with its own generated ed25519 host key and sshd_config
(AuthorizedKeysFile in the temp dir, PermitRootLogin prohibit-password, UsePAM no, StrictModes no,
PidFile in the temp dir), and writes a private `known_hosts` and `ssh_config` (never ~/.ssh):

    dut              the target                          bastion         the bastion
    dut-via-bastion  ProxyJump bastion                   dut-via-chain   ProxyJump bastion,bastion
    jump-nested      bastion, reached via ProxyJump bastion
    dut-nested       ProxyJump jump-nested (a jump host with its own ProxyJump)
    dut-badkey       a key that is not authorized (IdentitiesOnly yes)

Fixtures (import them into a conftest.py to use them elsewhere):
    ssh_lab      session-scoped SSHLab
    ssh_host     an SSHHost for `dut`, closed after the test
    private_sshd a function-scoped extra sshd (SSHServer) with alias `private` in the lab's
                 ssh_config, for tests that kill sessions or stop the server
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

import pytest

from tests.support.procs import SUITE_MARK, on_cleanup

SSHD = "/usr/sbin/sshd"
SSH_KEYGEN = shutil.which("ssh-keygen") or "/usr/bin/ssh-keygen"
INSTALL_HINT = "apt-get install -y openssh-server openssh-client"


def _dynspec_home_env(session_env: dict[str, str] | None = None) -> str:
    """The suite's DYNSPEC_HOME (tests/conftest.py) for the sessions too: a test host's records land
    in the temp home, never in the sshd user's real ~/.dynspec. A server whose sessions get their own
    (temporary) HOME keeps dynspec's default there, ~/.dynspec, which is what such tests look at."""
    mark = os.environ.get(SUITE_MARK, "")  # this run's mark too: what a session starts is taken down with it
    mark = f" {SUITE_MARK}={mark}" if mark and " " not in mark else ""
    home = os.environ.get("DYNSPEC_SUITE_HOME")  # (not DYNSPEC_HOME: the test starting a session sshd may
    session_env = session_env or {}             # have pointed that at its own private home)
    if "HOME" in session_env or "DYNSPEC_HOME" in session_env or not home or " " in home:
        return mark
    return f"{mark} DYNSPEC_HOME={home}"


def require_openssh() -> None:
    """SSH tests must run in CI, never skip: fail with the install command instead."""
    missing = [p for p in (SSHD, SSH_KEYGEN) if not os.access(p, os.X_OK)]
    if missing:
        pytest.fail(f"OpenSSH is needed for the ssh tests ({', '.join(missing)} missing): {INSTALL_HINT}",
                    pytrace=False)


def keygen(path: Path, comment: str) -> str:
    """Generate an ed25519 key pair at path (no passphrase); return the public key line."""
    subprocess.run([SSH_KEYGEN, "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path)],
                   check=True, stdin=subprocess.DEVNULL)
    return Path(f"{path}.pub").read_text().strip()


def fingerprint(pub_path: Path) -> str:
    """`SHA256:...` as OpenSSH prints it."""
    out = subprocess.run([SSH_KEYGEN, "-l", "-f", str(pub_path)], check=True, capture_output=True, text=True)
    return out.stdout.split()[1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _children(pid: int) -> list[int]:
    kids = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            stat = (d / "stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[1]) == pid and fields[0] not in "ZX":
            kids.append(int(d.name))
    return kids


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


@dataclass
class SSHServer:
    name: str
    dir: Path
    port: int
    host_key: Path
    proc: subprocess.Popen
    log: Path

    @property
    def host_pub(self) -> str:
        return Path(f"{self.host_key}.pub").read_text().strip()

    @property
    def fingerprint(self) -> str:
        return fingerprint(Path(f"{self.host_key}.pub"))

    def known_hosts_line(self) -> str:
        kind, b64 = self.host_pub.split()[:2]
        return f"[127.0.0.1]:{self.port} {kind} {b64}"

    def session_pids(self) -> list[int]:
        """The sshd processes serving connections (children of the listener and theirs)."""
        return session_pids(self.proc.pid)

    def kill_sessions(self, sig: int = signal.SIGKILL) -> list[int]:
        """Kill every connection's sshd processes: clients see their TCP connection die."""
        pids = self.session_pids()
        for pid in pids:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        return pids

    def accepted_logins(self) -> int:
        return self.log.read_text(errors="replace").count("Accepted publickey")

    def stop(self) -> None:
        stop_sshd(self.proc)


def session_pids(listener: int) -> list[int]:
    out, todo = [], [listener]
    while todo:
        for kid in _children(todo.pop()):
            if _comm(kid).startswith("sshd"):
                out.append(kid)
                todo.append(kid)
    return out


def stop_sshd(proc: subprocess.Popen) -> None:
    """The listener (SIGTERM, then SIGKILL after 5 s) and every session it served."""
    pids = session_pids(proc.pid) if proc.poll() is None else []
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def start_sshd(dir: Path, name: str, authorized_keys: list[str], *, user: str,
               session_env: dict[str, str] | None = None, extra_config: str = "") -> SSHServer:
    """session_env: more variables for every session (e.g. HOME, so that run records a test makes
    stay in its temp dir and never reach the real ~/.dynspec). extra_config: more sshd_config
    lines (e.g. a ForceCommand that makes every command start late)."""
    require_openssh()
    Path("/run/sshd").mkdir(mode=0o755, parents=True, exist_ok=True)  # privilege separation dir
    dir.mkdir(parents=True, exist_ok=True)
    host_key = dir / "ssh_host_ed25519_key"
    if not host_key.exists():
        keygen(host_key, f"{name}-host")
    auth = dir / "authorized_keys"
    auth.write_text("".join(k + "\n" for k in authorized_keys))
    auth.chmod(0o600)
    log = dir / "sshd.log"
    last_error = ""
    for _ in range(5):
        port = free_port()
        cfg = dir / "sshd_config"
        setenv = " ".join(f"{k}={v}" for k, v in {"SHLVL": "1", **(session_env or {})}.items())
        cfg.write_text(f"""\
Port {port}
ListenAddress 127.0.0.1
HostKey {host_key}
PidFile {dir / 'sshd.pid'}
AuthorizedKeysFile {auth}
AllowUsers {user}
PermitRootLogin prohibit-password
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
UseDNS no
PrintMotd no
AllowTcpForwarding yes
X11Forwarding no
MaxStartups 200
MaxSessions 200
LogLevel VERBOSE
# bash sources ~/.bashrc for ssh commands only when SHLVL < 2: skip it (pyenv/conda init costs
# ~0.5 s per command here); real hosts pay that, the tests need not
SetEnv {setenv}{_dynspec_home_env(session_env or {})}
{extra_config}""")
        logf = open(log, "ab")
        proc = subprocess.Popen([SSHD, "-D", "-e", "-f", str(cfg)], stdin=subprocess.DEVNULL,
                                stdout=logf, stderr=logf, start_new_session=True)
        on_cleanup(lambda proc=proc: stop_sshd(proc))
        logf.close()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
                    if s.recv(64).startswith(b"SSH-"):
                        return SSHServer(name=name, dir=dir, port=port, host_key=host_key, proc=proc, log=log)
            except OSError:
                time.sleep(0.02)
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        last_error = log.read_text(errors="replace")[-2000:]
    raise RuntimeError(f"sshd {name} did not start: {last_error}")


@dataclass
class SSHLab:
    dir: Path
    user: str
    user_key: Path
    bad_key: Path
    target: SSHServer
    bastion: SSHServer
    extra: dict[str, SSHServer] = field(default_factory=dict)

    @property
    def ssh_config(self) -> Path:
        return self.dir / "ssh_config"

    @property
    def known_hosts(self) -> Path:
        return self.dir / "known_hosts"

    def write_files(self) -> None:
        def block(alias: str, port: int, key: Path, extra: str = "") -> str:
            return (f"Host {alias}\n  HostName 127.0.0.1\n  Port {port}\n  User {self.user}\n"
                    f"  IdentityFile {key}\n  IdentitiesOnly yes\n{extra}")

        t, b = self.target.port, self.bastion.port
        text = "".join([
            block("dut", t, self.user_key),
            block("bastion", b, self.user_key),
            block("dut-via-bastion", t, self.user_key, "  ProxyJump bastion\n"),
            block("dut-via-chain", t, self.user_key, "  ProxyJump bastion,bastion\n"),
            block("jump-nested", b, self.user_key, "  ProxyJump bastion\n"),
            block("dut-nested", t, self.user_key, "  ProxyJump jump-nested\n"),
            block("dut-badkey", t, self.bad_key),
            *(block(alias, srv.port, self.user_key) for alias, srv in self.extra.items()),
            f"Host *\n  UserKnownHostsFile {self.known_hosts}\n  GlobalKnownHostsFile /dev/null\n"
            f"  BatchMode yes\n",
        ])
        self.ssh_config.write_text(text)
        servers = [self.target, self.bastion, *self.extra.values()]
        self.known_hosts.write_text("".join(s.known_hosts_line() + "\n" for s in servers))

    def host(self, alias: str = "dut", **kw):
        from dynspec_cli.transport import SSHHost

        kw.setdefault("ssh_config_path", str(self.ssh_config))
        kw.setdefault("known_hosts_path", str(self.known_hosts))
        kw.setdefault("connect_timeout", 10)
        return SSHHost(alias, **kw)

    def add_server(self, alias: str, *, session_env: dict[str, str] | None = None,
                   extra_config: str = "") -> SSHServer:
        pub = Path(f"{self.user_key}.pub").read_text().strip()
        srv = start_sshd(self.dir / alias, alias, [pub], user=self.user, session_env=session_env,
                         extra_config=extra_config)
        self.extra[alias] = srv
        self.write_files()
        return srv

    def remove_server(self, alias: str) -> None:
        srv = self.extra.pop(alias, None)
        if srv is not None:
            srv.stop()
            self.write_files()

    def stop(self) -> None:
        for srv in [*self.extra.values(), self.target, self.bastion]:
            srv.stop()


def make_lab(dir: Path) -> SSHLab:
    require_openssh()
    dir.mkdir(parents=True, exist_ok=True)
    user = getpass.getuser()
    user_key, bad_key = dir / "id_user", dir / "id_other"
    pub = keygen(user_key, "dynspec-test-user")
    keygen(bad_key, "dynspec-test-unauthorized")
    target = start_sshd(dir / "target", "target", [pub], user=user)
    try:
        bastion = start_sshd(dir / "bastion", "bastion", [pub], user=user)
    except BaseException:
        target.stop()
        raise
    lab = SSHLab(dir=dir, user=user, user_key=user_key, bad_key=bad_key, target=target, bastion=bastion)
    lab.write_files()
    return lab


@pytest.fixture(scope="session")
def ssh_lab(tmp_path_factory):
    lab = make_lab(tmp_path_factory.mktemp("sshlab"))
    yield lab
    lab.stop()


@pytest.fixture
def ssh_host(ssh_lab):
    host = ssh_lab.host("dut")
    yield host
    host.close()


@pytest.fixture
def private_sshd(ssh_lab):
    srv = ssh_lab.add_server("private")
    yield srv
    ssh_lab.remove_server("private")
