"""The group's record, `~/.dynspec/runs/<group>.group.json` on node 0 (and a copy on the machine
running dynspec, so `group status NAME` works without --host): its members (rank, host, run
name, pid, log), the rendezvous, and the SSH files later commands reach the nodes with."""
from __future__ import annotations

import json
from typing import Any, Iterable, Optional

from dynspec_cli.run import records
from dynspec_cli.transport import Host, TransportError


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



def reach_files(hosts: Iterable) -> dict[str, str]:
    """The SSH files of a group's commands: one set reaches every node (as `group launch` took it)."""
    return next((files for h in hosts if (files := h.reach_files())), {})
