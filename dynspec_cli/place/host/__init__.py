"""The placement of one server on one host (this machine, or one reached over SSH): the fallback,
which takes every profile no other placement claims. Its steps are run/'s (run/launch.py,
run/control.py, run/watch.py), its screen report/runs.py's; the folder holds the face the
registry sees (place/protocol.py) and the HostPlacement (placement.py)."""
from __future__ import annotations

from contextlib import contextmanager
from typing import TYPE_CHECKING, Iterator, Optional

import msgspec

if TYPE_CHECKING:
    from dynspec_cli.place.host.placement import HostPlacement
    from dynspec_cli.run.records import RunRecord

SCHEDULER = None
SELECTED_BY = ""  # the fallback
SCRIPTS = ()


class Options(msgspec.Struct, frozen=True, kw_only=True):
    """One server on a host takes no option beyond every placement's (place.protocol.Request)."""


def claims(raw: dict) -> bool:
    return False  # the fallback: every profile no other placement claims


@contextmanager
def open(req) -> Iterator["HostPlacement"]:
    from dynspec_cli.knowledge.features import load_feature
    from dynspec_cli.place.host.placement import HostPlacement
    from dynspec_cli.run.profiles import for_feature, load_profile, with_overrides

    prof = with_overrides(load_profile(req.profile), host=req.host, env=req.env, sets=req.sets, name=req.name,
                          patch=req.patch)
    feature = load_feature(prof.feature)
    prof = for_feature(prof, feature)  # the engine: the profile's `engine`, else the feature's
    with req.open_host(prof.host, prof.python, profile=prof) as host:
        yield HostPlacement(host, feature, prof=prof)


def find(target, ref: str, req) -> Optional[tuple["HostPlacement", "RunRecord"]]:
    from dynspec_cli.place.host.placement import HostPlacement
    from dynspec_cli.run import control, records

    rec = records.read(target, ref)
    if rec is None:
        return None
    rec = control.settled(target, rec)  # a "starting" record: completed from the host
    return HostPlacement(target, rec.feature, name=rec.name), rec


def find_group(target, ref: str, req) -> None:
    return None  # one server on one host


def owns_receipt(doc: dict) -> bool:
    return True  # the fallback


def gate_server(host, doc: dict) -> str:
    """The proven server is the process on `host` (prove/receipt.py check_process)."""
    from dynspec_cli.prove.receipt import check_process

    return check_process(host, doc)


def status_rows(target, names, feature_loader) -> list[dict]:
    from dynspec_cli.run import control

    return control.status(target, feature_loader, names=names)


def server_profile(ref: str, *, host=None, env=None):
    """The profile as launch would start it, with --host and --env applied."""
    from dynspec_cli.run.profiles import load_profile, with_overrides

    return with_overrides(load_profile(ref), host=host, env=env)


def check_script(kind: str, path: str, json_out: bool) -> int:
    raise NotImplementedError("one server on a host checks no script of its own (SCRIPTS is empty)")
