"""Proof that processes on a host are a run's, before anything is signalled; and finding the
server of a record whose launch never completed.

What counts as proof (Linux /proc, read by dynspec_cli/inject/runstate.py on the host):
  * the recorded pid is alive, its start time is the recorded `leader_start`, and it carries the
    run's launch token (DYNSPEC_RUN_ID in /proc/PID/environ) -- or, for records written before
    tokens existed, its command line is the recorded argv; or
  * some live member of the recorded process group carries the launch token (the leader is gone,
    its children remain).
Without proof nothing is signalled: the refusal is one line (RunError, exit 2). Once proven, each
signal goes to the group only while a process seen in it at proof time is still alive there with
the same start time, so a group that emptied and whose number was reused is never hit.
"""
from __future__ import annotations

import json
import signal
import time
from dataclasses import dataclass, field
from typing import Any, Optional

from dynspec_cli import inject
from dynspec_cli.run import records
from dynspec_cli.run.records import NOT_STARTED, STARTED, STARTING, RunRecord
from dynspec_cli.transport import Host

# a "starting" record older than this with no process found was never started (the spawn's own
# timeout is 60 s)
START_GRACE = 120.0


def _error(msg: str, *, ended: bool = False) -> Exception:
    from dynspec_cli.run.control import RunEnded, RunError

    return (RunEnded if ended else RunError)(msg)


def ask(host: Host, command: str, req: dict[str, Any], *, timeout: float = 60) -> dict[str, Any]:
    """Run one runstate command with the host's python; its JSON answer. Each command may run twice
    (a drop under it is retried through a reconnect): identify and status only read, and a signal
    is sent only to the processes the anchors still prove to be the run's, so a second SIGTERM or
    SIGKILL to them changes nothing."""
    res = host.run_python(host.python, inject.program("runstate.py"), [command, json.dumps(req)], timeout=timeout,
                          idempotent=True)
    try:
        doc = json.loads(res.stdout)
    except ValueError:
        err = res.stderr.decode("utf-8", "replace").strip().splitlines()
        raise _error(f"{host.name}: cannot inspect its processes with {host.python!r}: "
                     f"{err[-1] if err else f'exit code {res.exit_code}'}") from None
    if not doc.get("ok"):
        raise _error(f"{host.name}: inspecting its processes failed: {doc.get('error')}")
    return doc


def identify(host: Host, rec: RunRecord) -> dict[str, Any]:
    return ask(host, "identify", {"pid": rec.pid, "pgid": rec.pgid, "token": rec.token, "argv": rec.argv,
                                  "pid_file": rec.pid_file})


def load(host: Host, name: str) -> Optional[RunRecord]:
    """The record of `name` with its server found: a launch that broke off ("starting") is
    completed from what is on the host (`resolve`), so every caller gets the server it started."""
    rec = records.read(host, name)
    return resolve(host, rec) if rec is not None else None


def resolve(host: Host, rec: RunRecord, doc: Optional[dict[str, Any]] = None, *,
            launch_over: bool = False) -> RunRecord:
    """Complete a "starting" record (dynspec died or was interrupted during the launch) from what
    is on the host: the pid file the spawn wrote, or a process carrying the launch token. Saved
    once resolved; left "starting" while the launch may still be under way (`launch_over`: the
    launcher itself says its start has unwound, so nothing found means nothing started)."""
    if rec.state != STARTING:
        return rec
    doc = doc if doc is not None else identify(host, rec)
    pid = int(doc.get("pid") or 0)
    if pid > 0:
        leader = doc.get("leader")
        rec.pid = rec.pgid = pid
        if leader and leader.get("token"):
            rec.leader_start = leader["start"]
        rec.state = STARTED
        ours = bool(leader and leader.get("token")) or any(m.get("token") for m in doc.get("members", []))
        if not ours:
            rec.stopped_at = records.now()  # it ran and is gone
    elif launch_over or records.launcher_gone(rec.launcher) or records.now() - rec.started_at > START_GRACE:
        rec.state, rec.stopped_at = NOT_STARTED, records.now()
    else:
        return rec
    records.save(host, rec)
    forget_pid_file(host, rec)
    return rec


def forget_pid_file(host: Host, rec: RunRecord) -> None:
    if rec.pid_file:
        try:
            host.remove(rec.pid_file)
        except OSError:
            pass  # only tidiness: the record holds the pid now


@dataclass
class Proof:
    alive: bool  # some process of the group (or the recorded pid) lives
    anchors: list[list[Any]] = field(default_factory=list)  # [pid, start] seen in the proven group
    refusal: Optional[str] = None
    reused: bool = False  # the recorded pid is another process now, and the run's group is gone


def prove(host: Host, rec: RunRecord, doc: Optional[dict[str, Any]] = None) -> Proof:
    """Whether the run's processes live and are provably its own (doc: an `identify` answer
    already in hand, e.g. status's)."""
    doc = identify(host, rec) if doc is None else doc
    leader, members = doc.get("leader"), doc.get("members") or []
    if not leader and not members:
        return Proof(alive=False)
    if not doc.get("proc"):
        return Proof(True, refusal="the host has no /proc to prove who its processes are")
    proven, why = False, None
    if leader:
        if rec.leader_start is None:
            why = f"the record has no start time for pid {rec.pid}"
        elif leader["start"] != rec.leader_start:
            why = "reused"
        elif rec.token is not None and not leader["token"]:
            why = f"pid {rec.pid} does not carry the run's launch token"
        elif rec.token is None and not leader["cmdline"]:
            why = f"the command line of pid {rec.pid} is not the recorded one"
        elif leader["pgid"] != rec.pgid:
            why = f"pid {rec.pid} left process group {rec.pgid}"
        else:
            proven = True
    if not proven and rec.token is not None and any(m["token"] for m in members):
        proven = True  # the leader is gone (or another process now), its children carry the token
    if proven:
        anchors = [[m["pid"], m["start"]] for m in members]
        if leader and leader["pgid"] == rec.pgid and [rec.pid, leader["start"]] not in anchors:
            anchors.append([rec.pid, leader["start"]])
        return Proof(True, anchors)
    if why == "reused":
        return Proof(True, refusal=why, reused=True)
    if why is None:
        why = ("its leader is gone and no member carries the run's launch token" if rec.token is not None
               else "its leader is gone and the record has no launch token")
    return Proof(True, refusal=why)


def stop(host: Host, rec: RunRecord, *, grace: float = 10.0) -> tuple[bool, bool]:
    """(was alive, gone): SIGTERM the proven group, SIGKILL after `grace`, confirm none remain.
    Raises RunError, having signalled nothing, when the processes cannot be proven the run's."""
    if rec.state == STARTING:
        rec = resolve(host, rec)
        if rec.state == STARTING:
            raise _error(f"run {rec.name!r} on {host.name} is still being started (no process of it yet); "
                         f"nothing was signalled; try again in a few seconds")
    if rec.state == NOT_STARTED or rec.pgid <= 1:
        return False, True
    proof = prove(host, rec)
    settle = time.monotonic() + 2.0
    while proof.refusal and not proof.reused and time.monotonic() < settle:
        time.sleep(0.25)  # a server that is crashing right now loses its identity before its pid
        proof = prove(host, rec)
    if not proof.alive:
        return False, True
    if proof.reused:
        rec.stopped_at = records.now()
        records.save(host, rec)
        raise _error(f"run {rec.name!r}: pid {rec.pid} on {host.name} now belongs to another process "
                     f"(the run ended earlier); nothing was signalled", ended=True)
    if proof.refusal:
        raise _error(f"run {rec.name!r}: cannot prove that process group {rec.pgid} on {host.name} is this run's "
                     f"({proof.refusal}); nothing was signalled")
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
        sent = ask(host, "signal", {"pgid": rec.pgid, "sig": int(sig), "anchors": proof.anchors})
        if not sent.get("signalled") and not host.group_alive(rec.pgid):
            return True, True
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            if not host.group_alive(rec.pgid):
                return True, True
            time.sleep(0.05)
        if not sent.get("signalled"):
            break  # what is left in the group is not provably the run's
    return True, not host.group_alive(rec.pgid)
