"""Watching a run: its log judged as it grows (verdict/pipeline.py), beside the two facts only
the host can tell, whether the server's process group is still alive and whether it answers a
real generation. One loop for a single run and for every node of a group; what to do with the
outcome (stop, keep, wait for the other nodes) is the caller's policy."""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Callable, Optional

from dynspec_cli.knowledge.features import Feature
from dynspec_cli.run import control, records
from dynspec_cli.run.records import RunRecord
from dynspec_cli.transport import Host, TransportError
from dynspec_cli import engines
from dynspec_cli.verdict.result import Verdict
from dynspec_cli.verdict.pipeline import Pipeline, judge_stream

PHASE_WORDS = {"args": "argument resolution", "distributed": "distributed init", "weights": "weight loading",
               "kv-cache": "KV-cache allocation", "cuda-graph": "CUDA graph capture", "draft": "draft model loading",
               "ready": "readiness", "serving": "serving"}

LIVE = ("live", "ineffective")  # the patched code runs (ineffective: accepting nothing; its own exit code)


@dataclass
class Watched:
    """What one watch saw; filled in while it runs (a group's display reads it from another thread)."""

    verdict: Optional[Verdict] = None
    why: str = ""  # decided | ready | exited | timeout | stalled | stopped | ended
    ready: bool = False  # the engine's readiness path answered 200 (Serving.readiness)
    health: Optional[str] = None
    stalled: bool = False
    pipeline: Optional[Pipeline] = field(default=None, repr=False)


@dataclass
class Outcome:
    verdict: Verdict
    why: str  # decided | ready | exited | timeout | interrupted | ended
    stopped: bool  # dynspec stopped the server
    record: RunRecord
    health: Optional[str] = None
    kept: bool = False  # --keep: the server was left running although the verdict is dead or crashed


def follow_run(host: Host, rec: RunRecord, feature: Feature, *, timeout: Optional[float] = None,
               need_ready: bool = True, end_on_live: bool = True, stall_timeout: Optional[float] = None,
               stop: Optional[threading.Event] = None, on_update: Callable[[Verdict], None] | None = None,
               on_change: Callable[[], None] | None = None, tick_every: float = 1.0,
               state: Optional[Watched] = None, where: Optional[str] = None) -> Watched:
    """Judge the run's log from its launch's first byte until the verdict is decided (dead or
    crashed), the server is live (and ready, if `need_ready`) when `end_on_live`, the process
    group is gone, the log makes no progress for `stall_timeout` s before live, `stop` is set,
    or `timeout`."""
    w = state or Watched()
    pipe = Pipeline.for_record(rec, feature, engines.get(rec.engine))
    w.pipeline = pipe

    def publish(v: Verdict) -> None:
        w.verdict = v
        if on_update is not None:
            on_update(v)
        if on_change is not None:
            on_change()

    def live(v: Verdict) -> bool:
        return v.verdict in LIVE and pipe.decided(v) and (w.ready or not need_ready)

    def on_tick(v: Verdict, quiet: float) -> Optional[Verdict]:
        if stop is not None and stop.is_set():
            w.why = "stopped"
            return v
        try:
            alive = host.group_alive(rec.pgid)
        except TransportError:
            return None  # the connection is being re-established; the follower resumes
        if not alive:
            w.why = "exited"
            time.sleep(0.3)  # let the last lines land in the log
            drain(host, rec, pipe)
            return pipe.final(exited=True)
        if need_ready and not w.ready and v.verdict in LIVE and pipe.decided(v) and v.server_ready:
            try:
                ok, text = control.health(host, rec.python, rec.port, engines.get(rec.engine).serving.readiness)
            except TransportError:
                ok, text = False, None
            w.health = text
            if ok:
                w.ready = True
                publish(v)
        if end_on_live and live(v):
            w.why = "ready" if need_ready else "decided"
            return v
        if stall_timeout is not None and not live(v) and quiet >= stall_timeout:
            w.stalled, w.why = True, "stalled"
            return stalled(pipe, v, quiet, where or host.name)
        return None

    events = host.follow(rec.log, rec.log_offset)
    try:
        v, why = judge_stream(events, pipe, timeout=timeout, on_update=publish, on_tick=on_tick,
                              decided=lambda v: v.verdict in ("dead", "crashed"), tick_every=tick_every)
    finally:
        close = getattr(events, "close", None)
        if close is not None:
            try:
                close()
            except Exception:  # noqa: BLE001 - the follower is gone with the connection
                pass
    w.why = w.why if why == "tick" else why
    publish(v)
    return w


def drain(host: Host, rec: RunRecord, pipe: Pipeline) -> None:
    """Feed whatever the log holds beyond what the follower delivered (the process just exited)."""
    try:
        data = host.read_file(rec.log, pipe.consumed)
    except (FileNotFoundError, PermissionError):
        data = b""
    if data:
        pipe.feed(data)
    pipe.flush()


def stalled(pipe: Pipeline, v: Verdict, quiet: float, where: str) -> Verdict:
    phase = (v.launch or {}).get("phase") or "args"
    msg = f"stalled in {PHASE_WORDS.get(phase, phase)} on {where}: no log progress for {quiet:.0f}s"
    return v.died("Stalled", msg, pipe.last_line, msg)


def watch(host: Host, rec: RunRecord, feature: Feature, *, timeout: Optional[float], keep: bool,
          on_update: Callable[[Verdict], None] | None = None) -> Outcome:
    """One run to its verdict, then the stop policy: a dead or crashed server is stopped unless
    `keep`; a live one keeps running. Once the server is gone the log is judged to its end, so
    the report equals `dynspec verify` on the same file."""
    w = follow_run(host, rec, feature, timeout=timeout, on_update=on_update)
    verdict, stopped, kept = w.verdict, False, False
    if verdict.verdict in ("dead", "crashed"):
        if keep:
            kept = host.group_alive(rec.pgid)
        elif host.group_alive(rec.pgid):
            stopped = control.stop(host, rec)
        if stopped or w.why == "exited":
            drain(host, rec, w.pipeline)
            final = w.pipeline.final(exited=w.why == "exited")
            if final.verdict in ("dead", "crashed"):
                verdict = final
    rec.verdict = verdict.verdict
    records.save(host, rec)
    return Outcome(verdict, w.why, stopped, rec, w.health, kept)
