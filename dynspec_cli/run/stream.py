"""The one loop that judges a growing log: events in (from any host's follow), verdicts out,
and a stop as soon as the verdict is decided. `verify --follow`, `launch`, `watch` and the
demo all run it."""
from __future__ import annotations

import queue
import threading
import time
from typing import Callable, Iterable, Optional

from dynspec_cli.evidence.scan import Feeder
from dynspec_cli.verdict.judge import Verdict

Tick = Callable[[Verdict, float], Optional[Verdict]]


def judge_stream(events: Iterable, feeder: Feeder, *, timeout: Optional[float] = None,
                 on_update: Callable[[Verdict], None] | None = None,
                 on_tick: Tick | None = None, tick_every: float = 1.0,
                 decided: Callable[[Verdict], bool] | None = None) -> tuple[Verdict, str]:
    """Feed `events` to `feeder` until the verdict is decided. Returns (verdict, why) where why
    is "decided", "timeout", "ended" (the event stream ended) or "tick" (on_tick decided).
    `on_tick(verdict, quiet_seconds)` runs about every `tick_every` s (liveness checks etc.);
    returning a verdict ends the loop with it."""
    judge = feeder.judge
    q: "queue.Queue" = queue.Queue(maxsize=4096)
    stop = threading.Event()

    def pump() -> None:
        try:
            for ev in events:
                if stop.is_set():
                    break
                q.put(ev)
        except BaseException as e:  # re-raised in the caller's thread
            q.put(e)
        finally:
            q.put(None)

    threading.Thread(target=pump, daemon=True, name="dynspec-follow").start()
    deadline = time.monotonic() + timeout if timeout else None
    last_data = time.monotonic()
    next_tick = time.monotonic() + tick_every
    verdict = judge.verdict(at_eof=False)
    is_decided = decided or (lambda v: judge.decided(v))
    try:
        while True:
            now = time.monotonic()
            wait = min(0.25, max(0.0, next_tick - now))
            if deadline is not None:
                wait = max(0.0, min(wait, deadline - now))
            try:
                ev = q.get(timeout=wait)
            except queue.Empty:
                ev = "tick"
            if isinstance(ev, BaseException):
                raise ev
            if ev is None:
                feeder.flush()
                return judge.verdict(at_eof=True), "ended"
            if ev != "tick":
                _apply(ev, feeder)
                if ev.kind == "data":
                    last_data = time.monotonic()
                while not q.empty():  # take what is already here before judging again
                    nxt = q.queue[0]
                    if isinstance(nxt, BaseException) or nxt is None:
                        break
                    _apply(q.get(), feeder)
            quiet = time.monotonic() - last_data
            if feeder.pending and quiet >= 0.5:
                feeder.flush()  # a last line without its newline, written a while ago
            verdict = judge.verdict(at_eof=False, quiet_for=quiet)
            if on_update is not None:
                on_update(verdict)
            if is_decided(verdict):
                return verdict, "decided"
            if time.monotonic() >= next_tick:
                next_tick = time.monotonic() + tick_every  # (always advanced: an idle loop must sleep)
                final = on_tick(verdict, quiet) if on_tick is not None else None
                if final is not None:
                    return final, "tick"
            if deadline is not None and time.monotonic() >= deadline:
                return verdict, "timeout"
    finally:
        stop.set()


def _apply(ev, feeder: Feeder) -> None:
    if ev.kind == "data":
        feeder.feed(ev.data)
    elif ev.kind in ("truncated", "rotated", "gap"):
        feeder.restart()
