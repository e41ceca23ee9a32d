"""Where the server runs: the registry of placements, as engines/__init__.py is for engines. A
placement is a folder of this package holding everything of it, behind the contract of
protocol.py; sequence.py is the one launch sequence over it and multinode.py what the placements
of one server over several nodes share. Commands ask the functions below, which ask each member in
turn: nothing above place/ names a member."""
from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any, Iterator

from dynspec_cli.place.protocol import Request

# One line per placement: name -> module, lazily imported. Asked in this order by `of_profile` and
# the finders; the host, which claims nothing, is the fallback.
KINDS = {
    "slurm": "dynspec_cli.place.slurm",
    "group": "dynspec_cli.place.group",
    "host": "dynspec_cli.place.host",
}
FALLBACK = "host"

__all__ = ["KINDS", "Request", "get", "members", "of_profile", "options", "find", "find_group", "of_receipt",
           "status_rows", "server_profile", "check_script", "unknown_scheduler"]


def get(kind: str) -> ModuleType:
    return importlib.import_module(KINDS[kind])


def members() -> Iterator[ModuleType]:
    return map(get, KINDS)


def of_profile(ref: str) -> ModuleType:
    """The placement a profile runs on: the first whose `claims` says so, else the host. A
    `scheduler` that no placement knows is one line (ConfigError, exit 2)."""
    from dynspec_cli.knowledge.tables import ConfigError
    from dynspec_cli.run.profiles import read_profile

    try:
        raw = read_profile(ref)[1]
    except ConfigError:  # the placement's own loader reports it, in its words
        raw = {}
    found = next((m for m in members() if m.claims(raw)), None)
    if found is None and raw.get("scheduler") is not None:
        raise unknown_scheduler(ref, raw["scheduler"])
    return found or get(FALLBACK)


def unknown_scheduler(where: Any, sched: Any) -> Exception:
    """A profile's `scheduler` that no placement answers to, with those that do."""
    from dynspec_cli.knowledge.tables import ConfigError

    known = [m.SCHEDULER for m in members() if m.SCHEDULER]
    return ConfigError(f"{where}: scheduler = {sched!r}: " + (
        f'the only scheduler is "{known[0]}"' if len(known) == 1 else
        "the schedulers are " + ", ".join(f'"{k}"' for k in known)) + " (or leave it out)")


def options(kind: ModuleType, **given: Any) -> Any:
    """The placement's own Options from the command line's placement options (`given`: each by its
    parameter name, unset = None/False/[]). One typed object, built once; an option that is set
    and that this placement does not take is one line naming the profiles that do."""
    import msgspec

    from dynspec_cli.run.control import RunError

    fields = set(kind.Options.__struct_fields__)
    for key, value in given.items():
        if key not in fields and value not in (None, False, [], ()):
            takers = [m.SELECTED_BY for m in members() if key in m.Options.__struct_fields__ and m.SELECTED_BY]
            flag = "--" + key.replace("_", "-")
            raise RunError(f"{flag}: only for profiles with {' or '.join(takers)}" if takers else
                           f"{flag}: not for this profile")
    return msgspec.convert({k: v for k, v in given.items() if k in fields and v is not None}, kind.Options)


def find(target, ref: str, req: Request):
    """(placement, record) of the run `ref` on `target`, asked of each placement in turn; None."""
    return next((found for m in members() if (found := m.find(target, ref, req)) is not None), None)


def find_group(target, ref: str, req: Request):
    """(placement, record) of the run `ref` over several hosts recorded on `target` (its node 0); None."""
    return next((found for m in members() if (found := m.find_group(target, ref, req)) is not None), None)


def of_receipt(doc: dict) -> ModuleType:
    """The placement whose run a prove receipt is of (its `gate_server` checks the server still runs)."""
    return next(m for m in members() if m.owns_receipt(doc))


def status_rows(target, names, feature_loader) -> list[dict]:
    """Every placement's runs recorded on `target`, the fallback's (one server on a host) first."""
    kinds = [FALLBACK] + [k for k in KINDS if k != FALLBACK]
    return [row for kind in kinds for row in get(kind).status_rows(target, names, feature_loader)]


def server_profile(ref: str, *, host=None, env=None):
    """The one server `dynspec preflight PROFILE` judges (its placement loads the profile)."""
    return of_profile(ref).server_profile(ref, host=host, env=env)


def check_script(kind: str, path: str, json_out: bool) -> int:
    """`dynspec preflight --<kind> FILE`, by the placement that checks that kind of script."""
    return next(m for m in members() if kind in m.SCRIPTS).check_script(kind, path, json_out)
