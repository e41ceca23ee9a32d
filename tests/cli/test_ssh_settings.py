"""SSH settings given once: DYNSPEC_SSH_CONFIG / DYNSPEC_KNOWN_HOSTS and the profile's
`ssh_config` / `known_hosts` keys, with the command line over the environment over the profile;
an ssh_config that is named but missing, and a host name with a newline, are one-line errors
(exit 2). `dynspec` runs as a user runs it, against a real sshd whose sessions have HOME in the
test's directory (status reads run records there)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.sshd import ssh_lab  # noqa: F401 - fixture

pytestmark = pytest.mark.ssh

DYNSPEC = [sys.executable, "-m", "dynspec_cli"]
ALIAS = "settings-host"


@pytest.fixture(scope="module")
def remote(ssh_lab, tmp_path_factory):  # noqa: F811
    home = tmp_path_factory.mktemp("remote-home")
    ssh_lab.add_server(ALIAS, session_env={"HOME": str(home)})
    yield ssh_lab
    ssh_lab.remove_server(ALIAS)


def dynspec(*args, env: dict | None = None, cwd=None) -> subprocess.CompletedProcess:
    full = {k: v for k, v in os.environ.items() if not k.startswith("DYNSPEC_")}
    full.update(env or {})
    return subprocess.run(DYNSPEC + list(args), capture_output=True, text=True, timeout=120, env=full, cwd=cwd,
                          stdin=subprocess.DEVNULL)


def one_line_error(r: subprocess.CompletedProcess, *words: str) -> None:
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
    for w in words:
        assert w in lines[0], (w, lines[0])


def reached(r: subprocess.CompletedProcess) -> bool:
    return r.returncode == 0 and json.loads(r.stdout) == {"runs": []}


def test_environment_variables_replace_the_options(remote):
    env = {"DYNSPEC_SSH_CONFIG": str(remote.ssh_config), "DYNSPEC_KNOWN_HOSTS": str(remote.known_hosts)}
    assert reached(dynspec("status", "--host", ALIAS, "--json", env=env))
    # without them (and no ~/.ssh/config entry for the alias) the same command cannot reach it
    r = dynspec("status", "--host", ALIAS, "--json", env={"HOME": str(remote.dir / "nohome")})
    assert r.returncode == 2 and ALIAS in r.stderr


def test_the_command_line_wins_over_the_environment(remote, tmp_path):
    empty_cfg, empty_kh = tmp_path / "empty_config", tmp_path / "empty_known_hosts"
    empty_cfg.write_text("")
    empty_kh.write_text("")
    env = {"DYNSPEC_SSH_CONFIG": str(empty_cfg), "DYNSPEC_KNOWN_HOSTS": str(empty_kh)}
    assert reached(dynspec("status", "--host", ALIAS, "--json", "--ssh-config", str(remote.ssh_config),
                           "--known-hosts", str(remote.known_hosts), env=env))
    r = dynspec("status", "--host", ALIAS, "--json", "--ssh-config", str(remote.ssh_config), env=env)
    one_line_error(r, "unknown host key", str(empty_kh))  # the environment's known_hosts was used


def _profile(path: Path, **keys) -> Path:
    lines = ['name = "settings"', f'host = "{ALIAS}"', 'python = "python3"']
    lines += [f"{k} = {json.dumps(v)}" for k, v in keys.items()]
    path.write_text("\n".join(lines) + '\n[flags]\n"model-path" = "/models/tiny"\n')
    return path


def test_profile_keys_with_paths_relative_to_the_profile(remote, tmp_path):
    d = tmp_path / "profiles"
    d.mkdir()
    (d / "cfg").write_text(remote.ssh_config.read_text())
    (d / "kh").write_text(remote.known_hosts.read_text())
    prof = _profile(d / "p.toml", ssh_config="cfg", known_hosts="kh")
    logins = remote.extra[ALIAS].accepted_logins()
    r = dynspec("preflight", str(prof), "--json", cwd=tmp_path)  # the fast path (no typer)
    assert r.returncode != 2, r.stderr
    assert json.loads(r.stdout)["verdict"]  # judged from what the host's python3 reported
    assert remote.extra[ALIAS].accepted_logins() == logins + 1
    # the environment wins over the profile: an empty config cannot resolve the alias
    empty = tmp_path / "empty"
    empty.write_text("")
    r = dynspec("preflight", str(prof), "--json", env={"DYNSPEC_SSH_CONFIG": str(empty)}, cwd=tmp_path)
    one_line_error(r, ALIAS)


@pytest.mark.parametrize("where", ["option", "environment", "profile"])
def test_a_named_ssh_config_that_does_not_exist(remote, tmp_path, where):
    missing = tmp_path / "no" / "such_config"
    env, args = {}, ["status", "--host", ALIAS]
    if where == "option":
        args += ["--ssh-config", str(missing)]
    elif where == "environment":
        env["DYNSPEC_SSH_CONFIG"] = str(missing)
    else:
        args = ["preflight", str(_profile(tmp_path / "p.toml", ssh_config=str(missing)))]
    r = dynspec(*args, env=env)
    one_line_error(r, str(missing), "does not exist",
                   {"option": "--ssh-config", "environment": "DYNSPEC_SSH_CONFIG", "profile": "p.toml"}[where])


@pytest.mark.parametrize("command", [["status", "--host"], ["preflight", "--host"], ["stop", "x", "--host"]])
def test_a_host_with_a_newline(remote, command):
    r = dynspec(*command, f"{ALIAS}\nrm -rf /", env={"DYNSPEC_SSH_CONFIG": str(remote.ssh_config)})
    one_line_error(r, "newline")
