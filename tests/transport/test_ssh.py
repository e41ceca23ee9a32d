"""SSH-only behaviour against real OpenSSH servers: host keys, connect errors, ProxyJump,
surviving disconnects."""
from __future__ import annotations

import hashlib
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from dynspec_cli.transport import (
    AuthFailed,
    ConnectionRefused,
    ConnectTimeout,
    HostKeyChanged,
    HostKeyUnknown,
    HostNotFound,
    SSHHost,
)
from tests.support.procs import pids_in_group
from tests.support.sshd import keygen
from tests.transport.test_host import _wait_until

pytestmark = pytest.mark.ssh


def one_line(e: BaseException) -> str:
    text = str(e)
    assert "\n" not in text and len(text) < 600, text
    return text


def test_paramiko_is_imported_lazily():
    code = ("import sys\n"
            "import dynspec_cli.transport as t\n"
            "h = t.open_host('some-alias')\n"
            "assert isinstance(h, t.SSHHost)\n"
            "t.LocalHost().run(['true'])\n"
            "assert 'paramiko' not in sys.modules, 'paramiko imported'\n")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=Path(__file__).parents[2])


# --- host keys -----------------------------------------------------------------------------------
def test_unknown_host_key_is_refused(ssh_lab, tmp_path):
    kh = tmp_path / "known_hosts"
    with pytest.raises(HostKeyUnknown) as e:
        ssh_lab.host("dut", known_hosts_path=str(kh)).connect()
    text = one_line(e.value)
    assert "dut" in text and ssh_lab.target.fingerprint in text and "127.0.0.1" in text
    assert not kh.exists()


def test_accept_new_adds_the_key_then_it_is_known(ssh_lab, tmp_path):
    kh = tmp_path / "ssh" / "known_hosts"
    with ssh_lab.host("dut", known_hosts_path=str(kh), accept_new_host_key=True) as h:
        assert h.run(["true"]).ok
    assert kh.read_text() == ssh_lab.target.known_hosts_line() + "\n"
    with ssh_lab.host("dut", known_hosts_path=str(kh)) as h:  # strict again: now known
        assert h.run(["true"]).ok
    ssh_keygen_check = subprocess.run(["ssh-keygen", "-F", f"[127.0.0.1]:{ssh_lab.target.port}", "-f", str(kh)],
                                      capture_output=True, text=True)
    assert ssh_keygen_check.returncode == 0  # OpenSSH reads what we wrote


@pytest.mark.parametrize("accept_new", [False, True])
def test_changed_host_key_is_refused_even_with_accept_new(ssh_lab, tmp_path, accept_new):
    other = tmp_path / "other_host_key"
    pub = keygen(other, "impostor").split()
    kh = tmp_path / "known_hosts"
    kh.write_text(f"[127.0.0.1]:{ssh_lab.target.port} {pub[0]} {pub[1]}\n")
    before = kh.read_text()
    with pytest.raises(HostKeyChanged) as e:
        ssh_lab.host("dut", known_hosts_path=str(kh), accept_new_host_key=accept_new).connect()
    text = one_line(e.value)
    assert ssh_lab.target.fingerprint in text and "CHANGED" in text
    assert kh.read_text() == before


def test_accept_new_from_ssh_config(ssh_lab, tmp_path):
    cfg = tmp_path / "config"
    cfg.write_text(f"Include {ssh_lab.ssh_config}\n")  # Include is inlined too
    kh = tmp_path / "kh"
    with pytest.raises(HostKeyUnknown):
        SSHHost("dut", ssh_config_path=str(cfg), known_hosts_path=str(kh)).connect()
    cfg.write_text(f"Host dut\n  StrictHostKeyChecking accept-new\nInclude {ssh_lab.ssh_config}\n")
    with SSHHost("dut", ssh_config_path=str(cfg), known_hosts_path=str(kh)) as h:
        assert h.run(["true"]).ok
    assert kh.exists()


# --- connect errors ------------------------------------------------------------------------------
def test_no_key_to_offer_is_an_auth_failure(ssh_lab, tmp_path):
    cfg = tmp_path / "config"
    cfg.write_text(f"Host keyless\n  HostName 127.0.0.1\n  Port {ssh_lab.target.port}\n")
    h = SSHHost("keyless", ssh_config_path=str(cfg), known_hosts_path=str(ssh_lab.known_hosts),
                allow_agent=False, look_for_keys=False)
    with pytest.raises(AuthFailed):
        h.connect()


def test_auth_failure(ssh_lab):
    with pytest.raises(AuthFailed) as e:
        ssh_lab.host("dut-badkey").connect()
    text = one_line(e.value)
    assert "dut-badkey" in text and "id_other" in text


def test_connection_refused(ssh_lab):
    with socket.socket() as s:  # a port that was free a moment ago and nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(ConnectionRefused) as e:
        ssh_lab.host(f"root@127.0.0.1:{port}").connect()
    assert f"127.0.0.1:{port}" in one_line(e.value)


def test_dns_failure(ssh_lab):
    with pytest.raises(HostNotFound) as e:
        ssh_lab.host("nonexistent.invalid").connect()
    assert "nonexistent.invalid" in one_line(e.value)


def test_timeout_when_no_ssh_banner(ssh_lab):
    with socket.socket() as silent:  # accepts TCP (kernel backlog) but never speaks SSH
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        port = silent.getsockname()[1]
        t0 = time.monotonic()
        with pytest.raises(ConnectTimeout) as e:
            ssh_lab.host(f"root@127.0.0.1:{port}", connect_timeout=1).connect()
        assert time.monotonic() - t0 < 5
    one_line(e.value)


def test_jump_host_that_cannot_reach_the_target(ssh_lab, tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cfg = tmp_path / "config"
    cfg.write_text(f"Host nowhere\n  HostName 127.0.0.1\n  Port {port}\n  ProxyJump bastion\n"
                   f"Include {ssh_lab.ssh_config}\n")
    with pytest.raises(ConnectionRefused) as e:
        SSHHost("nowhere", ssh_config_path=str(cfg), known_hosts_path=str(ssh_lab.known_hosts)).connect()
    assert "jump host bastion" in one_line(e.value)


# --- ProxyJump / ProxyCommand --------------------------------------------------------------------
@pytest.mark.parametrize("alias,bastion_logins", [("dut-via-bastion", 1), ("dut-via-chain", 2), ("dut-nested", 2)])
def test_proxy_jump(ssh_lab, alias, bastion_logins):
    before = ssh_lab.bastion.accepted_logins(), ssh_lab.target.accepted_logins()
    with ssh_lab.host(alias) as h:
        assert h.run(["sh", "-c", "echo $SSH_CLIENT"]).stdout.startswith(b"127.0.0.1 ")
        assert b"".join(h.stream_python(h.python, "print('through the jump')")) == b"through the jump\n"
    _wait_until(lambda: ssh_lab.bastion.accepted_logins() - before[0] == bastion_logins, 5)
    assert ssh_lab.target.accepted_logins() - before[1] == 1


def test_proxy_command(ssh_lab, tmp_path):
    cfg = tmp_path / "config"
    cfg.write_text(f"Host via-cmd\n  HostName 127.0.0.1\n  Port {ssh_lab.target.port}\n"
                   f"  IdentityFile {ssh_lab.user_key}\n"
                   f"  ProxyCommand ssh -F {ssh_lab.ssh_config} -W %h:%p bastion\n"
                   f"Include {ssh_lab.ssh_config}\n")
    with SSHHost("via-cmd", ssh_config_path=str(cfg), known_hosts_path=str(ssh_lab.known_hosts)) as h:
        assert h.run(["echo", "ok"]).stdout == b"ok\n"


def _echo_in_fresh_process(alias: str, ssh_config, known_hosts) -> str:
    """`echo ok` over SSH from a new interpreter; then whether invoke (paramiko's helper for
    `Match exec`) got loaded there."""
    code = ("import sys\n"
            "from dynspec_cli.transport import SSHHost\n"
            f"with SSHHost({alias!r}, ssh_config_path={str(ssh_config)!r}, known_hosts_path={str(known_hosts)!r}) as h:\n"
            "    sys.stdout.write(h.run(['echo', 'ok']).stdout.decode())\n"
            "sys.stdout.write('invoke loaded: %s' % ('invoke.tasks' in sys.modules))\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                       cwd=Path(__file__).parents[2])
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_match_exec_in_ssh_config(ssh_lab, tmp_path):
    """`Match exec` runs its command (paramiko uses invoke for it, which dynspec loads only then):
    the matching block's Port is the one that reaches the server."""
    cfg = tmp_path / "config"
    cfg.write_text(f"Match host via-match exec \"test -e {cfg}\"\n  Port {ssh_lab.target.port}\n"
                   f"Match host via-match exec \"false\"\n  Port 1\n"
                   f"Host via-match\n  HostName 127.0.0.1\n  Port 2\n  IdentityFile {ssh_lab.user_key}\n"
                   f"Include {ssh_lab.ssh_config}\n")
    assert _echo_in_fresh_process("via-match", cfg, ssh_lab.known_hosts) == "ok\ninvoke loaded: True"


def test_invoke_is_not_loaded_without_match_exec(ssh_lab):
    assert _echo_in_fresh_process("dut", ssh_lab.ssh_config, ssh_lab.known_hosts) == "ok\ninvoke loaded: False"


# --- surviving disconnects -----------------------------------------------------------------------
def test_commands_reconnect_after_the_connection_died(ssh_lab, private_sshd):
    with ssh_lab.host("private") as h:
        assert h.run(["true"]).ok
        private_sshd.kill_sessions()
        _wait_until(lambda: not h._connected(), 5)
        assert h.run(["echo", "again"]).stdout == b"again\n"


def test_spawn_detached_survives_disconnect(ssh_lab, private_sshd, tmp_path):
    log = tmp_path / "log"
    h = ssh_lab.host("private")
    s = h.spawn_detached(["sh", "-c", "sleep 300 & while :; do echo tick; sleep 0.1; done"], log_path=str(log))
    h.close()
    private_sshd.kill_sessions()  # nothing of the connection is left on the server
    _wait_until(lambda: private_sshd.session_pids() == [], 5)
    size = log.stat().st_size
    with ssh_lab.host("private") as h2:
        assert h2.is_alive(s.pid) and h2.group_alive(s.pgid)
        _wait_until(lambda: log.stat().st_size > size, 5)  # still writing its log
        assert h2.signal_group(s.pgid, signal.SIGTERM)
        _wait_until(lambda: not h2.group_alive(s.pgid), 5)
    assert pids_in_group(s.pgid) == []


def _numbered_writer(path: Path, n: int, per_sec: float, done: threading.Event) -> None:
    with open(path, "ab", buffering=0) as f:
        for i in range(n):
            f.write(b"line %06d %s\n" % (i, b"x" * (i % 50)))
            time.sleep(1 / per_sec)
    done.set()


def test_follow_survives_killed_connections_without_loss(ssh_lab, private_sshd, tmp_path):
    path = tmp_path / "numbered.log"
    path.write_bytes(b"")
    n = 2000
    done = threading.Event()
    with ssh_lab.host("private") as h:
        follow = h.follow(str(path), heartbeat=0.5)
        events, got = [], bytearray()

        def consume():
            for ev in follow:
                events.append(ev)
                got.extend(ev.data)
                if got.count(b"\n") >= n and done.is_set() and len(got) == path.stat().st_size:
                    return

        reader = threading.Thread(target=consume, daemon=True)
        reader.start()
        time.sleep(0.3)
        threading.Thread(target=_numbered_writer, args=(path, n, 1000, done), daemon=True).start()
        kills = 0
        while not done.is_set():
            time.sleep(0.5)
            if private_sshd.kill_sessions():
                kills += 1
        reader.join(30)
        follow.close()
    assert not reader.is_alive(), f"reader stuck; got {len(bytes(got).splitlines())} lines"
    assert kills >= 3
    assert sum(ev.kind == "reconnected" for ev in events) >= 3
    lines = bytes(got).splitlines()
    assert [int(line.split()[1]) for line in lines] == list(range(n))  # none lost, none twice
    assert hashlib.sha256(got).hexdigest() == hashlib.sha256(path.read_bytes()).hexdigest()
    offset = 0
    for ev in events:
        if ev.kind == "data":
            assert ev.offset == offset
            offset += len(ev.data)


def test_follow_detects_a_silent_connection_and_reports_a_gap(ssh_lab, private_sshd, tmp_path):
    """A connection that stops answering (no RST, e.g. a NAT drop) is caught by the heartbeat.
    While it is gone the file is replaced: the resumed follow says `gap` instead of mixing files."""
    path = tmp_path / "log"
    path.write_bytes(b"before\n")
    with ssh_lab.host("private") as h:
        follow = h.follow(str(path), heartbeat=0.2)
        assert next(follow).data == b"before\n"
        stopped = private_sshd.session_pids()
        for pid in stopped:
            os.kill(pid, signal.SIGSTOP)
        try:
            old_ino = path.stat().st_ino
            with open(path, "ab") as f:
                f.write(b"lost with the old file\n")
            os.rename(path, tmp_path / "log.1")
            path.write_bytes(b"new file\n")
            t0 = time.monotonic()
            kinds = []
            for ev in follow:
                kinds.append(ev.kind)
                if ev.kind == "data":
                    break
            assert time.monotonic() - t0 < 10
            assert kinds == ["reconnected", "gap", "data"]
            assert ev.data == b"new file\n" and ev.inode == path.stat().st_ino != old_ino
        finally:
            for pid in stopped:
                os.kill(pid, signal.SIGKILL)
        follow.close()


def test_close_the_transport_mid_follow(ssh_lab, tmp_path):
    path = tmp_path / "log"
    path.write_bytes(b"a\n")
    with ssh_lab.host("dut") as h:
        follow = h.follow(str(path), heartbeat=0.5)
        assert next(follow).data == b"a\n"
        h._conn.transport.close()
        with open(path, "ab") as f:
            f.write(b"b\n")
        evs = [next(follow), next(follow)]
        assert [e.kind for e in evs] == ["reconnected", "data"] and evs[1].data == b"b\n" and evs[1].offset == 2
        follow.close()
