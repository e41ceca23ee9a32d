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


def request(ssh_config: Optional[str], known_hosts: Optional[str], accept_new: bool, **fields):
    """A placement Request that reaches hosts with these SSH options (and closes them with itself)."""
    from dynspec_cli import place

    return place.Request(reach=opener(ssh_config, known_hosts, accept_new), **fields)


def launch(kind, req, opts, json_out: bool, *, dry_run: bool = False) -> int:
    """A launch on the placement `kind` (a member of dynspec_cli/place, as place.of_profile found
    it): the shared sequence, shown by the placement's screen and rendered by it; the exit code."""
    from dynspec_cli.cli.options import out as _out
    from dynspec_cli.place import sequence

    out = _out(json_out)
    with req, kind.open(req) as p:
        if dry_run:  # (place.options let it through: this placement's Options take dry_run)
            return p.dry_run()
        screen = p.screen(out, json_out)
        with screen:
            result = sequence.launch(p, opts, screen)
        return p.render(out, result, json_out)


def found(target, name: str, req):
    """(placement, record) of the run `name` on `target` (any placement's: a Slurm run by job id too)."""
    from dynspec_cli import place
    from dynspec_cli.cli.errors import UsageError

    hit = place.find(target, name, req)
    if hit is None:
        raise UsageError(f"no run named {name!r} on {target.name}")
    return hit


def found_group(target, name: str, req, host: Optional[str]):
    """(placement, record) of the run over several hosts `name` recorded on `target` (node 0)."""
    from dynspec_cli import place
    from dynspec_cli.run.control import RunError

    hit = place.find_group(target, name, req)
    if hit is None:
        raise RunError(f"no group named {name!r} on {target.name}" + ("" if host else " (give node 0 with --host)"))
    return hit


def watch(req, host: Optional[str], name: str, *, timeout, keep: bool, detach: bool, json_out: bool,
          group: bool = False) -> int:
    """Re-attach to a run (`group`: a run over several hosts, by its node 0) and watch it to its
    verdict with the shared sequence; the exit code."""
    from dynspec_cli.cli.options import out as _out
    from dynspec_cli.place import sequence

    out = _out(json_out)
    with req:
        target = req.open_host(host or "local")
        p, rec = found_group(target, name, req, host) if group else found(target, name, req)
        screen = p.screen(out, json_out)
        with screen:
            result = sequence.watch(p, rec, timeout=timeout, keep=keep, detach=detach, on_update=screen.update)
        return p.render(out, result, json_out)
