"""Launching, watching, stopping and listing runs. Everything here is written once against
`Host`; whether the server runs here or over SSH is the transport's business.

Invariants: a process dynspec did not start is never signalled (only the process group in a
run record, and only while that group is alive and holds the recorded pid's command line);
nothing is left running unless the user asked for it (--keep, --detach, or a live server)."""
from __future__ import annotations

import json
from typing import Optional

from dynspec_cli import inject
from dynspec_cli.evidence.rules import LAUNCH_PREFIX
from dynspec_cli.knowledge.features import Feature
from dynspec_cli.run import records
from dynspec_cli.run.profiles import Profile
from dynspec_cli.run.records import RunRecord
from dynspec_cli.run.secrets import redact_argv, redact_env
from dynspec_cli.transport import Host

class RunError(Exception):
    """A run cannot be started, found or stopped (one line; exit 2)."""


def ask(host: Host, python: str, *question: str, timeout: float = 30) -> dict:
    """One question of inject/hostcheck.py, answered by `python` on the host."""
    res = host.run_python(python, inject.program("hostcheck.py"), list(question), timeout=timeout)
    try:
        return json.loads(res.stdout)
    except ValueError:
        err = res.stderr.decode("utf-8", "replace").strip().splitlines()
        raise RunError(f"{python} on {host.name} did not answer {question[0]}: "
                       f"{err[-1] if err else f'exit {res.exit_code}'}") from None


def port_taken(host: Host, python: str, port: int) -> bool:
    return ask(host, python, "port-free", str(port)).get("free") is False


def health(host: Host, python: str, port: int) -> tuple[bool, str]:
    doc = ask(host, python, "health", str(port))
    return bool(doc.get("ok")), doc.get("status") or str(doc.get("error"))


def probe_env_on(host: Host, python: str, targets: list[dict], profile_env: dict[str, str]) -> dict[str, str]:
    """Put the probe folder on the host (a versioned copy under ~/.dynspec/probe/ for remote hosts)
    and return the environment additions that inject it."""
    import hashlib

    from dynspec_cli.run import probe as probe_setup

    if host.shares_local_files:
        pdir = str(probe_setup.PROBE_DIR)
    else:
        files = probe_setup.probe_files()
        digest = hashlib.sha256(b"".join(files[n] for n in sorted(files))).hexdigest()[:12]
        pdir = records.expand(host, f"~/.dynspec/probe/{digest}")
        host.run(["mkdir", "-p", pdir], check=True, timeout=30)
        for name, data in files.items():
            host.write_file(f"{pdir}/{name}", data, mode=0o644)
    # bytecode for the server's interpreter: every server process then loads the probe in ~3 ms
    host.run(probe_setup.precompile_command(python, pdir), timeout=60)
    existing = profile_env.get("PYTHONPATH")
    if existing is None:
        res = host.run(["sh", "-c", 'printf %s "${PYTHONPATH:-}"'], timeout=30)
        existing = res.text or None
    return probe_setup.probe_env(targets, existing_pythonpath=existing, probe_dir=pdir)


def start(host: Host, prof: Profile, feature: Feature, *, replace: bool, sglang_version: Optional[str],
          extra_env: dict[str, str] | None = None) -> RunRecord:
    old = records.load(host, prof.name)
    if old is not None and old.stopped_at is None and host.group_alive(old.pgid):
        if not replace:
            raise RunError(f"run {prof.name!r} is alive on {host.name} (pid {old.pid}); "
                           f"use --replace to stop it first, or --name for another run")
        stop(host, old)
    if port_taken(host, prof.python, prof.port):
        raise RunError(f"port {prof.port} is already taken on {host.name}; pick another with --set port=N")
    log = records.expand(host, prof.log_path())
    host.run(["mkdir", "-p", log.rsplit("/", 1)[0] or "/"], check=True, timeout=30)
    offset = host.size(log) or 0
    line_base = lines_before(host, log, offset)
    argv = prof.argv()
    env = dict(prof.env)
    env.update(extra_env or {})
    header = {"name": prof.name, "argv": redact_argv(argv), "env": redact_env(prof.env),
              "started_at": records.now(), "feature": feature.name}
    host.run(["sh", "-c", 'printf "%s\\n" "$1" >> "$2"', "sh", LAUNCH_PREFIX + json.dumps(header), log],
             check=True, timeout=30)
    spawned = host.spawn_detached(argv, env=env, cwd=records.expand(host, prof.workdir) if prof.workdir else None,
                                  log_path=log)
    rec = RunRecord(name=prof.name, host=host.name, pid=spawned.pid, pgid=spawned.pgid, argv=redact_argv(argv),
                    env=redact_env(env), log=log, log_offset=offset, log_line_base=line_base, port=prof.port, started_at=header["started_at"],
                    feature=feature.name, patched_class=list(prof.patched_class), sglang_version=sglang_version,
                    python=prof.python, cwd=prof.workdir, probe=bool(extra_env and "DYNSPEC_PROBE" in extra_env),
                    leader_start=records.leader_start(host, spawned.pid))
    records.save(host, rec)
    return rec


def lines_before(host: Host, log: str, offset: int) -> int:
    """How many lines the log holds before `offset`: a launch judged from there keeps the file's
    line numbers."""
    if offset <= 0:
        return 0
    res = host.run(["sh", "-c", 'head -c "$1" "$2" | wc -l', "sh", str(offset), log], timeout=120)
    try:
        return int(res.text.strip() or 0)
    except ValueError:
        return 0


def stop(host: Host, rec: RunRecord, *, grace: float = 10.0) -> bool:
    """SIGTERM the run's process group, SIGKILL after `grace`; True once no process remains."""
    gone = True
    if rec.leader_start is not None:
        now_start = records.leader_start(host, rec.pid)
        if now_start is not None and now_start != rec.leader_start:
            # pid reused by a process dynspec did not start: never signal it
            rec.stopped_at = records.now()
            records.save(host, rec)
            raise RunError(f"run {rec.name!r}: pid {rec.pid} on {host.name} now belongs to another process "
                           f"(the run ended earlier); nothing was signalled")
    if host.group_alive(rec.pgid):
        gone = host.stop_group(rec.pgid, grace=grace)
    if gone:
        rec.stopped_at = records.now()
        records.save(host, rec)
    return gone


def record_status(host: Host, rec: RunRecord, feature_loader) -> dict:
    """One run: alive or not, the verdict of its log so far (the last 4 MiB), the last log lines."""
    from dynspec_cli.verdict.pipeline import Pipeline

    alive = host.group_alive(rec.pgid) if rec.stopped_at is None else False
    verdict, last_lines = rec.verdict, []
    try:
        size = host.size(rec.log) or 0
        start = max(rec.log_offset, size - (4 << 20))
        data = host.read_file(rec.log, start)
        feature = feature_loader(rec.feature)
        pipe = Pipeline.for_record(rec, feature) if start == rec.log_offset else \
            Pipeline(feature, rec.patched_class or None, rec.sglang_version, offset=start)
        pipe.feed(data)
        pipe.flush()
        verdict = pipe.verdict(at_eof=not alive).verdict
        last_lines = [ln for ln in data.decode("utf-8", "replace").splitlines() if ln.strip()][-3:]
    except (FileNotFoundError, PermissionError):
        last_lines = ["(log not readable)"]
    return {"name": rec.name, "host": rec.host, "pid": rec.pid, "alive": alive, "verdict": verdict, "port": rec.port,
            "log": rec.log, "started_at": rec.started_at, "stopped_at": rec.stopped_at, "last_lines": last_lines}


def status(host: Host, feature_loader) -> list[dict]:
    return [record_status(host, rec, feature_loader) for rec in records.all_records(host)]
