"""Preflight across the nodes of a group: the engine's preflight on every node at once, then the
comparison that one server over several hosts needs (DS4xx): the same release, the same patched
files (by sha256) and the same flags on every node, apart from its rank."""
from __future__ import annotations

import json
from typing import Any, Optional

from dynspec_cli import engines
from dynspec_cli.knowledge.findings import Finding, forced_verdict
from dynspec_cli.place.multinode import each_concurrently
from dynspec_cli.run import control
from dynspec_cli.run.control import RunError
from dynspec_cli.run.profiles import Profile
from dynspec_cli.transport import Host


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
            release_key(engine): engine.release_of(results[0]) if results else None}


def release_key(engine) -> str:
    """The group preflight's key of the nodes' release: the engine's own (what group reports and
    the node start read)."""
    return engine.version_key or "engine_version"

