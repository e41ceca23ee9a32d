"""The placement of one server over several hosts, a node per host in node-rank order (a profile
whose `hosts` lists them). The folder holds all of it:

    profile.py    the group profile: hosts, rendezvous port, per-node overrides -> a profile per node
    preflight.py  preflight on every node at once, and the comparison between nodes (DS4xx)
    nodes.py      the rendezvous; starting, stopping and attaching to every node
    record.py     the group record on node 0
    watch.py      a judging loop per node, the group's verdict over them (place/multinode.py)
    placement.py  the GroupPlacement the sequence drives
    report.py     how a group is shown

This file is the face the registry sees (place/protocol.py); it imports the rest when asked."""
from __future__ import annotations

from contextlib import contextmanager
from typing import TYPE_CHECKING, Iterator, Optional

import msgspec

if TYPE_CHECKING:
    from dynspec_cli.place.group.placement import GroupPlacement, GroupRun

SCHEDULER = None  # chosen by its `hosts`, not by a scheduler
SELECTED_BY = "hosts = [...]"
SCRIPTS = ()


class Options(msgspec.Struct, frozen=True, kw_only=True):
    """What `dynspec group launch` may ask of a group alone."""

    node_env: list[str] = []  # --node-env RANK:K=V, one node's environment
    force: bool = False  # --force: launch although preflight found a mismatch between nodes
    dist_init_addr: Optional[str] = None  # --dist-init-addr ADDR:PORT (default: node 0's, a free port there)


def claims(raw: dict) -> bool:
    return "hosts" in raw


@contextmanager
def open(req) -> Iterator["GroupPlacement"]:
    from dynspec_cli.knowledge.features import load_feature
    from dynspec_cli.knowledge.tables import ConfigError
    from dynspec_cli.place.group.placement import GroupPlacement
    from dynspec_cli.place.group.profile import load_group, node_profiles
    from dynspec_cli.run.profiles import single_engine

    opts = req.options or Options()
    if req.stall_timeout <= 0:
        raise ConfigError("--stall-timeout must be positive")
    spec = load_group(req.profile, env=req.env, sets=req.sets, name=req.name, node_env=opts.node_env)
    feature = load_feature(spec.base.feature)
    single_engine(spec.base, feature, "group launch")
    targets = [req.open_host(h, p.python, p) for h, p in zip(spec.hosts, node_profiles(spec))]
    yield GroupPlacement(feature, name=spec.name, spec=spec, targets=targets, stall_timeout=req.stall_timeout,
                         force=opts.force, dist_init_addr=opts.dist_init_addr)


def find(target, ref: str, req) -> None:
    return None  # a group is found by `find_group` (`dynspec group watch/status/stop`); its nodes are host runs


def find_group(target, ref: str, req) -> Optional[tuple["GroupPlacement", "GroupRun"]]:
    """The group `ref` recorded on `target` (its node 0, or the copy on this machine); its nodes are
    reached when a command needs them, with the SSH files the group was launched with."""
    from dynspec_cli.knowledge.features import load_feature
    from dynspec_cli.place.group.placement import GroupPlacement, GroupRun
    from dynspec_cli.place.group.record import load_group_record

    doc = load_group_record(target, ref)
    if doc is None:
        return None
    p = GroupPlacement(load_feature(doc["feature"]), name=ref, stall_timeout=req.stall_timeout, node0=target, req=req,
                       reach=doc.get("reach") or {})
    return p, GroupRun(None, doc)


def owns_receipt(doc: dict) -> bool:
    return False  # a node's receipt is its host run's


def gate_server(host, doc: dict) -> str:
    raise NotImplementedError("a group's receipts are its nodes' (owns_receipt is False)")


def status_rows(target, names, feature_loader) -> list[dict]:
    return []  # its nodes are host runs (NAME-nRANK), listed as such


def server_profile(ref: str, *, host=None, env=None):
    from dynspec_cli.knowledge.tables import ConfigError

    raise ConfigError(f"{ref}: a group profile: `dynspec group launch` runs preflight on every node and compares "
                      f"them; `dynspec preflight` judges one server: give that node's profile, or its --host, "
                      f"--python and flags after --")


def check_script(kind: str, path: str, json_out: bool) -> int:
    raise NotImplementedError("a group checks no script of its own (SCRIPTS is empty)")
