"""The nodes of a group: the rendezvous (node 0's address as the others reach it, a free port
there), starting every node at once (all or nothing: each an ordinary run with its own record on
its own host, started by run/launch.py), stopping them, and attaching to a recorded group."""
from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import Any, Callable, Optional

from dynspec_cli import engines
from dynspec_cli.knowledge.tables import ConfigError
from dynspec_cli.place.group.preflight import release_key
from dynspec_cli.place.group.profile import GroupSpec, node_profile
from dynspec_cli.place.group.record import reach_files, save_group_everywhere
from dynspec_cli.place.multinode import each_concurrently
from dynspec_cli.run import control, ownership, records
from dynspec_cli.run.control import RunEnded, RunError
from dynspec_cli.run.launch import start_prepared
from dynspec_cli.run.profiles import Profile
from dynspec_cli.transport import Host, TransportError


def _loopback(addr: Optional[str]) -> bool:
    if addr is None:
        return True
    if addr == "localhost":
        return True
    try:
        return ipaddress.ip_address(addr.strip("[]")).is_loopback
    except ValueError:
        return False


def node0_address(hosts: list[Host], python: str) -> str:
    """Node 0's address as the other nodes reach it: its ssh_config HostName when that is not a
    loopback address; else the source address node 0 uses towards another node; else 127.0.0.1
    (every node on this machine)."""
    h0 = hosts[0].address()
    if not _loopback(h0):
        return h0
    for other in hosts[1:]:
        addr = other.address()
        if _loopback(addr):
            continue
        src = control.ask(hosts[0], python, "source-addr", addr).get("addr")
        if src:
            return src
    return "127.0.0.1"


def free_port_on(host: Host, python: str) -> int:
    doc = control.ask(host, python, "free-port")
    if not isinstance(doc.get("port"), int):
        raise RunError(f"no free port on {host.name}: {doc.get('error')}")
    return doc["port"]


def _fmt_addr(addr: str, port: int) -> str:
    return f"[{addr}]:{port}" if ":" in addr and not addr.startswith("[") else f"{addr}:{port}"


@dataclass
class Node:
    rank: int
    host: Host
    prof: Profile
    rec: Optional[records.RunRecord] = None


def start_group(spec: GroupSpec, targets: list[Host], feature, *, replace: bool,
                dist_init_addr: Optional[str] = None, preflight_result: Optional[dict] = None,
                probe: bool = True) -> tuple[list[Node], dict[str, Any]]:
    """Pick the rendezvous address, build each node's profile and start every node at once."""
    python = spec.base.python
    if dist_init_addr is None:
        addr = node0_address(targets, spec.node_overrides(0).get("python", python))
        port = spec.dist_init_port or free_port_on(targets[0], spec.node_overrides(0).get("python", python))
        dist_init_addr = _fmt_addr(addr, port)
    nodes = [Node(i, targets[i], node_profile(spec, i, dist_init_addr)) for i in range(len(targets))]
    return _start_nodes(spec, nodes, feature, replace=replace, preflight_result=preflight_result, probe=probe,
                        dist_init_addr=dist_init_addr)



def _start_nodes(spec, nodes: list[Node], feature, *, replace, preflight_result, probe, dist_init_addr):
    pre_nodes = (preflight_result or {}).get("nodes") or [None] * len(nodes)
    version = (preflight_result or {}).get(release_key(engines.of(feature))) or spec.base.sglang_version

    def one(n: Node) -> None:
        n.rec = start_prepared(n.host, n.prof, feature, pre=pre_nodes[n.rank], probe=probe, replace=replace,
                               sglang_version=version)

    _, errors = each_concurrently(one, nodes)
    failed = [(n, e) for n, e in zip(nodes, errors) if e is not None]
    if failed:
        for n in nodes:  # all or nothing: a group missing a node would only hang
            if n.rec is not None:
                try:
                    control.stop(n.host, n.rec, grace=5)
                except (RunError, TransportError):
                    pass
        n, e = failed[0]
        if isinstance(e, (RunError, TransportError, ConfigError)):
            raise RunError(f"node {n.rank} ({n.host.name}): {e}") from None
        raise e
    doc = {"group": spec.name, "created_at": records.now(), "feature": feature.name, "nnodes": len(nodes),
           "dist_init_addr": dist_init_addr, "source": spec.source,
           "reach": reach_files(n.host for n in nodes),  # the SSH files later commands reach the nodes with
           "members": [{"rank": n.rank, "host": n.host.name, "name": n.prof.name, "pid": n.rec.pid,
                        "log": n.rec.log, "port": n.prof.port, "python": n.prof.python} for n in nodes]}
    save_group_everywhere(nodes[0].host, doc)
    return nodes, doc



def stop_nodes(nodes: list[Node], *, grace: float = 10.0) -> bool:
    """Stop every node (concurrently); True once no process of any node remains."""
    return not nodes_left(nodes, grace=grace)


def nodes_left(nodes: list[Node], *, grace: float = 10.0) -> list[tuple[Node, str]]:
    """Stop every node (concurrently): the nodes whose processes are not confirmed gone, each
    with why (a node that cannot be reached does not keep the others running)."""
    def one(n: Node) -> Optional[str]:
        return _stop_one(n.host, n.rec, grace)

    whys, errors = each_concurrently(one, nodes)
    return [(n, why or f"{type(e).__name__}: {e}") for n, why, e in zip(nodes, whys, errors) if why or e]


def stop_members(doc: dict[str, Any], open_host: Callable[..., Host], *, grace: float = 10.0
                 ) -> list[tuple[dict[str, Any], str]]:
    """Stop every member of a recorded group, each on its own: the members not confirmed gone,
    each with why (its host could not be reached, its record is missing, ...)."""
    def one(m: dict[str, Any]) -> Optional[str]:
        try:
            host = open_host(m["host"], m.get("python"))
            rec = ownership.load(host, m["name"])
        except (RunError, TransportError) as e:
            return str(e)
        if rec is None:
            return f"no run record {m['name']!r} on {m['host']}"
        return _stop_one(host, rec, grace)

    members = sorted(doc["members"], key=lambda m: m["rank"])
    whys, errors = each_concurrently(one, members)
    return [(m, why or f"{type(e).__name__}: {e}") for m, why, e in zip(members, whys, errors) if why or e]


def _stop_one(host: Host, rec: records.RunRecord, grace: float) -> Optional[str]:
    """None once no process of the run remains, else why not."""
    try:
        return None if control.stop(host, rec, grace=grace) else "processes survived SIGKILL"
    except RunEnded:
        return None  # the recorded pid is another process's now: ours is gone
    except RunError as e:
        return str(e)
    except TransportError as e:
        return str(e)


def attach(doc: dict[str, Any], open_host: Callable[..., Host]) -> list[Node]:
    """The nodes of a recorded group, with their run records (RunError if one is missing)."""
    nodes = []
    for m in sorted(doc["members"], key=lambda m: m["rank"]):
        host = open_host(m["host"], m.get("python"))
        rec = ownership.load(host, m["name"])
        if rec is None:
            raise RunError(f"group {doc['group']!r}: no run record {m['name']!r} on {host.name}")
        nodes.append(Node(m["rank"], host, _placeholder_profile(m), rec))
    return nodes


def _placeholder_profile(m: dict[str, Any]) -> Profile:
    return Profile(name=m["name"], host=m["host"], port=int(m.get("port") or 30000))


def members_status(doc: dict[str, Any], open_host: Callable[..., Host], feature_loader) -> list[dict[str, Any]]:
    """A `dynspec status` row for every member of a recorded group, in rank order (its host's
    `control.record_status` of the member's record alone: a host may hold many records)."""
    rows = []
    for m in sorted(doc["members"], key=lambda m: m["rank"]):
        h = open_host(m["host"], m.get("python"))
        rec = ownership.load(h, m["name"])
        row = control.record_status(h, rec, feature_loader) if rec is not None else {
            "name": m["name"], "alive": False, "verdict": None, "last_lines": ["(no run record)"]}
        rows.append({"rank": m["rank"], **row, "host": m["host"]})
    return rows
