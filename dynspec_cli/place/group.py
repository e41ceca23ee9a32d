"""The placement of one server over several hosts, a node per host in node-rank order (a profile
whose `hosts` lists them; run/group.py starts, watches and stops the nodes)."""
from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Iterator, Optional

from dynspec_cli.run import group as G
from dynspec_cli.run import records


def claims(raw: dict) -> bool:
    return "hosts" in raw


@dataclass
class Started:
    """A group's record while dynspec answers for it: its nodes (host, profile, run record) and
    the group document saved on node 0."""

    nodes: list
    doc: Optional[dict[str, Any]] = None


class Hosts:
    """Opens (and later closes) every host a group command touches, with the user's SSH options.
    `recorded`: the SSH files the group was launched with (its record's "reach"), used where the
    command line and the environment name none, as a profile's would be."""

    def __init__(self, open_host, python: str = "python3"):
        self.open_host, self.python = open_host, python
        self.hosts = []
        self.recorded: dict = {}

    def __call__(self, spec: str, python: Optional[str] = None, profile=None):
        from types import SimpleNamespace

        if profile is None and self.recorded:
            profile = SimpleNamespace(source="", **{k: self.recorded.get(k) for k in ("ssh_config", "known_hosts")})
        h = self.open_host(spec, python or self.python, profile=profile)
        self.hosts.append(h)
        return h

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        for h in self.hosts:
            try:
                h.close()
            except Exception:  # noqa: BLE001
                pass


class GroupPlacement:
    def __init__(self, feature, *, name: str, spec=None, targets=(), stall_timeout: float = 120.0,
                 force: bool = False, dist_init_addr: Optional[str] = None):
        self.feature, self.spec, self.targets, self.name = feature, spec, list(targets), name
        self.profs = G.node_profiles(spec) if spec is not None else []
        self.ready_timeout = spec.base.ready_timeout if spec is not None else None
        self.stall_timeout, self.force, self.dist_init_addr = stall_timeout, force, dist_init_addr

    # the sequence's steps (place/sequence.py)
    def preflight(self) -> dict[str, Any]:
        return G.preflight_group(self.targets, self.profs, self.feature)

    def refuses(self, pre: dict[str, Any]) -> bool:
        return bool(pre["dead"]) and not self.force  # a mismatch between nodes, or a node's patch cannot run

    def start(self, pre, *, probe: bool, replace: bool) -> Started:
        nodes, doc = G.start_group(self.spec, self.targets, self.feature, replace=replace,
                                   dist_init_addr=self.dist_init_addr, preflight_result=pre, probe=probe)
        return Started(nodes, doc)

    def watching(self, rec, *, keep: bool, detach: bool) -> None:
        pass

    def watch(self, rec: Started, *, timeout, keep, on_update):
        return G.watch_group(rec.nodes, self.feature, timeout=timeout, stall_timeout=self.stall_timeout, keep=keep,
                             on_change=on_update)

    def started(self, since: float) -> Optional[Started]:
        """After a Ctrl-C during the start: the nodes whose record this launch wrote."""
        from dynspec_cli.run.launch import started_since

        nodes = [G.Node(i, t, p) for i, (t, p) in enumerate(zip(self.targets, self.profs))]
        for n in nodes:
            n.rec = started_since(n.host, n.prof.name, since)
        nodes = [n for n in nodes if n.rec is not None and n.rec.state != records.NOT_STARTED]
        return Started(nodes) if nodes else None

    def unresolved(self, rec: Started) -> Optional[str]:
        cut = [n.rank for n in rec.nodes if n.rec.state == records.STARTING]
        return f"the start of node {cut[0]} was cut short before its pid was known" if cut else None

    def release(self, rec) -> None:
        pass

    def stop(self, rec: Started) -> list:
        return G.nodes_left(rec.nodes)  # (node, why) for each node not confirmed gone

    def hint(self, verb: str, rec: Started) -> str:
        from dynspec_cli.run import hints

        return hints.group_command(verb, self.name, node0=rec.nodes[0].host, hosts=[n.host for n in rec.nodes])

    def mark(self, rec: Started, why: str) -> None:
        for n in rec.nodes:
            n.rec.unwatched = why
            records.save(n.host, n.rec)

    # what the commands show (report/group.py)
    def screen(self, out, json_out: bool):
        from dynspec_cli.report.group import Screen

        return Screen(out, json_out, self.name, self.targets)

    def render(self, out, result, json_out: bool) -> int:
        from dynspec_cli.report.group import render

        return render(out, result, json_out)

    def dry_run(self) -> int:
        from dynspec_cli.run.control import RunError

        raise RunError('--dry-run: only for profiles with scheduler = "slurm"')


@contextmanager
def open(req) -> Iterator[GroupPlacement]:
    from dynspec_cli.knowledge.features import load_feature
    from dynspec_cli.run.profiles import single_engine

    if req.dry_run:
        GroupPlacement.dry_run(None)
    if req.stall_timeout <= 0:
        raise G.ConfigError("--stall-timeout must be positive")
    spec = G.load_group(req.profile, env=req.env, sets=req.sets, name=req.name, node_env=req.extra.get("node_env"))
    feature = load_feature(spec.base.feature)
    single_engine(spec.base, feature, "group launch")
    with Hosts(req.open_host) as hosts:
        targets = [hosts(h, p.python, p) for h, p in zip(spec.hosts, G.node_profiles(spec))]
        yield GroupPlacement(feature, name=spec.name, spec=spec, targets=targets, stall_timeout=req.stall_timeout,
                             force=bool(req.extra.get("force")), dist_init_addr=req.extra.get("dist_init_addr"))


def load(hosts: Hosts, group: str, host: Optional[str]) -> dict[str, Any]:
    """The group's record from node 0 (`host`, default this machine); RunError when there is none."""
    from dynspec_cli.run.control import RunError

    where = hosts(host or "local")
    doc = G.load_group_record(where, group)
    if doc is None:
        raise RunError(f"no group named {group!r} on {where.name}" + ("" if host else " (give node 0 with --host)"))
    hosts.recorded = doc.get("reach") or {}
    return doc


def attach(hosts: Hosts, group: str, host: Optional[str], *, stall_timeout: float = 120.0
           ) -> tuple[GroupPlacement, Started]:
    """A recorded group, to watch again."""
    from dynspec_cli.knowledge.features import load_feature

    doc = load(hosts, group, host)
    nodes = G.attach(doc, hosts)
    return GroupPlacement(load_feature(doc["feature"]), name=group, stall_timeout=stall_timeout), Started(nodes, doc)


def find(target, ref: str, req):
    return None  # a group is found by `dynspec group watch/status/stop` (its record is on node 0)


def owns_receipt(doc: dict) -> bool:
    return False  # a node's receipt is its host run's


def status_rows(target, names, feature_loader) -> list[dict]:
    return []  # its nodes are host runs (NAME-nRANK), listed as such
