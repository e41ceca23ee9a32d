"""Which ssh_config and known_hosts a command uses, given once instead of on every command.

The first that is set wins, as OpenSSH users expect (the command line over the environment over a
file): `--ssh-config` / `--known-hosts`, then the environment variables DYNSPEC_SSH_CONFIG /
DYNSPEC_KNOWN_HOSTS, then the profile's `ssh_config` / `known_hosts` keys (a relative path is
relative to the profile file), then OpenSSH's defaults (~/.ssh/config; known_hosts from the
config's UserKnownHostsFile, else ~/.ssh/known_hosts). An ssh_config named by any of the first
three must exist: silently using none would turn a typo into "cannot resolve host". A known_hosts
file may be missing (accept-new creates it; otherwise every host is unknown, which says so).
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Optional

from dynspec_cli.cli.errors import UsageError

ENV_SSH_CONFIG = "DYNSPEC_SSH_CONFIG"
ENV_KNOWN_HOSTS = "DYNSPEC_KNOWN_HOSTS"


@dataclass(frozen=True)
class Setting:
    value: Optional[str]  # None: OpenSSH's default
    source: str  # how the user set it, for messages: "--ssh-config", "DYNSPEC_SSH_CONFIG", a profile, "default"


def pick(cli: Optional[str], option: str, env: str, profile, key: str) -> Setting:
    if cli:
        return Setting(cli, option)
    if os.environ.get(env):
        return Setting(os.environ[env], env)
    value = getattr(profile, key, None) if profile is not None else None
    if value:
        if not os.path.isabs(os.path.expanduser(value)) and getattr(profile, "source", ""):
            value = os.path.join(os.path.dirname(os.path.abspath(profile.source)), value)
        return Setting(value, f"{getattr(profile, 'source', '') or 'profile'} ({key})")
    return Setting(None, "default")


def resolve(ssh_config: Optional[str], known_hosts: Optional[str], profile=None) -> tuple[Setting, Setting]:
    """(ssh_config, known_hosts) for a command; raises UsageError for an ssh_config that was
    named but does not exist."""
    cfg = pick(ssh_config, "--ssh-config", ENV_SSH_CONFIG, profile, "ssh_config")
    kh = pick(known_hosts, "--known-hosts", ENV_KNOWN_HOSTS, profile, "known_hosts")
    if cfg.value is not None:
        path = os.path.expanduser(cfg.value)
        if not os.path.exists(path):
            raise UsageError(f"{cfg.source}: ssh_config {cfg.value!r} does not exist")
        if os.path.isdir(path):
            raise UsageError(f"{cfg.source}: ssh_config {cfg.value!r} is a directory, not a file")
    return cfg, kh


def check_host(spec: str) -> None:
    """A host name is one printable line (a newline pasted with it would end up in ssh_config
    lookups and error messages)."""
    if not spec.isprintable():
        raise UsageError(f"host {spec!r}: contains a newline or another control character")
