"""Watching a group: one judging loop per node (run/watch.py's, as for one server, each following
its node's log over its own connection) and the verdict over the nodes (place/multinode.py): the
group is `live` only when every node is live (node 0 also ready and healthy), `dead`/`crashed` as
soon as any node is (the whole group is then stopped unless --keep), and a node whose log makes no
progress for `stall_timeout` seconds before it is live counts as crashed ("stalled in <phase> on
node N")."""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable, Optional

from dynspec_cli.place.group.nodes import Node, stop_nodes
from dynspec_cli.place.multinode import NodeLoops, NodeState, decide, timed_out
from dynspec_cli.run import records
from dynspec_cli.run.watch import Watched, follow_run
from dynspec_cli.transport import TransportError


@dataclass
class GroupOutcome:
    verdict: str
    exit_code: int
    why: str  # live | node-dead | node-crashed | stalled | watch-error | timeout | interrupted
    culprit: Optional[int]
    message: str
    states: list[NodeState]
    stopped: bool = False

    def to_json(self, group: str) -> dict[str, Any]:
        return {"group": group, "verdict": self.verdict, "exit_code": self.exit_code, "why": self.why,
                "culprit": self.culprit, "message": self.message, "stopped": self.stopped,
                "nodes": [s.to_json() for s in self.states]}


def watch_group(nodes: list[Node], feature, *, timeout: Optional[float], stall_timeout: float, keep: bool,
                on_change: Callable[[list[NodeState]], None] | None = None) -> GroupOutcome:
    """Every node to the group's verdict (or `timeout`); a dead or crashed group is stopped unless
    `keep`; each node's record keeps its verdict. KeyboardInterrupt propagates (the caller stops
    or detaches)."""
    states = [NodeState(n.rank, n.host.name, n.rec.name) for n in nodes]
    loops = NodeLoops("dynspec-node")
    node_of = {s.rank: n for n, s in zip(nodes, states)}
    loops.start(states, lambda s: _watch_node(node_of[s.rank], feature, s, loops, stall_timeout))
    deadline = time.monotonic() + timeout if timeout else None
    outcome: Optional[GroupOutcome] = None
    try:
        while outcome is None:
            loops.wait(0.25)
            if on_change is not None:
                on_change(states)
            d = decide(states)
            if d is not None:
                outcome = GroupOutcome(d.verdict, d.exit_code, d.why, d.culprit, d.message, states)
            elif deadline is not None and time.monotonic() >= deadline:
                outcome = GroupOutcome("inconclusive", 3, "timeout", None, timed_out(states), states)
    except KeyboardInterrupt:
        loops.end(join=5)
        raise
    loops.end()
    if on_change is not None:
        on_change(states)
    if outcome.verdict in ("dead", "crashed") and not keep:
        outcome.stopped = stop_nodes(nodes)
    for n, s in zip(nodes, states):
        n.rec.verdict = s.verdict
        try:
            records.save(n.host, n.rec)
        except TransportError:
            pass
    return outcome


def _watch_node(node: Node, feature, state: NodeState, loops: NodeLoops, stall_timeout: float) -> None:
    """One node's judging loop (run/watch.py's, as for one server); runs until its verdict is
    dead/crashed/stalled, its process is gone, or the group is decided. Node 0 must also answer a
    real generation; a live node keeps being watched (it may still crash)."""
    w = Watched()

    def publish(v) -> None:
        state.seen(v, w.pipeline)
        state.ready, state.health = w.ready, w.health

    follow_run(node.host, node.rec, feature, need_ready=node.rank == 0, end_on_live=False,
               stall_timeout=stall_timeout, stop=loops.stop, on_update=publish, on_change=loops.note,
               tick_every=0.5, state=w, where=f"node {node.rank} ({node.host.name})")
    state.stalled = w.stalled
    state.why = w.why
    if w.verdict is not None:
        publish(w.verdict)
