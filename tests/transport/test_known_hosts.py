"""known_hosts as OpenSSH reads it, against real sshd servers: each file is also given to OpenSSH's
own `ssh` (StrictHostKeyChecking yes), and dynspec must accept exactly what OpenSSH accepts; then
the reason dynspec gives for a refusal."""
from __future__ import annotations

import base64
import hashlib
import hmac
import os
import subprocess
from pathlib import Path

import pytest

from dynspec_cli.transport import (
    HostCertUnsupported,
    HostKeyChanged,
    HostKeyError,
    HostKeyRevoked,
    HostKeyUnknown,
)
from dynspec_cli.transport.knownhosts import name_matches
from tests.support.sshd import keygen

pytestmark = pytest.mark.ssh


@pytest.fixture(scope="module")
def keys(tmp_path_factory):
    """Keys no server has: a stale ed25519 one, an RSA one, a CA."""
    d = tmp_path_factory.mktemp("keys")
    out = {}
    for name, kind in (("stale", "ed25519"), ("other", "ed25519"), ("rsa", "rsa"), ("ca", "ed25519")):
        args = ["ssh-keygen", "-q", "-t", kind, "-N", "", "-C", name, "-f", str(d / name)]
        if kind == "rsa":
            args[4:4] = ["-b", "2048"]
        subprocess.run(args, check=True, stdin=subprocess.DEVNULL)
        out[name] = " ".join((d / f"{name}.pub").read_text().split()[:2])
    return out


def openssh_accepts(ssh_lab, alias: str, kh: Path) -> bool:
    r = subprocess.run(["ssh", "-F", str(ssh_lab.ssh_config), "-o", f"UserKnownHostsFile={kh}",
                        "-o", "StrictHostKeyChecking=yes", "-o", "BatchMode=yes", alias, "true"],
                       capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
    return r.returncode == 0


def dynspec_outcome(ssh_lab, alias: str, kh: Path, **kw):
    h = ssh_lab.host(alias, known_hosts_path=str(kh), **kw)
    try:
        h.connect()
        return "ok"
    except HostKeyError as e:
        assert "\n" not in str(e) and len(str(e)) < 600, str(e)
        return e
    finally:
        h.close()


def hashed(name: str, salt: bytes) -> str:
    digest = hmac.new(salt, name.encode(), hashlib.sha1).digest()
    return f"|1|{base64.b64encode(salt).decode()}|{base64.b64encode(digest).decode()}"


def scenarios(ssh_lab, keys):
    t, b = ssh_lab.target, ssh_lab.bastion
    dut = f"[127.0.0.1]:{t.port}"
    real = " ".join(t.host_pub.split()[:2])
    bastion = b.known_hosts_line()
    return {
        # a CA line and a revocation for other hosts used to break every host ("Incorrect padding")
        "markers for other hosts": (f"@cert-authority *.example.com {keys['ca']}\n"
                                    f"@revoked oldbox.example.com {keys['stale']}\n{dut} {real}\n", "ok"),
        "stale entry before the valid one": (f"{dut} {keys['stale']}\n{dut} {real}\n", "ok"),
        "valid entry before a stale one": (f"{dut} {real}\n{dut} {keys['stale']}\n", "ok"),
        "only a stale entry": (f"{dut} {keys['stale']}\n", HostKeyChanged),
        "only another key type": (f"{dut} {keys['rsa']}\n", HostKeyChanged),
        "the real key revoked, and listed": (f"{dut} {real}\n@revoked * {real}\n", HostKeyRevoked),
        "another key revoked": (f"@revoked * {keys['other']}\n{dut} {real}\n", "ok"),
        "hashed": (f"{hashed(dut, os.urandom(20))} {real}\n", "ok"),
        "hashed, another port": (f"{hashed(f'[127.0.0.1]:{t.port + 1}', os.urandom(20))} {real}\n", HostKeyUnknown),
        "comma list": (f"nowhere.example.com,{dut},10.9.9.9 {real}\n", "ok"),
        "wildcard": (f"[127.0.0.?]:* {real}\n", "ok"),
        "wildcard excluded by a negation": (f"[127.0.0.*]:*,!{dut} {real}\n", HostKeyUnknown),
        # OpenSSH: nothing for [host]:port, so the bare name is checked too ("without port identifier")
        "the bare name covers another port": (f"127.0.0.1 {real}\n", "ok"),
        "the bare name with another key": (f"127.0.0.1 {keys['stale']}\n", HostKeyUnknown),
        "[host]:port is asked first": (f"127.0.0.1 {real}\n{dut} {keys['stale']}\n", HostKeyChanged),
        "a CA for this host only": (f"@cert-authority {dut} {keys['ca']}\n{bastion}\n", HostCertUnsupported),
        "garbage lines around": (f"@bogus x y z\nnot-a-key-line\n{dut} ssh-ed25519 !!!notbase64\n"
                                 f"# comment\n\n{dut} {real}\n", "ok"),
        "unknown": (f"{bastion}\n", HostKeyUnknown),
    }


NAMES = ["markers for other hosts", "stale entry before the valid one", "valid entry before a stale one",
         "only a stale entry", "only another key type", "the real key revoked, and listed", "another key revoked",
         "hashed", "hashed, another port", "comma list", "wildcard", "wildcard excluded by a negation",
         "the bare name covers another port", "the bare name with another key", "[host]:port is asked first",
         "a CA for this host only", "garbage lines around", "unknown"]


@pytest.mark.parametrize("name", NAMES)
def test_dynspec_accepts_what_openssh_accepts(ssh_lab, keys, tmp_path, name):
    text, expected = scenarios(ssh_lab, keys)[name]
    kh = tmp_path / "known_hosts"
    kh.write_text(text)
    accepted_by_openssh = openssh_accepts(ssh_lab, "dut", kh)
    got = dynspec_outcome(ssh_lab, "dut", kh)
    assert (got == "ok") == accepted_by_openssh, (name, got)
    if expected == "ok":
        assert got == "ok"
    else:
        assert type(got) is expected, (name, got)
    assert kh.read_text() == text  # never rewritten


def test_revoked_key_names_the_line(ssh_lab, tmp_path):
    real = " ".join(ssh_lab.target.host_pub.split()[:2])
    kh = tmp_path / "known_hosts"
    kh.write_text(f"[127.0.0.1]:{ssh_lab.target.port} {real}\n@revoked * {real}\n")
    e = dynspec_outcome(ssh_lab, "dut", kh, accept_new_host_key=True)
    assert isinstance(e, HostKeyRevoked)
    assert f"{kh}:2" in str(e) and ssh_lab.target.fingerprint in str(e) and "REVOKED" in str(e)


def test_cert_authority_is_not_supported_for_its_hosts_only(ssh_lab, keys, tmp_path):
    t, b = ssh_lab.target, ssh_lab.bastion
    kh = tmp_path / "known_hosts"
    kh.write_text(f"@cert-authority [127.0.0.1]:{t.port} {keys['ca']}\n{b.known_hosts_line()}\n")
    before = kh.read_text()
    e = dynspec_outcome(ssh_lab, "dut", kh, accept_new_host_key=True)  # not even accept-new adds it
    assert isinstance(e, HostCertUnsupported)
    assert "not supported" in str(e) and f"{kh}:1" in str(e) and "ssh-keyscan" in str(e)
    assert kh.read_text() == before
    assert dynspec_outcome(ssh_lab, "bastion", kh) == "ok"  # the same file, another host: unaffected


def test_changed_key_names_the_line_with_the_old_key(ssh_lab, keys, tmp_path):
    kh = tmp_path / "known_hosts"
    kh.write_text(f"# mine\n[127.0.0.1]:{ssh_lab.target.port} {keys['stale']}\n")
    e = dynspec_outcome(ssh_lab, "dut", kh)
    assert isinstance(e, HostKeyChanged) and f"{kh}:2" in str(e) and ssh_lab.target.fingerprint in str(e)


def test_entries_hashed_by_ssh_keygen(ssh_lab, tmp_path):
    kh = tmp_path / "known_hosts"
    kh.write_text(ssh_lab.target.known_hosts_line() + "\n" + ssh_lab.bastion.known_hosts_line() + "\n")
    subprocess.run(["ssh-keygen", "-H", "-f", str(kh)], check=True, capture_output=True)
    assert kh.read_text().count("|1|") == 2 and "127.0.0.1" not in kh.read_text()
    assert dynspec_outcome(ssh_lab, "dut", kh) == "ok"
    assert dynspec_outcome(ssh_lab, "bastion", kh) == "ok"


def test_the_server_is_asked_for_the_key_type_known_for_it(ssh_lab, keys, tmp_path):
    """A server with an ed25519 and an RSA host key, known only by its RSA key: asked for RSA
    first (as OpenSSH does), it is accepted; not asked, it would offer ed25519, a changed key."""
    d = tmp_path / "rsa-host"
    d.mkdir()
    keygen_rsa = subprocess.run(["ssh-keygen", "-q", "-t", "rsa", "-b", "2048", "-N", "", "-f", str(d / "host_rsa")],
                                stdin=subprocess.DEVNULL)
    assert keygen_rsa.returncode == 0
    srv = ssh_lab.add_server("tworsa", extra_config=f"HostKey {d / 'host_rsa'}\n")
    try:
        rsa = " ".join((d / "host_rsa.pub").read_text().split()[:2])
        kh = tmp_path / "known_hosts"
        kh.write_text(f"[127.0.0.1]:{srv.port} {rsa}\n")
        assert openssh_accepts(ssh_lab, "tworsa", kh)
        assert dynspec_outcome(ssh_lab, "tworsa", kh) == "ok"
    finally:
        ssh_lab.remove_server("tworsa")


def test_accept_new_writes_a_line_openssh_reads(ssh_lab, tmp_path):
    kh = tmp_path / "known_hosts"
    kh.write_text(f"@cert-authority *.example.com {ssh_lab.bastion.host_pub.split()[0]} "
                  f"{ssh_lab.bastion.host_pub.split()[1]}\n")
    assert dynspec_outcome(ssh_lab, "dut", kh, accept_new_host_key=True) == "ok"
    assert kh.read_text().splitlines()[-1] == ssh_lab.target.known_hosts_line()
    assert openssh_accepts(ssh_lab, "dut", kh)


def test_several_user_files_and_a_global_file(ssh_lab, tmp_path):
    """UserKnownHostsFile with two files and GlobalKnownHostsFile: a key in any of them counts."""
    first, second, glob = tmp_path / "first", tmp_path / "second", tmp_path / "global"
    first.write_text("")
    second.write_text(ssh_lab.target.known_hosts_line() + "\n")
    glob.write_text(ssh_lab.bastion.known_hosts_line() + "\n")
    cfg = tmp_path / "config"
    cfg.write_text(f"Host *\n  UserKnownHostsFile {first} {second}\n  GlobalKnownHostsFile {glob}\n"
                   f"Include {ssh_lab.ssh_config}\n")
    from dynspec_cli.transport import SSHHost

    for alias in ("dut", "bastion"):
        with SSHHost(alias, ssh_config_path=str(cfg)) as h:
            assert h.run(["true"]).ok


@pytest.mark.parametrize("names,host,expected", [
    ("a.example.com", "A.Example.COM", True),
    ("*.example.com", "a.example.com", True),
    ("*.example.com", "example.com", False),
    ("a?c", "abc", True),
    ("a?c", "abbc", False),
    ("[10.0.0.1]:2222", "[10.0.0.1]:2222", True),
    ("[10.0.0.1]:2222", "10.0.0.1", False),
    ("10.0.0.*,!10.0.0.5", "10.0.0.5", False),
    ("10.0.0.*,!10.0.0.5", "10.0.0.6", True),
    ("!10.0.0.5", "10.0.0.6", False),  # only a negation: nothing positive matched
])
def test_patterns(names, host, expected):
    """Expected values: sshd(8) PATTERNS / ssh_config(5) PATTERNS."""
    assert name_matches(names, host) is expected
