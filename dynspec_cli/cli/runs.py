"""Reaching the host a command names, with the SSH options the user gave."""
from __future__ import annotations

from typing import Optional


def open_target(spec: str, ssh_config: Optional[str], known_hosts: Optional[str], accept_new: bool, python: str = "python3"):
    from dynspec_cli.transport import open_host

    opts = {"python": python}
    if spec not in ("", "local"):
        if ssh_config:
            opts["ssh_config_path"] = ssh_config
        if known_hosts:
            opts["known_hosts_path"] = known_hosts
        if accept_new:
            opts["accept_new_host_key"] = True
    return open_host(spec, **opts)
