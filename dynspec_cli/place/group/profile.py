"""A group profile: an ordinary profile with `hosts = [...]` (node-rank order) instead of `host`,
an optional `dist_init_port` (0 or absent: a free port chosen on node 0) and optional per-node
overrides `[nodes.RANK]` (or `[nodes."HOST"]`) holding any of `env` (merged), `flags` (merged),
`python`, `workdir`. Each node becomes an ordinary `Profile` named `<group>-n<rank>` with
`--nnodes`, `--node-rank` and `--dist-init-addr` added."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import msgspec

from dynspec_cli.knowledge.tables import ConfigError
from dynspec_cli.place.multinode import refuse_group_flags
from dynspec_cli.run.profiles import Profile, as_profile, read_profile, with_overrides

NODE_KEYS = ("env", "flags", "python", "workdir")


@dataclass
class GroupSpec:
    name: str
    hosts: list[str]
    base: Profile  # the shared profile (host = hosts[0])
    dist_init_port: int = 0
    nodes: dict[str, dict[str, Any]] = field(default_factory=dict)  # "rank" or host -> overrides
    source: str = ""

    def node_overrides(self, rank: int) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key in (self.hosts[rank], str(rank)):
            for k, v in (self.nodes.get(key) or {}).items():
                if isinstance(v, dict):
                    out[k] = {**out.get(k, {}), **v}
                else:
                    out[k] = v
        return out


def load_group(ref: str, *, env: list[str] | None = None, sets: list[str] | None = None, name: str | None = None,
               hosts: list[str] | None = None, node_env: list[str] | None = None) -> GroupSpec:
    """Read a group profile: pop `hosts`, `dist_init_port`, `nodes`; the rest is a `Profile`."""
    path, raw = read_profile(ref)
    host_list = hosts or raw.pop("hosts", None)
    raw.pop("hosts", None)
    port = raw.pop("dist_init_port", 0)
    nodes = raw.pop("nodes", {}) or {}
    if host_list is None:
        host_list = [raw.get("host", "local")]
    if not isinstance(host_list, list) or not host_list or not all(isinstance(h, str) and h for h in host_list):
        raise ConfigError(f"{path}: hosts must be a non-empty list of host names (node-rank order)")
    if not isinstance(port, int) or not 0 <= port <= 65535:
        raise ConfigError(f"{path}: dist_init_port must be a TCP port (0: chosen on node 0)")
    if not isinstance(nodes, dict):
        raise ConfigError(f"{path}: [nodes] must be a table of per-node tables")
    for key, ov in nodes.items():
        if not isinstance(ov, dict) or set(ov) - set(NODE_KEYS):
            raise ConfigError(f"{path}: [nodes.{key}] may hold only {', '.join(NODE_KEYS)}")
        if key not in host_list and not (key.isdigit() and int(key) < len(host_list)):
            raise ConfigError(f"{path}: [nodes.{key}] names neither a host of `hosts` nor a node rank")
    refuse_group_flags(raw.get("flags"), str(path), "dynspec group")
    raw["host"] = host_list[0]
    prof = with_overrides(as_profile(raw, path), env=env, sets=sets, name=name)
    for item in node_env or []:
        where, colon, kv = item.partition(":")
        k, eq, v = kv.partition("=")
        if not colon or not eq or not k:
            raise ConfigError(f"--node-env {item!r}: expected RANK:NAME=VALUE")
        nodes.setdefault(where, {}).setdefault("env", {})[k] = v
    return GroupSpec(name=prof.name, hosts=list(host_list), base=prof, dist_init_port=port, nodes=nodes,
                     source=str(path))


def node_profile(spec: GroupSpec, rank: int, dist_init_addr: str) -> Profile:
    ov = spec.node_overrides(rank)
    base = spec.base
    flags = {**base.flags, **(ov.get("flags") or {})}
    flags.update({"nnodes": len(spec.hosts), "node-rank": rank, "dist-init-addr": dist_init_addr})
    try:
        return msgspec.structs.replace(
            base, host=spec.hosts[rank], name=f"{spec.name}-n{rank}", flags=flags,
            env={**base.env, **(ov.get("env") or {})}, python=ov.get("python", base.python),
            workdir=ov.get("workdir", base.workdir))
    except ValueError as e:
        raise ConfigError(f"{spec.source}: node {rank}: {e}") from None



def node_profiles(spec: GroupSpec, dist_init_addr: str = "0.0.0.0:0") -> list[Profile]:
    return [node_profile(spec, i, dist_init_addr) for i in range(len(spec.hosts))]

