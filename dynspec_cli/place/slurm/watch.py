"""Watching a Slurm job: every node's log judged by its own loop (place/multinode.py: live only
when every node is) beside the job's state, which only the scheduler knows: pending, running,
requeued, ended by Slurm. The job's state stands in for a process that dynspec could ask about."""
from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from dynspec_cli import engines
from dynspec_cli.place.multinode import NodeLoops, NodeState, decide, group_verdict, timed_out
from dynspec_cli.place.slurm.record import SlurmRecord, node_record, save
from dynspec_cli.place.slurm.scheduler import (BY_SLURM, WAITING, JobState, SlurmError, cancel, down_nodes,
                                               hostnames, job_state, node_addr, queued)
from dynspec_cli.run import records
from dynspec_cli.transport import Host, TransportError


def _readiness(rec: SlurmRecord) -> tuple[str, ...]:
    """(A SlurmRecord names no engine: the registry's DEFAULT, the multi-node engine that runs there.)"""
    return engines.get(node_record(rec, 0).engine).serving.readiness


HEALTH_AT = r"""
import sys, urllib.request
addr, port, paths = sys.argv[1], sys.argv[2], sys.argv[3:]
last = "unreachable"
for path in paths:
    try:
        with urllib.request.urlopen(f"http://{addr}:{port}{path}", timeout=5) as r:
            print(path, r.status); sys.exit(0)
    except Exception as e:
        last = f"{path} {getattr(e, 'code', None) or type(e).__name__}"
print(last)
"""


@dataclass
class SlurmOutcome:
    verdict: str
    exit_code: int
    why: str  # live | node-dead | node-crashed | stalled | timeout | preflight | job-ended | pending | requeued
    # | interrupted
    message: str
    states: list
    job: JobState
    cancelled: bool = False
    gone: bool = False  # nothing of the job is queued any more
    culprit: Optional[int] = None
    preflight: Optional[list] = None
    timings: dict = field(default_factory=dict)  # seconds from the start of watching (just after sbatch)

    def to_json(self, rec: SlurmRecord) -> dict[str, Any]:
        return {"name": rec.name, "job_id": rec.job_id, "job_state": self.job.state, "job_reason": self.job.reason,
                "nodes_allocated": rec.nodes, "node_addrs": rec.addrs, "verdict": self.verdict,
                "exit_code": self.exit_code, "why": self.why, "culprit": self.culprit, "message": self.message,
                "cancelled": self.cancelled, "gone": self.gone,
                "nodes": [{**s.to_json(), "log": rec.logs[s.rank]} for s in self.states], "preflight": self.preflight,
                "timings": self.timings}


class JobWatch:
    """The job's state, polled in one thread for every node's loop."""

    def __init__(self, login: Host, jid: str, every: float = 0.5):
        self.login, self.jid, self.every = login, jid, every
        self.state = JobState("UNKNOWN")
        self.lock = threading.Lock()
        self.error: Optional[str] = None

    def poll(self) -> JobState:
        try:
            st = job_state(self.login, self.jid)
            self.error = None
        except SlurmError as e:
            self.error = str(e)
            return self.state
        with self.lock:
            self.state = st
        return st


def fill_nodes(login: Host, rec: SlurmRecord, st: JobState) -> None:
    """Once the job has nodes: their names (rank order) and addresses, and the rendezvous."""
    if rec.nodes or not st.nodelist:
        return
    names = hostnames(login, st.nodelist)
    if not names:
        return
    rec.nodes = names
    rec.addrs = [node_addr(login, n) for n in names]
    save(login, rec)


def read_preflight(login: Host, rec: SlurmRecord) -> list[Optional[dict]]:
    out: list[Optional[dict]] = []
    for f in rec.preflight_files:
        try:
            out.append(json.loads(login.read_file(f)))
        except (OSError, ValueError):  # not there yet, or this read failed (a drop): the next poll reads it
            out.append(None)
    return out


def watch(login: Host, rec: SlurmRecord, feature, *, timeout: Optional[float], pending_timeout: Optional[float],
          stall_timeout: float, keep: bool, on_change: Callable[[SlurmRecord, JobState, list], None] | None = None
          ) -> SlurmOutcome:
    """Every node's log judged (group verdict: live only when every node is) beside the job's state.
    Dead/crashed/stalled/timeout: scancel and confirm the job gone, unless `keep`. KeyboardInterrupt
    propagates (the caller cancels or detaches)."""
    w = _Watch(login, rec, feature, stall_timeout, on_change)
    try:
        outcome = None
        while outcome is None:
            outcome = w.step(timeout, pending_timeout)
            if outcome is None:
                w.loops.wait(0.5 if w.loops.threads else w.jw.every)
    finally:
        w.loops.end()
    return w.settle(outcome, keep)


class _Watch:
    """One watch of a job: the job's state polled, the nodes' loops started once it runs, and at
    each step the first thing that decides it."""

    def __init__(self, login: Host, rec: SlurmRecord, feature, stall_timeout: float, on_change):
        self.login, self.rec, self.feature, self.stall_timeout, self.on_change = login, rec, feature, stall_timeout, on_change
        self.jw = JobWatch(login, rec.job_id)
        self.states = [NodeState(r, "?", f"{rec.name}-n{r}") for r in range(rec.nnodes)]
        self.loops = NodeLoops("dynspec-slurm-n")
        self.t0 = time.monotonic()
        self.started: Optional[float] = None
        self.last_shown = None
        self.was_live = rec.verdict == "live"  # an earlier watch saw every node live (a later exit does not undo it)

    def step(self, timeout: Optional[float], pending_timeout: Optional[float]) -> Optional[SlurmOutcome]:
        login, rec, states = self.login, self.rec, self.states
        st = self.jw.poll()
        if st.restarts > rec.restarts or (st.state == "NODE_FAIL" and st.state != rec.state):
            return _requeued(login, rec, states, st, self.was_live)
        if st.state not in WAITING and st.state != "UNKNOWN" and not self.loops.threads:
            self._start(st)
        shown = (st.shown(), [s.verdict for s in states], states[0].ready)
        if shown != self.last_shown and self.on_change is not None:
            self.last_shown = shown
            self.on_change(rec, st, states)
        pre = read_preflight(login, rec) if self.loops.threads or st.ended else []
        stopped = [(r, p) for r, p in enumerate(pre) if p and p.get("verdict") in ("dead", "error")]
        if stopped:
            return _preflight_stopped(login, rec, states, st, pre, *stopped[0])
        if self.loops.threads:
            decided = self._decided(st)
            if decided is not None:
                return decided
        elif st.ended:
            return _ended(states, st, self.was_live)
        return self._out_of_time(st, timeout, pending_timeout)

    def _start(self, st: JobState) -> None:
        """The job runs: its nodes are known, and each node's loop starts following its log."""
        fill_nodes(self.login, self.rec, st)
        for s in self.states:
            s.host = self.rec.nodes[s.rank] if s.rank < len(self.rec.nodes) else "?"
            s.first_data = None
        self.started = time.monotonic()
        self.loops.start(self.states, self._node)

    def _decided(self, st: JobState) -> Optional[SlurmOutcome]:
        states = self.states
        self.was_live = self.was_live or all(s.verdict == "live" for s in states)
        g = decide(states)
        if g is not None and g.verdict != "live" and self.jw.state.state in BY_SLURM:
            return _ended(states, self.jw.state, self.was_live)  # the nodes stopped because Slurm ended the job
        if g is not None:
            return SlurmOutcome(g.verdict, g.exit_code, g.why, g.message, states, st, culprit=g.culprit)
        if st.ended and all(s.done for s in states):
            return _ended(states, st, self.was_live)
        return None

    def _out_of_time(self, st: JobState, timeout: Optional[float], pending_timeout: Optional[float]
                     ) -> Optional[SlurmOutcome]:
        now = time.monotonic()
        # a job Slurm never started is named as such, whichever limit ran out ([slurm]
        # pending-timeout, else the watch's own): nothing of the server ran to be judged
        waited = pending_timeout if pending_timeout is not None else timeout
        if self.started is None and waited is not None and now - self.t0 >= waited:
            return SlurmOutcome("inconclusive", 2, "pending", f"job {self.rec.job_id} still {st.shown()} after "
                                f"{waited:g}s: Slurm has not started it", self.states, st)
        if timeout is not None and now - (self.started or self.t0) >= timeout:
            return SlurmOutcome("inconclusive", 3, "timeout", timed_out(self.states), self.states, st)
        return None

    def settle(self, outcome: SlurmOutcome, keep: bool) -> SlurmOutcome:
        """What the watch saw, its timings, and the stop policy: a job that is not live is cancelled
        and confirmed gone from squeue (unless `keep`); the record keeps the verdict."""
        login, rec, states = self.login, self.rec, self.states
        if outcome.preflight is None and self.loops.threads:
            outcome.preflight = read_preflight(login, rec)
        firsts = [s.first_data for s in states]
        outcome.timings = {"to_running": None if self.started is None else round(self.started - self.t0, 3),
                           "to_first_log": round(min(f for f in firsts if f) - self.t0, 3) if any(firsts) else None,
                           "to_verdict": round(time.monotonic() - self.t0, 3)}
        if outcome.verdict != "live" and not keep:
            outcome.cancelled = queued(login, rec.job_id)
            outcome.gone = cancel(login, rec.job_id)
            if outcome.cancelled:
                rec.cancelled_at = records.now()
        else:
            outcome.gone = not queued(login, rec.job_id)
        outcome.job = self.jw.poll()
        if self.on_change is not None:
            self.on_change(rec, outcome.job, states)
        rec.verdict, rec.state = outcome.verdict, outcome.job.state
        save(login, rec)
        return outcome

    def _node(self, state: NodeState) -> None:
        """Node `state.rank`'s log, judged as it grows, until its verdict is final, the job ends or
        the watch is decided (run/watch.py's loop, with the job's state standing in for the process)."""
        from dynspec_cli.run.watch import drain, stalled
        from dynspec_cli.verdict.pipeline import Pipeline, judge_stream

        login, rec, rank, stop = self.login, self.rec, state.rank, self.loops.stop
        nrec = node_record(rec, rank)
        pipe = Pipeline.for_record(nrec, self.feature, engines.get(nrec.engine))

        def grew() -> None:
            if state.first_data is None and pipe.consumed > nrec.log_offset:
                state.first_data = time.monotonic()

        def publish(v) -> None:
            grew()
            state.seen(v, pipe)
            self.loops.note()

        def on_tick(v, quiet):
            if stop.is_set():
                state.why = "stopped"
                return v
            grew()
            if self.jw.state.ended:
                state.why = "exited"
                time.sleep(0.3)
                drain(login, nrec, pipe)
                return pipe.final(exited=True)
            if rank == 0 and not state.ready and v.verdict == "live" and pipe.decided(v) and v.server_ready and rec.addrs:
                state.health = self._health()
                if (state.health or "").endswith(" 200"):
                    state.ready = True
                    publish(v)
            # a node is stalled only once the job runs (pending time is the scheduler's, not the server's)
            if (state.first_data is not None and self.stall_timeout and not (v.verdict == "live" and pipe.decided(v))
                    and quiet >= self.stall_timeout):
                state.stalled, state.why = True, "stalled"
                return stalled(pipe, v, quiet, f"node {rank} ({rec.nodes[rank] if rank < len(rec.nodes) else '?'})")
            return None

        events = login.follow(nrec.log, nrec.log_offset)
        try:
            v, why = judge_stream(events, pipe, on_update=publish, on_tick=on_tick,
                                  decided=lambda v: v.verdict in ("dead", "crashed"), tick_every=0.5)
            state.why = state.why or why
            publish(v)
        finally:
            close = getattr(events, "close", None)
            if close is not None:
                try:
                    close()
                except Exception:  # noqa: BLE001
                    pass

    def _health(self) -> Optional[str]:
        """Node 0's readiness, asked from the login host at its NodeAddr (rank 0 serves HTTP)."""
        rec = self.rec
        try:
            res = self.login.run_python(self.login.python, HEALTH_AT, [rec.addrs[0], str(rec.port), *_readiness(rec)],
                                        timeout=30)
            return res.text.strip() or None
        except TransportError:
            return None


def _preflight_stopped(login: Host, rec: SlurmRecord, states, st: JobState, pre: list, r: int,
                       p: dict) -> SlurmOutcome:
    """Node r's preflight ended the job: dead (with the first error and its fix), or it could not
    run at all (`[slurm] dynspec` missing on the nodes: exit 127, or failing), which is no verdict."""
    where = f"node {r} ({states[r].host})"
    if p["verdict"] == "error":
        rc = p.get("exit_code")
        try:
            err = login.read_file(f"{rec.preflight_files[r]}.err").decode("utf-8", "replace").strip().splitlines()
        except (FileNotFoundError, PermissionError):
            err = []
        why = " (command not found)" if rc == 127 else (f": {err[-1].strip()}" if err else "")
        msg = (f"preflight could not run on {where}: [slurm] dynspec exited {rc}{why}; the server was not "
               f"started (set [slurm] dynspec to how the nodes run dynspec, or launch with --no-preflight)")
        return SlurmOutcome("inconclusive", 2, "preflight-failed", msg, states, st, culprit=r, preflight=pre)
    first = next((f for f in p.get("findings") or [] if f.get("severity") == "error"), None)
    msg = f"preflight on {where} is dead" + (f": {first['code']} {first['message']}" if first else "") + (
        f"; fix: {first['fix']}" if first and first.get("fix") else "") + "; the server was not started"
    return SlurmOutcome("dead", 1, "preflight", msg, states, st, culprit=r, preflight=pre)


def _requeued(login: Host, rec: SlurmRecord, states, st: JobState, was_live: bool) -> SlurmOutcome:
    """Slurm requeued the job (its restart count went up: `scontrol requeue`, a node failure,
    preemption) or a node failed under it (NODE_FAIL): named at once, with the nodes it ran on
    and those now down, instead of the servers' logs going quiet until the stall timeout."""
    down = down_nodes(login, rec.nodes)
    what = (f"NODE_FAIL ({'; '.join(down)}): " if down else "") + (
        f"Slurm requeued the job (restart {st.restarts})" if st.restarts > rec.restarts else
        f"the job ended {st.shown()}; Slurm ended it {BY_SLURM['NODE_FAIL']}")
    where = f" on {','.join(rec.nodes) or '?'}"
    rec.restarts = st.restarts
    now = f"; it is now {st.shown()}" if st.restarts and not st.ended else ""
    if was_live:
        return SlurmOutcome("live", 0, "requeued", f"every node was live; since then {what}{where}{now}", states, st)
    return SlurmOutcome("crashed", 4, "requeued", f"{what}{where} before every node was live{now}", states, st,
                        culprit=next((i for i, n in enumerate(rec.nodes) if any(d.startswith(n + " ") for d in down)),
                                     None))


def _ended(states, st: JobState, was_live: bool) -> SlurmOutcome:
    """The job ended. `was_live`: every node was live before (then a node that never serves HTTP,
    rank 1 and up, reads as exited before ready once the job ends: that is the end, not a crash)."""
    gv = group_verdict([s.verdict for s in states])
    why = f"; Slurm ended it {BY_SLURM[st.state]}" if st.state in BY_SLURM else ""
    if was_live or gv == "live":  # the verdict was reached; the job ended afterwards (as a local server that exited)
        return SlurmOutcome("live", 0, "job-ended", f"every node was live; the job has since ended {st.shown()}{why}",
                            states, st)
    if st.state == "COMPLETED":
        return SlurmOutcome(gv if gv != "live" else "inconclusive", 3 if gv != "dead" else 1, "job-ended",
                            f"the job ended {st.shown()} before the verdict", states, st)
    return SlurmOutcome("crashed" if gv != "dead" else "dead", 4 if gv != "dead" else 1, "job-ended",
                        f"the job ended {st.shown()} before every node was live{why}", states, st)
