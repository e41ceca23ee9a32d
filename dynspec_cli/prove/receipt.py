"""The receipt: what `dynspec prove` established about which server process and which patched
files, written next to the run record on the server's host; and the gate that checks, cheaply,
that the server a benchmark is about to measure is still that one.

Schema `dynspec-receipt/1` (one JSON object):

    schema, created_at (unix s), created_at_iso, host, run {name, log, log_offset, port, started_at}
    feature
    live, proven, outcome, exit_code        the verdict is live / the behaviour is proven
    verdict {verdict, source, sglang_version, worker {class, module}, marker {found, text, fields}}
    probe   {lines, hits [{function, count}], verdict (the judge's probe summary: proven, ranks, ...)}
            or null (no DYNSPEC-PROBE lines)
    prove   {threshold, threshold_source, steps [{index, concurrency, running_mode, running_range,
             accept_len, speculation, expected, outcome}], conclusion {outcome, exit_code, message, hint}}
    profile {argv, env}                     redacted, as in the run record
    sglang_version, worker_class
    server  {pid, pgid, leader_start, cmdline_sha256, boot_id, python}; a Slurm run's: node 0's
            server as seen on node 0 (+ node), pgid null
    slurm   {job_id, nodes, addrs, conf} or absent (not a Slurm run)
    patched_files [{path, sha256, source: given|diff|marker-search|record|plugin}], patched_files_note
            (record: the file differs from the installed distribution's dist-info RECORD)
    patch   {path, sha256, files[], hunks[]} of the run's --patch / profile `patch` (the run
            record's), or null
    acceptance {provenance: real|synthetic|lossy, evidence [{setting, value, provenance, why}]}
            (verdict/acceptance.py on the run's command line; the gate refuses a run whose
            acceptance is not real unless told to accept it)
"""
from __future__ import annotations

import datetime
import hashlib
import json
import time
from typing import Any, Optional

from dynspec_cli import engines
from dynspec_cli.run import records
from dynspec_cli.run.records import RunRecord
from dynspec_cli.transport import Host
from dynspec_cli.verdict import acceptance

SCHEMA = "dynspec-receipt/1"


def receipt_path(host: Host, name: str) -> str:
    return f"{records.expand(host, records.RUNS_DIR)}/{name}.receipt.json"


def cmdline_sha256(host: Host, pid: int) -> Optional[str]:
    try:
        data = host.read_file(f"/proc/{int(pid)}/cmdline")
    except OSError:
        return None
    return hashlib.sha256(data).hexdigest() if data else None


def boot_id(host: Host) -> Optional[str]:
    """The kernel's id of the current boot: a pid and start time only name a process within one boot
    of one machine."""
    try:
        return host.read_file("/proc/sys/kernel/random/boot_id").decode("ascii", "replace").strip() or None
    except OSError:
        return None


def file_sha256(host: Host, path: str) -> Optional[str]:
    try:
        return hashlib.sha256(host.read_file(path)).hexdigest()
    except OSError:
        return None


def find_patched_files(host: Host, python: str, feature, argv: list[str]) -> tuple[list[str], str]:
    """The files holding the feature's marker literal under the sglang that `python` imports, and
    every .py file of it that differs from its dist-info RECORD, by dynspec's inspector (static:
    sglang is not imported)."""
    found, note = patched_sources(host, python, feature, argv)
    return [p for p, _ in found], note


def patched_sources(host: Host, python: str, feature, argv: list[str],
                    patch: Optional[dict] = None) -> tuple[list[tuple[str, str]], str]:
    """(path, source) of every file the gate pins: the run's diff's installed files (`patch`: the
    run record's, source "diff"), the files holding the marker ("marker-search") and the files
    that differ from the released distribution's RECORD ("record")."""
    from dynspec_cli import engines
    from dynspec_cli.engines.protocol import PATCHED_FILES

    given = [(p, "diff") for p in (patch or {}).get("files") or []]
    engine = engines.of(feature)
    if not engine.supports(PATCHED_FILES):  # its install is not searched: the diff's files, or the reason
        if given:
            return given, f"the files of the diff {patch.get('path')}"
        return engine.patched_files(host, python, feature, list(argv[3:]))
    return engine.patched_files(host, python, feature, list(argv[3:]), given=given, diff_path=(patch or {}).get("path"))


def build(host: Host, rec: RunRecord, proof_doc: dict[str, Any], verdict: Optional[dict[str, Any]],
          probe: Optional[dict[str, Any]], files: list[tuple[str, str]], files_note: str,
          where=None) -> dict[str, Any]:
    """`where`: a run a scheduler placed (session.Target.where): it names the server and adds its part."""
    now = time.time()
    if where is not None:
        server = where.receipt_server()
    else:
        server = {"pid": rec.pid, "pgid": rec.pgid, "leader_start": rec.leader_start,
                  "cmdline_sha256": cmdline_sha256(host, rec.pid), "boot_id": boot_id(host), "python": rec.python}
    concl = proof_doc.get("conclusion") or {}
    v = verdict or {}
    return {
        "schema": SCHEMA,
        "created_at": now,
        "created_at_iso": datetime.datetime.fromtimestamp(now, datetime.timezone.utc).isoformat(timespec="seconds"),
        "host": host.name,
        "run": {"name": rec.name, "log": rec.log, "log_offset": rec.log_offset, "port": rec.port,
                "started_at": rec.started_at},
        "feature": rec.feature,
        "engine": rec.engine,
        "live": v.get("verdict") == "live",
        "proven": concl.get("outcome") == "proven",
        "outcome": concl.get("outcome"),
        "exit_code": concl.get("exit_code"),
        "verdict": {"verdict": v.get("verdict"), "source": f"fresh verify of {rec.log} from byte {rec.log_offset}",
                    "sglang_version": v.get("sglang_version"),
                    "worker": {"class": (v.get("worker") or {}).get("class"), "module": (v.get("worker") or {}).get("module")},
                    "marker": {k: (v.get("marker") or {}).get(k) for k in ("found", "text", "fields")}},
        "probe": probe,
        "prove": {"threshold": proof_doc.get("threshold"), "threshold_source": proof_doc.get("threshold_source"),
                  "steps": [{k: s.get(k) for k in ("index", "concurrency", "running_mode", "running_range", "accept_len",
                                                   "speculation", "expected", "outcome")}
                            for s in proof_doc.get("steps") or []],
                  "conclusion": concl},
        "profile": {"argv": list(rec.argv), "env": dict(rec.env)},
        "sglang_version": v.get("sglang_version") or (proof_doc.get("server") or {}).get("version"),
        "worker_class": (v.get("worker") or {}).get("class"),
        "server": server,
        "patched_files": [{"path": p, "sha256": file_sha256(host, p), "source": src} for p, src in files],
        "patched_files_note": files_note,
        "acceptance": acceptance.of(rec.engine, list(rec.argv)),
        "patch": rec.patch,  # the run's diff (its files are among patched_files, source "diff")
        **(where.receipt_part() if where is not None else {}),
    }


def write(host: Host, doc: dict[str, Any]) -> str:
    path = receipt_path(host, doc["run"]["name"])
    host.run(["mkdir", "-p", records.expand(host, records.RUNS_DIR)], check=True, timeout=30, idempotent=True)
    host.write_file(path, (json.dumps(doc, indent=2, ensure_ascii=False) + "\n").encode("utf-8"), mode=0o600)
    return path


class GateFailed(Exception):
    """One failed gate check: `check` names it, the message says what differs."""

    def __init__(self, check: str, message: str) -> None:
        super().__init__(f"{check}: {message}")
        self.check = check


def provenance(doc: dict[str, Any]) -> dict[str, Any]:
    """The receipt's acceptance provenance (read again from its command line for receipts written
    before it was recorded)."""
    return doc.get("acceptance") or acceptance.of(doc.get("engine") or engines.DEFAULT, list((doc.get("profile") or {}).get("argv") or []))


def check(host: Host, doc: dict[str, Any], *, max_age: Optional[float], now: Optional[float] = None,
          accept_synthetic: bool = False, check_server=None, patch: Optional[tuple[str, str]] = None) -> str:
    """Every gate check, in order; the first that fails raises GateFailed. Returns a summary.
    `check_server(host, doc)`: the placement's check that the proven server still runs (default:
    the process on `host`, check_process). `patch`: (path, sha256) of the diff the benchmark means to
    measure (`--patch`): the receipt must have proven that diff."""
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
        raise GateFailed("receipt", f"not a dynspec receipt (schema {doc.get('schema') if isinstance(doc, dict) else None!r})")
    from dynspec_cli.prove.plan import format_age

    name = (doc.get("run") or {}).get("name")
    if not doc.get("live"):
        raise GateFailed("live", f"the receipt's verdict is {(doc.get('verdict') or {}).get('verdict')}, not live")
    if not doc.get("proven"):
        c = (doc.get("prove") or {}).get("conclusion") or {}
        raise GateFailed("proven", f"the receipt's prove outcome is {doc.get('outcome')}: {c.get('message')}")
    if patch is not None:
        _same_patch(doc, *patch)
    prov = provenance(doc)
    if prov["provenance"] != "real" and not accept_synthetic:
        raise GateFailed("acceptance", f"the server's acceptance is {prov['provenance']}, not earned by the draft: "
                                       f"{acceptance.describe(prov)}; pass --accept-synthetic to measure it anyway")
    age = (now or time.time()) - float(doc.get("created_at") or 0)
    if max_age is not None and age > max_age:
        raise GateFailed("age", f"the receipt is {format_age(age)} old (max {format_age(max_age)}); prove again")
    who = (check_server or check_process)(host, doc)
    files = doc.get("patched_files") or []
    if not files:
        raise GateFailed("patched-files", "the receipt names no patched file (prove with --patched-file PATH)")
    for f in files:
        now_sha = file_sha256(host, f.get("path"))
        if now_sha is None:
            raise GateFailed("patched-files", f"{f.get('path')} is missing or unreadable on {host.name}")
        if now_sha != f.get("sha256"):
            raise GateFailed("patched-files", f"{f.get('path')} changed since it was proven "
                                              f"(sha256 {now_sha[:12]}… != {str(f.get('sha256'))[:12]}…)")
    return (f"{name}: live and proven {format_age(age)} ago, same server process ({who}), "
            f"{len(files)} patched file(s) unchanged" + ("" if prov["provenance"] == "real" else
                                                         f", acceptance {prov['provenance']} (--accept-synthetic)"))


def _same_patch(doc: dict[str, Any], path: str, sha: str) -> None:
    """The proven run carried the diff given (the run record's patch, as launch --patch wrote it)."""
    proven = doc.get("patch") or {}
    if not proven.get("sha256"):
        raise GateFailed("patch", f"the receipt proves a run launched without a diff, so not {path}: launch with "
                                  f"--patch {path} and prove again")
    if proven["sha256"] != sha:
        raise GateFailed("patch", f"the receipt proves another diff ({proven.get('path')}, sha256 "
                                  f"{proven['sha256'][:12]}) than {path} (sha256 {sha[:12]}): the server runs another patch")


def check_process(host: Host, doc: dict[str, Any]) -> str:
    """The proven server is the process running on `host` (GateFailed if not); returns who it is."""
    srv = doc.get("server") or {}
    pid = srv.get("pid")
    if srv.get("boot_id") and boot_id(host) != srv.get("boot_id"):
        raise GateFailed("host", f"{host.name} is not the machine (or boot) the receipt was written on "
                                 f"({doc.get('host')}): check with --host")
    if not isinstance(pid, int) or not host.is_alive(pid):
        raise GateFailed("process", f"the proven server (pid {pid}) is not running on {host.name}: restarted or stopped")
    if srv.get("leader_start") is None:
        raise GateFailed("process", f"the receipt holds no start time for pid {pid}, so the process cannot be "
                                    f"told apart from a later one with the same pid; prove again")
    start = records.leader_start(host, pid)
    if start != srv.get("leader_start"):
        raise GateFailed("process", f"pid {pid} on {host.name} is another process than the proven server "
                                    f"(start time {start} != {srv.get('leader_start')}): the server restarted")
    cmd = cmdline_sha256(host, pid)
    if cmd != srv.get("cmdline_sha256"):
        raise GateFailed("cmdline", f"the command line of pid {pid} differs from the proven server's")
    return f"pid {pid}"
