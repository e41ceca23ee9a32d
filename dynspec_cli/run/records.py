"""Run records: what dynspec started, written on the host that runs it (so `dynspec watch`,
`status` and `stop` work from any machine that can reach the host)."""
from __future__ import annotations

import json
import time
from typing import Any, Optional

import msgspec

from dynspec_cli.transport import Host

RUNS_DIR = "~/.dynspec/runs"


class RunRecord(msgspec.Struct):
    name: str
    host: str
    pid: int
    pgid: int
    argv: list[str]  # secrets redacted
    env: dict[str, str]  # secrets redacted
    log: str
    log_offset: int  # where this launch's lines start in the log
    port: int
    started_at: float
    feature: str
    patched_class: list[str] = []
    sglang_version: Optional[str] = None
    python: str = "python3"
    cwd: Optional[str] = None
    stopped_at: Optional[float] = None
    verdict: Optional[str] = None
    probe: bool = False
    leader_start: Optional[str] = None  # /proc/<pid>/stat start time: tells a reused pid apart
    log_line_base: int = 0  # lines of the log before log_offset (evidence keeps the file's line numbers)


def expand(host: Host, path: str) -> str:
    if path == "~" or path.startswith("~/"):
        return host.home().rstrip("/") + path[1:]
    return path


def record_path(host: Host, name: str) -> str:
    return f"{expand(host, RUNS_DIR)}/{name}.json"


def save(host: Host, rec: RunRecord) -> None:
    host.run(["mkdir", "-p", expand(host, RUNS_DIR)], check=True, timeout=30)
    host.write_file(record_path(host, rec.name), msgspec.json.encode(rec), mode=0o600)


def load(host: Host, name: str) -> Optional[RunRecord]:
    try:
        data = host.read_file(record_path(host, name))
    except FileNotFoundError:
        return None
    try:
        return msgspec.json.decode(data, type=RunRecord)
    except msgspec.DecodeError:
        return None


def all_records(host: Host) -> list[RunRecord]:
    res = host.run(["sh", "-c", 'for f in "$1"/*.json; do [ -f "$f" ] && basename "$f" .json; done', "sh",
                    expand(host, RUNS_DIR)], timeout=30)
    out = []
    for name in res.text.split():
        rec = load(host, name)
        if rec is not None:
            out.append(rec)
    return sorted(out, key=lambda r: r.started_at)


def now() -> float:
    return time.time()


def to_json(rec: RunRecord) -> dict[str, Any]:
    return json.loads(msgspec.json.encode(rec))


def leader_start(host: Host, pid: int) -> Optional[str]:
    """The process start time (clock ticks since boot) of pid, or None if unknown/gone."""
    res = host.run(["cat", f"/proc/{int(pid)}/stat"], timeout=30)
    if not res.ok:
        return None
    text = res.text
    rest = text[text.rfind(")") + 2:].split()
    return rest[19] if len(rest) > 19 else None
