"""A connection cut while authenticating is a drop, tried again; only a refused key is an
authentication failure (issue 22, item 8). A real sshd whose key check (AuthorizedKeysCommand)
holds the first login in authentication while the test kills that connection's sshd processes,
as a network cut or an sshd restart would; the next login is let in."""
from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

from dynspec_cli.transport import AuthFailed
from tests.support.sshd import start_sshd

pytestmark = pytest.mark.ssh


@pytest.fixture
def cut_once(ssh_lab):
    """An sshd (alias `cutauth`) that holds the first authentication until the test cuts it."""
    # sshd runs the command only from a root-owned path no one else may write, all the way up
    d = Path(tempfile.mkdtemp(prefix="dynspec-akc-", dir="/run"))
    d.chmod(0o755)
    flag = d / "held"
    script = d / "keys.sh"
    script.write_text(f"#!/bin/sh\nif [ -e {flag} ]; then cat {ssh_lab.user_key}.pub; exit 0; fi\n"
                      f": > {flag}\nsleep 5\n")
    script.chmod(0o755)
    home = Path(tempfile.mkdtemp(dir=ssh_lab.dir))  # its sessions' own HOME: no other test's runs there
    srv = start_sshd(Path(tempfile.mkdtemp(dir=ssh_lab.dir)), "cutauth", [], user=ssh_lab.user,
                     session_env={"HOME": str(home)},
                     extra_config=f"AuthorizedKeysCommand {script}\nAuthorizedKeysCommandUser root\n")
    ssh_lab.extra["cutauth"] = srv
    ssh_lab.write_files()

    def cutter():
        end = time.monotonic() + 60
        while not flag.exists() and time.monotonic() < end:
            time.sleep(0.01)
        srv.kill_sessions()  # the login in authentication: its connection closes, no reason given

    t = threading.Thread(target=cutter, daemon=True)
    t.start()
    try:
        yield srv, flag
    finally:
        t.join(65)
        ssh_lab.remove_server("cutauth")
        shutil.rmtree(d, ignore_errors=True)


def test_connection_cut_during_authentication_is_retried(ssh_lab, cut_once):
    srv, flag = cut_once
    host = ssh_lab.host("cutauth")
    try:
        res = host.run(["echo", "in"], idempotent=True, timeout=60)
        assert res.text == "in\n"
        assert flag.exists() and host.drops.count == 1  # the cut login, counted as a drop
        assert srv.accepted_logins() == 1
    finally:
        host.close()


def test_cli_first_connection_cut_during_authentication(tmp_path, ssh_lab, cut_once):
    srv, flag = cut_once
    r = subprocess.run([sys.executable, "-m", "dynspec_cli", "status", "--host", "cutauth", "--ssh-config",
                        str(ssh_lab.ssh_config), "--known-hosts", str(ssh_lab.known_hosts)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "no runs on cutauth\n" and "authentication failed" not in r.stderr.lower()
    assert flag.exists() and srv.accepted_logins() == 1


def test_a_refused_key_is_still_an_authentication_failure_at_once(ssh_lab):
    t0 = time.monotonic()
    host = ssh_lab.host("dut-badkey")
    with pytest.raises(AuthFailed) as e:
        host.run(["true"], idempotent=True)
    assert "authentication failed for user" in str(e.value) and host.drops.count == 0
    assert time.monotonic() - t0 < 10
