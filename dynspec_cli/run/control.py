"""Launching, watching, stopping and listing runs. Everything here is written once against
`Host`; whether the server runs here or over SSH is the transport's business.

Invariants: a process dynspec did not start is never signalled (only the process group in a
run record, and only while that group is alive and holds the recorded pid's command line);
nothing is left running unless the user asked for it (--keep, --detach, or a live server)."""
from __future__ import annotations

import json
import time
from typing import Optional

from dynspec_cli import engines, inject
from dynspec_cli.evidence.observation import LAUNCH_PREFIX
from dynspec_cli.knowledge.features import Feature
from dynspec_cli.run import ownership, records, sigint
from dynspec_cli.run.profiles import Profile
from dynspec_cli.run.records import RunRecord
from dynspec_cli.run.secrets import redact_argv, redact_env
from dynspec_cli.transport import Host

class RunError(Exception):
    """A run cannot be started, found or stopped (one line; exit 2)."""


class RunEnded(RunError):
    """Nothing to stop: the recorded pid is another process's now, the run ended earlier."""


def ask(host: Host, python: str, *question: str, timeout: float = 30) -> dict:
    """One question of inject/hostcheck.py, answered by `python` on the host. Every question
    only looks (a port, /health, a hash), so a connection drop under one is asked again."""
    res = host.run_python(python, inject.program("hostcheck.py"), list(question), timeout=timeout, idempotent=True)
    try:
        return json.loads(res.stdout)
    except ValueError:
        err = res.stderr.decode("utf-8", "replace").strip().splitlines()
        raise RunError(f"{python} on {host.name} did not answer {question[0]}: "
                       f"{err[-1] if err else f'exit {res.exit_code}'}") from None


def port_taken(host: Host, python: str, port: int) -> bool:
    return ask(host, python, "port-free", str(port)).get("free") is False


def health(host: Host, python: str, port: int, paths: tuple[str, ...]) -> tuple[bool, str]:
    """Is the server ready: the first of `paths` (the engine's readiness, engines/__init__.py) to answer 200."""
    doc = ask(host, python, "health", str(port), *paths)
    return bool(doc.get("ok")), doc.get("status") or str(doc.get("error"))


def probe_env_on(host: Host, python: str, probe_setup, targets: list[dict], profile_env: dict[str, str]) -> dict[str, str]:
    """Put the probe folder (the engine's `probe`, engines/protocol.py ProbeSetup) on the host (a
    versioned copy under ~/.dynspec/probe/ for remote hosts) and return the environment additions
    that inject it."""
    import hashlib

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
          extra_env: dict[str, str] | None = None, patch: Optional[dict] = None) -> RunRecord:
    """Spawn the server, detached. The record is written first ("starting", with a launch token
    the server carries in its environment and a pid file the spawn writes before the server runs),
    then completed: dynspec killed or interrupted at any point leaves a findable, stoppable run."""
    import uuid

    old = records.read(host, prof.name)
    if old is not None and old.state == records.STARTING:
        old = ownership.resolve(host, old)
        if old.state == records.STARTING:
            from dynspec_cli.run.hints import command

            raise RunError(f"run {prof.name!r} is being started on {host.name} right now; "
                           f"wait for it ({command('status', prof.name, host=host)}), or use --name for another run")
    if old is not None and old.stopped_at is None and old.pgid > 1 and host.group_alive(old.pgid):
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
    token = uuid.uuid4().hex
    rec = RunRecord(name=prof.name, host=host.name, pid=0, pgid=0, argv=redact_argv(argv), env=redact_env(env),
                    log=log, log_offset=offset, log_line_base=line_base, port=prof.port, started_at=records.now(),
                    feature=feature.name, patched_class=list(prof.patched_class), sglang_version=sglang_version,
                    python=prof.python, cwd=prof.workdir, probe=bool(extra_env and "DYNSPEC_PROBE" in extra_env),
                    engine=prof.engine or engines.name_of(feature), patch=patch,
                    state=records.STARTING, token=token, launcher=records.launcher_id(),
                    pid_file=records.pid_file_path(host, prof.name, token))
    spawning = False
    try:
        records.save(host, rec)
        header = {"name": prof.name, "argv": redact_argv(argv), "env": redact_env(prof.env),
                  "started_at": rec.started_at, "feature": feature.name}
        host.run(["sh", "-c", 'printf "%s\\n" "$1" >> "$2"', "sh", LAUNCH_PREFIX + json.dumps(header), log],
                 check=True, timeout=30)
        spawning = True
        # Ctrl-C waits for the spawn to answer: cut short there (an SSH spawn takes seconds under
        # load), the pid file may not be written yet when the interrupt asks the host who runs
        with sigint.held(f"starting {prof.name}"):
            spawned = host.spawn_tracked(argv, env={**env, records.TOKEN_VAR: token},
                                         cwd=records.expand(host, prof.workdir) if prof.workdir else None,
                                         log_path=log, pid_file=rec.pid_file)
        rec.pid, rec.pgid, rec.state = spawned.pid, spawned.pgid, records.STARTED
        rec.leader_start = records.leader_start(host, spawned.pid)
        records.save(host, rec)
        ownership.forget_pid_file(host, rec)
    except BaseException:
        _settle(host, rec, spawning=spawning)
        raise
    return rec


def _settle(host: Host, rec: RunRecord, *, spawning: bool) -> None:
    """The start broke off (an error, Ctrl-C): complete the record from the host, so the server,
    if any, is known. Before the spawn began nothing can have started: the run is "not started".
    What to stop or to say is the caller's (launch.interrupted)."""
    try:
        if spawning:
            ownership.resolve(host, records.read(host, rec.name) or rec)
        elif rec.state == records.STARTING:
            rec.state, rec.stopped_at = records.NOT_STARTED, records.now()
            records.save(host, rec)
    except BaseException:  # noqa: B902 - the record on the host still leads to the server
        pass


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


def settled(host: Host, rec: RunRecord) -> RunRecord:
    """The record with its server found, if its launch broke off ("starting"); RunError while the
    launch is still under way."""
    rec = ownership.resolve(host, rec)
    if rec.state == records.STARTING:
        raise RunError(f"run {rec.name!r} on {host.name} is still being started (no process of it yet); "
                       f"try again shortly")
    return rec


def stop(host: Host, rec: RunRecord, *, grace: float = 10.0) -> bool:
    """SIGTERM the run's process group, SIGKILL after `grace`; True once no process remains.
    Only processes proven to be the run's are signalled (see run/ownership.py); otherwise
    RunError, and nothing was signalled."""
    return stop_run(host, rec, grace=grace)[1]


def stop_run(host: Host, rec: RunRecord, *, grace: float = 10.0) -> tuple[bool, bool]:
    """(was alive, gone); the record is marked stopped once nothing remains."""
    was_alive, gone = ownership.stop(host, rec, grace=grace)
    if gone:
        rec.stopped_at = rec.stopped_at or records.now()
        records.save(host, rec)
    return was_alive, gone


def still_running(host: Host, rec: RunRecord) -> list[int]:
    """The live pids of the run's process group (after a stop that did not end them all)."""
    try:
        doc = ownership.identify(host, rec)
    except RunError:
        return []
    return sorted({int(m["pid"]) for m in doc.get("members") or []})


LOG_WINDOW = 4 << 20  # the verdict so far is judged from the last 4 MiB of a run's launch
DONE_WINDOW = 64 << 10  # a run that is over keeps its recorded verdict: only its last lines are read


def record_status(host: Host, rec: RunRecord, feature_loader) -> dict:
    """One run: alive or not, the verdict of its log so far (the last 4 MiB), the last log lines."""
    rows = status(host, feature_loader, names=[rec.name])
    if rows:
        return rows[0]
    return record_status_per_call(host, rec, feature_loader)


def status(host: Host, feature_loader, names: Optional[list[str]] = None) -> list[dict]:
    """Every run on the host (or the named ones), from one round trip: the host's python reads the
    records, the process table and the log tails (dynspec_cli/inject/runstate.py); the verdicts are
    judged here. Falls back to one call per record where that python cannot run."""
    import base64

    import msgspec

    try:
        doc = ownership.ask(host, "status", {"dir": records.expand(host, records.RUNS_DIR), "names": names,
                                             "window_live": LOG_WINDOW, "window_done": DONE_WINDOW})
    except RunError:
        return status_per_call(host, feature_loader, names)
    rows = []
    for row in doc["runs"]:
        try:
            rec = msgspec.json.decode(row["record"].encode("utf-8"), type=RunRecord)
        except (KeyError, msgspec.DecodeError):
            continue
        if rec.state == records.STARTING:
            rec = ownership.resolve(host, rec, row["identify"])
        alive, note = _alive(host, rec, row["identify"])
        verdict, last_lines = rec.verdict, []
        if "log_data" in row:
            data = base64.b64decode(row["log_data"])
            if not (rec.stopped_at is not None and rec.verdict is not None):
                verdict = _judge(data, row["log_from"], rec, feature_loader, alive=alive,
                                 quiet_for=max(0.0, doc["now"] - row["log_mtime"]))
            last_lines = _last_lines(data)
        else:
            last_lines = ["(log not readable)"]
        rows.append(_row(rec, alive, verdict, last_lines, note))
    return sorted(rows, key=lambda r: r["started_at"])


def _alive(host: Host, rec: RunRecord, doc: Optional[dict] = None) -> tuple[bool, Optional[str]]:
    """(alive, note): alive only when `stop` would stop it, i.e. its processes live and are
    provably its own (run/ownership.py); note: why live processes in its group are not counted."""
    if rec.stopped_at is not None or rec.state != records.STARTED or rec.pgid <= 1:
        return False, None
    proof = ownership.prove(host, rec, doc)
    if proof.reused:
        return False, f"pid {rec.pid} is another process now"
    if proof.refusal:
        return False, f"processes in group {rec.pgid} are not provably this run's ({proof.refusal})"
    return proof.alive, None


def _judge(data: bytes, start: int, rec: RunRecord, feature_loader, *, alive: bool, quiet_for: float) -> Optional[str]:
    """The verdict of the log from byte `start` on. A live process's log that shows a crash and
    has been quiet since is crashed (as watch decides), not "inconclusive"."""
    from dynspec_cli import engines
    from dynspec_cli.verdict.pipeline import Pipeline, record_diff

    feature = feature_loader(rec.feature)
    engine = engines.get(rec.engine)
    pipe = Pipeline.for_record(rec, feature, engine) if start == rec.log_offset else \
        Pipeline(feature, rec.patched_class or None, rec.sglang_version, offset=start, engine=engine,
                 diff=record_diff(rec))
    pipe.feed(data)
    pipe.flush()
    return pipe.verdict(at_eof=not alive, quiet_for=quiet_for).verdict


def _last_lines(data: bytes) -> list[str]:
    return [ln for ln in data.decode("utf-8", "replace").splitlines() if ln.strip()][-3:]


def _row(rec: RunRecord, alive: bool, verdict: Optional[str], last_lines: list[str],
         note: Optional[str] = None) -> dict:
    return {"name": rec.name, "host": rec.host, "pid": rec.pid, "alive": alive, "verdict": verdict,
            "port": rec.port, "log": rec.log, "started_at": rec.started_at, "stopped_at": rec.stopped_at,
            "state": rec.state, "last_lines": last_lines, "note": note, "unwatched": rec.unwatched}


def record_status_per_call(host: Host, rec: RunRecord, feature_loader) -> dict:
    """record_status with one host call per question (the way before the one-round-trip status;
    kept for hosts whose python cannot run the status script, and as the benchmark's baseline)."""
    if rec.state == records.STARTING:
        rec = ownership.resolve(host, rec)
    try:
        alive, note = _alive(host, rec)
    except RunError:  # the host's python cannot inspect its processes: the group's liveness is all we have
        alive, note = (host.group_alive(rec.pgid) if rec.stopped_at is None and rec.pgid > 1 else False), None
    verdict, last_lines = rec.verdict, []
    try:
        size = host.size(rec.log) or 0
        start = max(rec.log_offset, size - LOG_WINDOW)
        data = host.read_file(rec.log, start)
        verdict = _judge(data, start, rec, feature_loader, alive=alive, quiet_for=0.0)
        last_lines = _last_lines(data)
    except (FileNotFoundError, PermissionError):
        last_lines = ["(log not readable)"]
    return _row(rec, alive, verdict, last_lines, note)


def status_per_call(host: Host, feature_loader, names: Optional[list[str]] = None) -> list[dict]:
    return [record_status_per_call(host, ownership.resolve(host, rec), feature_loader)
            for rec in records.all_records(host) if names is None or rec.name in names]
