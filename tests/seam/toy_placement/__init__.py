"""A toy placement, for the test of the placement seam (issue 30): one server on this machine,
started by a runner of its own (runner.py) instead of run/launch.py, its records in
~/.dynspec/toy/ instead of ~/.dynspec/runs/. A profile says `scheduler = "toy"` to run here.

It is what a Kubernetes placement would be in small: this folder, copied to dynspec_cli/place/toy/,
implements place/protocol.py, and one line of the registry (place/__init__.py KINDS) adds it. The
sequence (launch, watch, Ctrl-C, stop), the verdict, the watch loop (run/watch.py) and the screens
(report/runs.py) are dynspec's; the toy supplies only where the server runs and how it is found."""
from __future__ import annotations

from contextlib import contextmanager

import msgspec

SCHEDULER = "toy"
SELECTED_BY = 'scheduler = "toy"'
SCRIPTS = ()


class Options(msgspec.Struct, frozen=True, kw_only=True):
    """The toy takes no option beyond every placement's."""


def claims(raw: dict) -> bool:
    return raw.get("scheduler") == SCHEDULER


@contextmanager
def open(req):
    from dynspec_cli.place.toy.placement import ToyPlacement, load

    prof, feature = load(req)
    yield ToyPlacement(req.open_host("local"), feature, prof)  # the toy runs its servers here only


def find(target, ref: str, req):
    from dynspec_cli.place.toy.placement import ToyPlacement, read

    rec = read(target, ref)
    return None if rec is None else (ToyPlacement(target, rec.feature, name=rec.name), rec)


def find_group(target, ref: str, req):
    return None  # one server, on one machine


def status_rows(target, names, feature_loader) -> list[dict]:
    from dynspec_cli.place.toy.placement import rows

    return rows(target, names)


def owns_receipt(doc: dict) -> bool:
    return False  # the toy is not proven


def gate_server(host, doc: dict) -> str:
    raise NotImplementedError("the toy's runs are not proven (owns_receipt is False)")


def server_profile(ref: str, *, host=None, env=None):
    from dynspec_cli.knowledge.tables import ConfigError

    raise ConfigError(f"{ref}: a toy profile: the toy runs no preflight")


def check_script(kind: str, path: str, json_out: bool) -> int:
    raise NotImplementedError("the toy checks no script (SCRIPTS is empty)")
