"""One SGLang server spanning several hosts (`dynspec group ...`).

A group profile is an ordinary profile with `hosts = [...]` (node-rank order) instead of `host`,
an optional `dist_init_port` (0 or absent: a free port chosen on node 0) and optional per-node
overrides `[nodes.RANK]` (or `[nodes."HOST"]`) holding any of `env` (merged), `flags` (merged),
`python`, `workdir`. Each node becomes an ordinary `Profile` named `<group>-n<rank>` with
`--nnodes`, `--node-rank` and `--dist-init-addr` added, started with `control.start` (its own run
record on its own host) and tied to the others by a group record `~/.dynspec/runs/<group>.group.json`
on node 0 (and a copy on the machine running dynspec).

Watching: one judging loop per node (threads), each following its node's log; the group is `live`
only when every node is live (node 0 also ready and healthy), `dead`/`crashed` as soon as any node
is (the whole group is then stopped unless --keep), and a node whose log makes no progress for
`stall_timeout` seconds before it is live counts as crashed ("stalled in <phase> on node N")."""
from __future__ import annotations

import ipaddress
import json
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional

import msgspec

from dynspec_cli import engines
from dynspec_cli.resources import tomllib
from dynspec_cli.knowledge.findings import Finding, forced_verdict
from dynspec_cli.knowledge.tables import ConfigError
from dynspec_cli.run import control, ownership, records
from dynspec_cli.run.control import RunEnded, RunError
from dynspec_cli.run.launch import start_prepared
from dynspec_cli.run.profiles import Profile
from dynspec_cli.run.watch import Watched, follow_run
from dynspec_cli.transport import Host, TransportError
from dynspec_cli.verdict.codes import EXIT

GROUP_KEYS = ("hosts", "dist_init_port", "nodes")
NODE_KEYS = ("env", "flags", "python", "workdir")
RANK_FLAGS = ("node-rank", "--node-rank")
GROUP_FLAGS = ("nnodes", "node-rank", "dist-init-addr")
# --------------------------------------------------------------------------------------------------
# the group profile


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


def _profile_path(ref: str) -> Path:
    p = Path(ref)
    if p.suffix == ".toml" or p.exists():
        return p
    from dynspec_cli.knowledge.tables import configs_dir

    bundled = configs_dir() / "profiles" / f"{ref}.toml"
    if not bundled.exists():
        raise ConfigError(f"profile {ref!r} not found (give a path to a .toml file)")
    return bundled


def load_group(ref: str, *, env: list[str] | None = None, sets: list[str] | None = None, name: str | None = None,
               hosts: list[str] | None = None, node_env: list[str] | None = None) -> GroupSpec:
    """Read a group profile: pop `hosts`, `dist_init_port`, `nodes`; the rest is a `Profile`."""
    from dynspec_cli.run.profiles import with_overrides

    path = _profile_path(ref)
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"{path}: file not found") from None
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"{path}: cannot read: {e}") from None
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{path}: invalid TOML: {e}") from None
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
    for k in GROUP_FLAGS:
        for fk in (k, f"--{k}"):
            if fk in (raw.get("flags") or {}):
                raise ConfigError(f"{path}: flags.{fk} is set by dynspec group (remove it)")
    raw["host"] = host_list[0]
    try:
        prof = msgspec.convert(raw, Profile, strict=True)
    except (msgspec.ValidationError, ValueError) as e:
        raise ConfigError(f"{path}: {e}") from None
    prof.source = str(path)
    prof = with_overrides(prof, env=env, sets=sets, name=name)
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


# --------------------------------------------------------------------------------------------------
# addresses and ports


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


# --------------------------------------------------------------------------------------------------
# preflight across hosts


def hash_files(host: Host, python: str, files: list[str]) -> dict[str, str]:
    if not files:
        return {}
    try:
        return control.ask(host, python, "hash-files", json.dumps(files), timeout=60).get("hashes") or \
            {f: "unreadable" for f in files}
    except RunError:
        return {f: "unreadable" for f in files}


def _relative(path: str, root: Optional[str], package: str) -> str:
    """A patched file's path inside the engine's package (`package/...`), the same on every node."""
    if root and path.startswith(root.rstrip("/") + "/"):
        return f"{package}/" + path[len(root.rstrip("/")) + 1:]
    return path


def compare_nodes(nodes: list[dict[str, Any]], engine=None) -> list[Finding]:
    """Findings from the per-node preflight facts: every node must run the same release of the
    engine (default: the registry's DEFAULT, the multi-node one), the same patched files (by sha256,
    keyed by path inside its package) and the same flags apart from --node-rank. Each node dict:
    rank, host, version, hashes {relpath: sha256}, flags."""
    engine = engine or engines.get(engines.DEFAULT)
    out: list[Finding] = []
    if not nodes:
        return out
    ref = nodes[0]
    for n in nodes[1:]:
        if n.get("version") != ref.get("version"):
            out.append(Finding("DS401", f"node {n['rank']} ({n['host']}) has {engine.title} {n.get('version') or 'unknown'}, "
                                        f"node 0 ({ref['host']}) has {ref.get('version') or 'unknown'}",
                               rank=n["rank"], host=n["host"]))
        a, b = ref.get("hashes") or {}, n.get("hashes") or {}
        for rel in sorted(set(a) | set(b)):
            if a.get(rel) != b.get(rel):
                if rel not in b:
                    what = "has no patched file there (no marker)"
                elif rel not in a:
                    what = "has a patched file that node 0 lacks"
                else:
                    what = f"differs (sha256 {b[rel][:12]} vs node 0's {a[rel][:12]})"
                out.append(Finding("DS402", f"{rel} on node {n['rank']} ({n['host']}) {what}",
                                   rank=n["rank"], host=n["host"], file=rel))
        fa = [x for x in _flags_without_rank(ref.get("flags") or [])]
        fb = [x for x in _flags_without_rank(n.get("flags") or [])]
        if fa != fb:
            out.append(Finding("DS403", f"node {n['rank']} ({n['host']}) runs other server flags than node 0: "
                                        f"{' '.join(sorted(set(fb) ^ set(fa)))[:300]}",
                               rank=n["rank"], host=n["host"]))
    return out


def _flags_without_rank(flags: list[str]) -> list[str]:
    out, skip = [], False
    for x in flags:
        if skip:
            skip = False
            continue
        if x == "--node-rank":
            skip = True
            continue
        if x.startswith("--node-rank="):
            continue
        out.append(x)
    return out


def each_concurrently(fn: Callable[[Any], Any], items: list) -> tuple[list, list[Optional[BaseException]]]:
    """fn(item) for every item, each in its own (daemon) thread: the results and the exceptions,
    in the items' order. Nodes are reached at the same time, so a group costs what its slowest
    node costs."""
    results: list = [None] * len(items)
    errors: list[Optional[BaseException]] = [None] * len(items)

    def one(i: int) -> None:
        try:
            results[i] = fn(items[i])
        except BaseException as e:  # noqa: BLE001 - handed to the caller's thread
            errors[i] = e

    threads = [threading.Thread(target=one, args=(i,), daemon=True) for i in range(len(items))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results, errors


def preflight_group(targets: list[Host], profs: list[Profile], feature) -> dict[str, Any]:
    """The engine's preflight on every node (concurrently), then the cross-node comparison."""
    engine = engines.of(feature)

    def one(i: int) -> dict[str, Any]:
        prof = profs[i]
        r = engine.preflight(targets[i], prof.python, feature, prof.argv()[3:], prof.env, prof.patched_class or None)
        files = [p["file"] for p in r.get("patched") or [] if p.get("file")]
        hashes = hash_files(targets[i], prof.python, sorted(set(files)))
        r["file_hashes"] = {_relative(f, engine.install_of(r), engine.package): h for f, h in hashes.items()}
        return r

    results, errors = each_concurrently(one, list(range(len(targets))))
    for e in errors:
        if e is not None:
            raise e
    nodes = [{"rank": i, "host": targets[i].name, "version": engine.release_of(r), "hashes": r.get("file_hashes"),
              "flags": profs[i].argv()[3:], "verdict": r["verdict"]} for i, r in enumerate(results)]
    findings = compare_nodes(nodes, engine)
    for n, r in zip(nodes, results):
        if r["verdict"] == "dead":
            first = next((f for f in r["findings"] if f["severity"] == "error"), None)
            findings.insert(0, Finding("DS404", f"preflight on node {n['rank']} ({n['host']}) is dead"
                                                + (f": {first['code']} {first['message']}" if first else ""),
                                       rank=n["rank"], host=n["host"]))
    return {"nodes": results, "findings": [f.to_json() for f in findings], "ok": not findings,
            "dead": forced_verdict(findings, "group") == "dead",
            _release_key(engine): engine.release_of(results[0]) if results else None}


def _release_key(engine) -> str:
    """The group preflight's key of the nodes' release: the engine's own (what group reports read)."""
    return engine.version_key or "engine_version"


# --------------------------------------------------------------------------------------------------
# records


def group_record_path(host: Host, group: str) -> str:
    return f"{records.expand(host, records.RUNS_DIR)}/{group}.group.json"


def save_group(host: Host, doc: dict[str, Any]) -> None:
    host.run(["mkdir", "-p", records.expand(host, records.RUNS_DIR)], check=True, timeout=30)
    host.write_file(group_record_path(host, doc["group"]), json.dumps(doc, indent=1).encode(), mode=0o600)


def save_group_everywhere(node0: Host, doc: dict[str, Any]) -> None:
    """On node 0 (the record of truth) and a copy here, so `group status NAME` works without --host."""
    save_group(node0, doc)
    from dynspec_cli.transport import LocalHost

    if not node0.shares_local_files:
        try:
            save_group(LocalHost(), doc)
        except (OSError, TransportError):
            pass


def load_group_record(host: Host, group: str) -> Optional[dict[str, Any]]:
    try:
        data = host.read_file(group_record_path(host, group))
    except FileNotFoundError:
        return None
    try:
        doc = json.loads(data)
    except ValueError:
        return None
    return doc if isinstance(doc, dict) and doc.get("members") else None


# --------------------------------------------------------------------------------------------------
# starting


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


def node_profiles(spec: GroupSpec, dist_init_addr: str = "0.0.0.0:0") -> list[Profile]:
    return [node_profile(spec, i, dist_init_addr) for i in range(len(spec.hosts))]


def _start_nodes(spec, nodes: list[Node], feature, *, replace, preflight_result, probe, dist_init_addr):
    pre_nodes = (preflight_result or {}).get("nodes") or [None] * len(nodes)
    version = (preflight_result or {}).get(_release_key(engines.of(feature))) or spec.base.sglang_version

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
    from dynspec_cli.run.hints import group_files

    doc = {"group": spec.name, "created_at": records.now(), "feature": feature.name, "nnodes": len(nodes),
           "dist_init_addr": dist_init_addr, "source": spec.source,
           "reach": group_files(n.host for n in nodes),  # the SSH files later commands reach the nodes with
           "members": [{"rank": n.rank, "host": n.host.name, "name": n.prof.name, "pid": n.rec.pid,
                        "log": n.rec.log, "port": n.prof.port, "python": n.prof.python} for n in nodes]}
    save_group_everywhere(nodes[0].host, doc)
    return nodes, doc


# --------------------------------------------------------------------------------------------------
# watching


@dataclass
class NodeState:
    rank: int
    host: str
    name: str
    verdict: str = "inconclusive"
    phase: str = "args"
    evidence: str = ""
    ready: bool = False
    health: Optional[str] = None
    done: bool = False  # the node's loop ended
    why: str = ""
    stalled: bool = False
    error: Optional[str] = None
    v: Any = None  # the node's latest Verdict
    last_data: float = field(default_factory=time.monotonic)


@dataclass
class GroupOutcome:
    verdict: str
    exit_code: int
    why: str  # live | node-dead | node-crashed | stalled | timeout | interrupted
    culprit: Optional[int]
    message: str
    states: list[NodeState]
    stopped: bool = False

    def to_json(self, group: str) -> dict[str, Any]:
        return {"group": group, "verdict": self.verdict, "exit_code": self.exit_code, "why": self.why,
                "culprit": self.culprit, "message": self.message, "stopped": self.stopped,
                "nodes": [{"rank": s.rank, "host": s.host, "name": s.name, "verdict": s.verdict, "phase": s.phase,
                           "ready": s.ready, "health": s.health, "evidence": s.evidence, "why": s.why,
                           "stalled": s.stalled, "error": s.error,
                           "detail": s.v.to_json() if s.v is not None else None} for s in self.states]}




def node_evidence(pipe, v) -> str:
    if v.crash:
        return f"line {v.crash.get('line')}: {v.crash.get('text') or v.crash.get('message')}"
    if v.marker.get("found"):
        return f"marker line {v.marker.get('line')}: {v.marker.get('text')}"
    line = pipe.last_line if pipe is not None else None
    if line is not None:
        return f"line {line.no}: {line.text}"
    return ""


def watch_node(node: Node, feature, state: NodeState, stop: threading.Event, *, stall_timeout: float,
               on_change: Callable[[], None]) -> None:
    """One node's judging loop (run/watch.py's, as for one server); runs until its verdict is
    dead/crashed/stalled, its process is gone, or `stop` is set (the group decided). Node 0 must
    also answer a real generation; a live node keeps being watched (it may still crash)."""
    w = Watched()

    def publish(v) -> None:
        state.v = v
        state.verdict = v.verdict
        la = v.launch or {}
        state.phase = "ready" if v.server_ready else (la.get("phase") or "args")
        state.evidence = node_evidence(w.pipeline, v)[:300]
        state.ready, state.health = w.ready, w.health

    try:
        follow_run(node.host, node.rec, feature, need_ready=node.rank == 0, end_on_live=False,
                   stall_timeout=stall_timeout, stop=stop, on_update=publish, on_change=on_change,
                   tick_every=0.5, state=w, where=f"node {node.rank} ({node.host.name})")
        state.stalled = w.stalled
        state.why = w.why
        if w.verdict is not None:
            publish(w.verdict)
    except BaseException as e:  # noqa: BLE001 - a node's loop must not kill the others silently
        state.error = f"{type(e).__name__}: {e}"
        state.why = "error"
    finally:
        state.done = True
        on_change()


def watch_group(nodes: list[Node], feature, *, timeout: Optional[float], stall_timeout: float, keep: bool,
                on_change: Callable[[list[NodeState]], None] | None = None) -> GroupOutcome:
    states = [NodeState(n.rank, n.host.name, n.rec.name) for n in nodes]
    stop = threading.Event()
    changed = threading.Event()

    def note() -> None:
        changed.set()

    threads = [threading.Thread(target=watch_node, args=(n, feature, s, stop),
                                kwargs={"stall_timeout": stall_timeout, "on_change": note},
                                daemon=True, name=f"dynspec-node{n.rank}") for n, s in zip(nodes, states)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + timeout if timeout else None
    outcome: Optional[GroupOutcome] = None
    try:
        while outcome is None:
            changed.wait(0.25)
            changed.clear()
            if on_change is not None:
                on_change(states)
            outcome = decide(states)
            if outcome is None and deadline is not None and time.monotonic() >= deadline:
                outcome = GroupOutcome("inconclusive", 3, "timeout", None,
                                       "timed out: " + "; ".join(f"node {s.rank} {s.verdict} in {s.phase}"
                                                                 for s in states), states)
    except KeyboardInterrupt:
        stop.set()
        for t in threads:
            t.join(5)
        raise
    stop.set()
    for t in threads:
        t.join(10)
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


def group_verdict(verdicts: list[Optional[str]]) -> str:
    """One server over several nodes: live only when every node is; dead outranks crashed."""
    if verdicts and all(v == "live" for v in verdicts):
        return "live"
    for v in ("dead", "crashed"):
        if v in verdicts:
            return v
    return "inconclusive"


def decide(states: list[NodeState]) -> Optional[GroupOutcome]:
    # dead outranks crashed (as for one server), then the earliest rank
    for kind, why in (("dead", "node-dead"), ("crashed", "node-crashed")):
        bad = [s for s in states if s.verdict == kind]
        if bad:
            s = bad[0]
            if s.stalled:
                stalled = [x for x in states if x.stalled]
                where = ", ".join(str(x.rank) for x in stalled)
                msg = (s.v.crash or {}).get("message") or f"stalled on node {s.rank}"
                if len(stalled) > 1:
                    msg += f" (nodes stalled: {where})"
                return GroupOutcome("crashed", 4, "stalled", s.rank, msg, states)
            v = s.v
            line = None
            if v is not None and v.crash and kind == "crashed":
                line = f"line {v.crash.get('line')}: {v.crash.get('text') or v.crash.get('message')}"
            elif v is not None:
                err = next((f for f in v.findings if f.severity == "error"), None)
                if err is not None:
                    line = f"{err.code} {err.message}" + (f" (line {err.line}: {err.text})" if err.line else "")
            msg = f"node {s.rank} ({s.host}) is {kind}" + (f": {line}" if line else "")
            return GroupOutcome(kind, EXIT[kind], why, s.rank, msg, states)
    errs = [s for s in states if s.error]
    if errs:
        s = errs[0]
        return GroupOutcome("inconclusive", 3, "watch-error", s.rank, f"node {s.rank} ({s.host}): cannot watch: {s.error}",
                            states)
    if all(s.verdict == "live" for s in states) and states[0].ready:
        return GroupOutcome("live", 0, "live", None,
                            f"all {len(states)} nodes live; node 0 ready ({states[0].health})", states)
    return None


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



def node_status(host: Host, rec: records.RunRecord, feature_loader) -> dict[str, Any]:
    """`control.status` for one run record (a host may hold many records; only the member's is read)."""
    return control.record_status(host, rec, feature_loader)
