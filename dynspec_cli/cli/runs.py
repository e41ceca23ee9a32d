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


def opener(ssh_config: Optional[str], known_hosts: Optional[str], accept_new: bool):
    """open_target with these SSH options: (spec, python="python3", profile=None) -> Host."""
    def open_host(spec: str, python: str = "python3", profile=None):
        return open_target(spec, ssh_config, known_hosts, accept_new, python, profile=profile)

    return open_host


def launch(placement, req, opts, json_out: bool) -> int:
    """A launch on `placement` (a module of dynspec_cli/place): the shared sequence, shown by the
    placement's screen and rendered by it; the exit code."""
    from dynspec_cli.cli.options import out as _out
    from dynspec_cli.place import sequence

    out = _out(json_out)
    with placement.open(req) as p:
        if req.dry_run:
            return p.dry_run()
        screen = p.screen(out, json_out)
        with screen:
            result = sequence.launch(p, opts, screen)
        return p.render(out, result, json_out)
