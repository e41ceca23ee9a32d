"""Reaching the host a command names, with the SSH options the user gave."""
from __future__ import annotations

from typing import Optional


def open_target(spec: str, ssh_config: Optional[str], known_hosts: Optional[str], accept_new: bool,
                python: str = "python3", *, profile=None):
    """The host `spec` names. ssh_config and known_hosts come from the command line, else the
    environment, else `profile` (see sshsettings)."""
    from dynspec_cli.cli import sshsettings
    from dynspec_cli.transport import open_host

    sshsettings.check_host(spec)
    opts = {"python": python}
    if spec not in ("", "local"):
        cfg, kh = sshsettings.resolve(ssh_config, known_hosts, profile)
        if cfg.value:
            opts["ssh_config_path"] = cfg.value
        if kh.value:
            opts["known_hosts_path"] = kh.value
        if accept_new:
            opts["accept_new_host_key"] = True
    return open_host(spec, **opts)
