"""Run records: what dynspec started, written on the host that runs it (so `dynspec watch`,
`status` and `stop` work from any machine that can reach the host), in the host's dynspec home
(`$DYNSPEC_HOME` there, default `~/.dynspec`).

A record is written before the server is spawned (state "starting", with a launch token that the
spawned process carries in its environment as DYNSPEC_RUN_ID, and the pid file the spawn writes
first), and completed after: whatever moment dynspec dies, the server can be found and stopped."""
from __future__ import annotations

import json
import time
from typing import Any, Optional

import msgspec

from dynspec_cli import engines
from dynspec_cli.transport import Host

RUNS_DIR = "~/.dynspec/runs"  # "~/.dynspec" stands for the host's dynspec home (see expand)
HOME_PREFIX = "~/.dynspec"
TOKEN_VAR = "DYNSPEC_RUN_ID"  # in the spawned server's environment; not a secret, just an identity
STARTING, STARTED, NOT_STARTED = "starting", "started", "not started"


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
    state: str = STARTED  # starting: written before the spawn; pid/pgid 0 until resolved
    token: Optional[str] = None  # launch token: DYNSPEC_RUN_ID=<token> in the server's environment
    pid_file: Optional[str] = None  # written by the spawn itself before the server runs
    launcher: Optional[str] = None  # the dynspec process that wrote a "starting" record (see launcher_id)
    # whose log and readiness (a name in the engine registry); a record written before records named
    # their engine is the registry's DEFAULT's
    engine: str = engines.DEFAULT
    unwatched: Optional[str] = None  # why the launch that owned it stopped watching it, leaving it running (--keep/--detach)
    # the run's diff (--patch / profile `patch`): {path, sha256, files[] (installed), hunks[]} (run/patchfile.py)
    patch: Optional[dict] = None


def expand(host: Host, path: str) -> str:
    """`~/.dynspec/...` is under the host's dynspec home, other `~/...` under its home."""
    if path == HOME_PREFIX or path.startswith(HOME_PREFIX + "/"):
        return host.dynspec_home() + path[len(HOME_PREFIX):]
    if path == "~" or path.startswith("~/"):
        return host.home().rstrip("/") + path[1:]
    return path


def record_path(host: Host, name: str) -> str:
    return f"{expand(host, RUNS_DIR)}/{name}.json"


def save(host: Host, rec: RunRecord) -> None:
    host.run(["mkdir", "-p", expand(host, RUNS_DIR)], check=True, timeout=30, idempotent=True)
    host.write_file(record_path(host, rec.name), msgspec.json.encode(rec), mode=0o600)


def read(host: Host, name: str) -> Optional[RunRecord]:
    """The record as it is stored: a "starting" one stays so (ownership.load completes it from the host)."""
    try:
        data = host.read_file(record_path(host, name))
    except FileNotFoundError:
        return None
    try:
        rec = msgspec.json.decode(data, type=RunRecord)
    except msgspec.DecodeError:
        return None
    return rec


def of_launch(header: dict) -> Optional[RunRecord]:
    """The record of the launch whose log header is `header` (name and start time, control.start_run),
    when this machine's dynspec home holds it with the same start time. None for anything else (no
    such record, a record a later launch of the same name rewrote, a header without those fields):
    a record that does not match is ignored, never guessed at."""
    import os

    try:
        name, started = str(header["name"]), float(header["started_at"])
    except (KeyError, TypeError, ValueError):
        return None
    if not name or "/" in name or name.startswith("."):
        return None
    home = os.environ.get("DYNSPEC_HOME") or "~/.dynspec"  # as shell.DYNSPEC_HOME reads it on a host
    path = os.path.join(os.path.expanduser(home) + RUNS_DIR[len(HOME_PREFIX):], f"{name}.json")
    try:
        with open(path, "rb") as f:
            rec = msgspec.json.decode(f.read(), type=RunRecord)
    except (OSError, msgspec.DecodeError):
        return None
    return rec if rec.started_at == started and rec.log_offset == 0 else None


def pid_file_path(host: Host, name: str, token: str) -> str:
    return f"{expand(host, RUNS_DIR)}/{name}.{token}.pid"


def all_records(host: Host) -> list[RunRecord]:
    res = host.run(["sh", "-c", 'for f in "$1"/*.json; do [ -f "$f" ] && basename "$f" .json; done', "sh",
                    expand(host, RUNS_DIR)], timeout=30, idempotent=True)
    out = []
    for name in res.text.split():
        rec = read(host, name)
        if rec is not None:
            out.append(rec)
    return sorted(out, key=lambda r: r.started_at)


def _self_stat(pid: int) -> Optional[str]:
    try:
        text = open(f"/proc/{pid}/stat").read()
    except OSError:
        return None
    rest = text[text.rfind(")") + 2:].split()
    return rest[19] if len(rest) > 19 and rest[0] not in ("Z", "X") else None


def _machine() -> str:
    import os
    import socket

    parts = [socket.gethostname()]
    try:
        parts.append(open("/proc/sys/kernel/random/boot_id").read().strip())
        parts.append(os.readlink("/proc/self/ns/pid"))  # containers share a kernel, not a pid space
    except OSError:
        parts.append("?")
    return "|".join(parts)


def launcher_id() -> str:
    """This dynspec process, as `machine|pid|start time`: lets a later dynspec on the same machine
    tell whether the launch that wrote a "starting" record is still under way."""
    import os

    return f"{_machine()}|{os.getpid()}|{_self_stat(os.getpid())}"


def launcher_gone(launcher: Optional[str]) -> bool:
    """True when the launching dynspec ran on this machine and has ended (unknown: False)."""
    if not launcher or "|?|" in launcher:
        return False
    machine, _, rest = launcher.rpartition("|")
    machine, _, pid = machine.rpartition("|")
    if machine != _machine() or not pid.isdigit():
        return False
    return _self_stat(int(pid)) != rest


def now() -> float:
    return time.time()


def to_json(rec: RunRecord) -> dict[str, Any]:
    return json.loads(msgspec.json.encode(rec))


def leader_start(host: Host, pid: int) -> Optional[str]:
    """The process start time (clock ticks since boot) of pid, or None if unknown/gone."""
    res = host.run(["cat", f"/proc/{int(pid)}/stat"], timeout=30, idempotent=True)
    if not res.ok:
        return None
    text = res.text
    rest = text[text.rfind(")") + 2:].split()
    return rest[19] if len(rest) > 19 else None
