"""The GroupPlacement the sequence drives: one server over several hosts, a node per host in
node-rank order, each node an ordinary run on its host, tied by the group record on node 0."""
from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any, Callable, Optional

from dynspec_cli.place.group import nodes as N
from dynspec_cli.place.group.preflight import preflight_group
from dynspec_cli.place.group.profile import node_profiles
from dynspec_cli.place.group.watch import watch_group
from dynspec_cli.place.multinode import group_verdict
from dynspec_cli.run import records


@dataclass
class GroupRun:
    """A group while dynspec answers for it: the group document (as saved on node 0) and its nodes
    (host, profile, run record); `nodes` is None for a recorded group not yet attached."""

    nodes: Optional[list] = None
    doc: Optional[dict[str, Any]] = None


def member_opener(req, recorded: Optional[dict]) -> Callable[..., Any]:
    """Opens a node's host with the user's SSH options, else the SSH files the group was launched
    with (its record's "reach"), as a profile's would be."""
    def open_member(spec: str, python: Optional[str] = None):
        profile = None
        if recorded:
            profile = SimpleNamespace(source="", **{k: recorded.get(k) for k in ("ssh_config", "known_hosts")})
        return req.open_host(spec, python or "python3", profile)

    return open_member


class GroupPlacement:
    def __init__(self, feature, *, name: str, spec=None, targets=(), stall_timeout: float = 120.0,
                 force: bool = False, dist_init_addr: Optional[str] = None, node0=None, req=None, reach: Optional[dict] = None):
        self.feature, self.spec, self.targets, self.name = feature, spec, list(targets), name
        self.profs = node_profiles(spec) if spec is not None else []
        self.ready_timeout = spec.base.ready_timeout if spec is not None else None
        self.stall_timeout, self.force, self.dist_init_addr = stall_timeout, force, dist_init_addr
        # a recorded group: its node 0, the request that reaches the other nodes and the SSH files it was launched with
        self.node0, self.req = node0, req
        self.open_member = member_opener(req, reach) if req is not None else None

    # the sequence's steps (place/sequence.py)
    def preflight(self) -> dict[str, Any]:
        return preflight_group(self.targets, self.profs, self.feature)

    def refuses(self, pre: dict[str, Any]) -> bool:
        return bool(pre["dead"]) and not self.force  # a mismatch between nodes, or a node's patch cannot run

    def start(self, pre, *, probe: bool, replace: bool) -> GroupRun:
        nodes, doc = N.start_group(self.spec, self.targets, self.feature, replace=replace,
                                   dist_init_addr=self.dist_init_addr, preflight_result=pre, probe=probe)
        return GroupRun(nodes, doc)

    def watching(self, rec: GroupRun, *, keep: bool, detach: bool) -> None:
        if rec.nodes is None:  # a recorded group: every node's run record, or one line saying which is missing
            rec.nodes = N.attach(rec.doc, self.open_member)

    def watch(self, rec: GroupRun, *, timeout, keep, on_update):
        return watch_group(rec.nodes, self.feature, timeout=timeout, stall_timeout=self.stall_timeout, keep=keep,
                           on_change=on_update)

    def started(self, since: float) -> Optional[GroupRun]:
        """After a Ctrl-C during the start: the nodes whose record this launch wrote."""
        from dynspec_cli.run.launch import started_since

        nodes = [N.Node(i, t, p) for i, (t, p) in enumerate(zip(self.targets, self.profs))]
        for n in nodes:
            n.rec = started_since(n.host, n.prof.name, since)
        nodes = [n for n in nodes if n.rec is not None and n.rec.state != records.NOT_STARTED]
        return GroupRun(nodes) if nodes else None

    def unresolved(self, rec: GroupRun) -> Optional[str]:
        if rec.nodes is None:  # attaching failed: dynspec never answered for the group; it runs as it did
            return "dynspec had not attached to its nodes"
        cut = [n.rank for n in rec.nodes if n.rec.state == records.STARTING]
        return f"the start of node {cut[0]} was cut short before its pid was known" if cut else None

    def release(self, rec) -> None:
        pass

    def stop(self, rec: GroupRun) -> list:
        return N.nodes_left(rec.nodes)  # (node, why) for each node not confirmed gone

    def hint(self, verb: str, rec: GroupRun) -> str:
        from dynspec_cli.place.group.report import group_command

        if rec.nodes is None:
            return group_command(verb, self.name, node0=self.node0, hosts=[self.node0])
        return group_command(verb, self.name, node0=rec.nodes[0].host, hosts=[n.host for n in rec.nodes])

    def mark(self, rec: GroupRun, why: str) -> None:
        for n in rec.nodes:
            n.rec.unwatched = why
            records.save(n.host, n.rec)

    # what the commands show (report.py)
    def screen(self, out, json_out: bool):
        from dynspec_cli.place.group.report import Screen

        return Screen(out, json_out, self.name, self.targets)

    def render(self, out, result, json_out: bool) -> int:
        from dynspec_cli.place.group.report import render

        return render(out, result, json_out)

    def end(self, rec: GroupRun, *, grace: float, out) -> int:
        """`dynspec group stop`: every member stopped on its own host, confirmed; the exit code."""
        from dynspec_cli.place.group.record import reach_files
        from dynspec_cli.place.group.report import render_stopped

        left = N.stop_members(rec.doc, self.open_member, grace=grace)
        return render_stopped(out, rec.doc, left, reach_files(self.req.opened))

    def nodes_status(self, rec: GroupRun, feature_loader) -> dict[str, Any]:
        doc = rec.doc
        rows = N.members_status(doc, self.open_member, feature_loader)
        return {"group": self.name, "verdict": group_verdict([r["verdict"] for r in rows]),
                "dist_init_addr": doc.get("dist_init_addr"), "nodes": rows}
