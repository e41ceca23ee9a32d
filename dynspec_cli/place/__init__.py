"""Where the server runs: one interface, a placement (place/sequence.py), and a registry of them (host, group, slurm),
as engines/__init__.py is for engines. A placement is a module of this folder named here; it
offers

    claims(raw) -> bool       does this profile (its parsed TOML) run here? (host: the fallback)
    open(request)             a context manager giving the Placement of one launch (sequence.Placement)
    find(target, ref, request) -> (Placement, record) | None
                              the run `ref` (a name, or what else this placement knows runs by) on a
                              host, ready to watch or stop
    status_rows(target, names, feature_loader) -> list[dict]
                              `dynspec status` rows for the runs of this placement on a host
    owns_receipt(doc), gate_server(host, doc) -> str
                              whether a prove receipt is of this placement's run, and the gate's check
                              that the proven server still runs (GateFailed if not)
and its Placement a `prove_target(record)`: the prove/session.py Target that prove and guard drive.

The launch, watch, Ctrl-C and stop sequence is written once, in sequence.py; cli/ parses the
options into a `Request` and renders what the placement's screen and render hand back."""
from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, Callable, Optional

from dynspec_cli.resources import tomllib

# name -> module. Asked in this order by `find` and `of_profile`; "host" is the fallback.
KINDS = {"slurm": "dynspec_cli.place.slurm", "group": "dynspec_cli.place.group", "host": "dynspec_cli.place.host"}


@dataclass
class Request:
    """What a command line asks of a placement (cli/ fills it; a placement rejects what it cannot do)."""

    profile: str = ""  # the profile reference (launch)
    open_host: Callable[..., Any] = None  # (spec, python="python3", profile=None) -> Host, with the user's SSH options
    host: Optional[str] = None
    env: Optional[list[str]] = None
    sets: Optional[list[str]] = None
    name: Optional[str] = None
    timeout: Optional[float] = None
    stall_timeout: float = 120.0
    dry_run: bool = False
    patch: Optional[str] = None  # --patch: the diff applied (overrides the profile's `patch`)
    extra: dict[str, Any] = field(default_factory=dict)


def get(kind: str) -> ModuleType:
    return importlib.import_module(KINDS[kind])


def _raw(ref: str) -> dict:
    """The profile's TOML as read (anything unreadable: {}, the placement's own loader reports it)."""
    from dynspec_cli.knowledge.tables import configs_dir

    p = Path(ref)
    if not (p.suffix == ".toml" or p.exists()):
        p = configs_dir() / "profiles" / f"{ref}.toml"
    try:
        return tomllib.loads(p.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return {}


def of_profile(ref: str) -> ModuleType:
    """The placement a profile runs on: the first whose `claims` says so, else the host. A
    `scheduler` that no placement knows is one line (ConfigError, exit 2)."""
    raw = _raw(ref)
    found = next((m for m in map(get, KINDS) if m.claims(raw)), None)
    sched = raw.get("scheduler")
    if found is None and sched is not None:
        from dynspec_cli.knowledge.tables import ConfigError

        known = [k for k in KINDS if k not in ("host", "group")]  # (group: a profile's `hosts`)
        raise ConfigError(f"{ref}: scheduler = {sched!r}: " + (f'the only scheduler is "{known[0]}"' if len(known) == 1
                          else "the schedulers are " + ", ".join(f'"{k}"' for k in known)) + " (or leave it out)")
    return found or get("host")


def find(target, ref: str, request: Request):
    """(placement, record) of the run `ref` on `target`, asked of each placement in turn; None."""
    for kind in KINDS:
        found = get(kind).find(target, ref, request)
        if found is not None:
            return found
    return None


def of_receipt(doc: dict) -> ModuleType:
    """The placement whose run a prove receipt is of (its `gate_server` checks the server still runs)."""
    return next(m for m in map(get, KINDS) if m.owns_receipt(doc))


def status_rows(target, names, feature_loader) -> list[dict]:
    """Every placement's runs recorded on `target` (host runs first, as `dynspec status` lists them)."""
    return [row for kind in reversed(KINDS) for row in get(kind).status_rows(target, names, feature_loader)]
