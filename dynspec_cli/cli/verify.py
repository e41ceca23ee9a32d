"""`dynspec verify LOG`: the verdict from a log file, once or while it grows."""
from __future__ import annotations

import queue
import threading
import time
from typing import Callable, Optional

from dynspec_cli.evidence.rules import Classifier
from dynspec_cli.evidence.scan import Feeder, feed_file, open_log
from dynspec_cli.knowledge.features import Feature
from dynspec_cli.knowledge.sglang import knowledge
from dynspec_cli.verdict.judge import Judge, Verdict


def make_feeder(feature: Feature, patched: list[str] | None, version: str | None) -> Feeder:
    k = knowledge()
    return Feeder(Classifier(k, feature), Judge(k, feature, patched_classes=patched, sglang_version=version))


def verify_file(path: str, feature: Feature, patched: list[str] | None, version: str | None) -> Verdict:
    from dynspec_cli.evidence.bigfile import judge_big_file, BIG

    with open_log(path) as fh:
        fh.seek(0, 2)
        size = fh.tell()
        if size >= BIG:
            return judge_big_file(fh, size, make_feeder(feature, patched, version))
        feeder = make_feeder(feature, patched, version)
        feed_file(fh, feeder)
        feeder.flush()
        return feeder.judge.verdict(at_eof=True)


def follow_file(path: str, feature: Feature, patched: list[str] | None, version: str | None, *,
                timeout: Optional[float], on_update: Callable[[Verdict], None] | None = None,
                events=None) -> Verdict:
    """Judge `path` as it grows; return as soon as the verdict is decided (or at `timeout`).
    `events` (for tests and the demo) replaces following the file with any Event iterator."""
    feeder = make_feeder(feature, patched, version)
    judge = feeder.judge
    if events is None:
        open_log(path).close()  # bad input fails now, with exit 2
        from dynspec_cli.transport.local import LocalHost

        events = LocalHost().follow(path, 0)
    q: "queue.Queue" = queue.Queue(maxsize=1024)
    stop = threading.Event()

    def pump() -> None:
        try:
            for ev in events:
                if stop.is_set():
                    break
                q.put(ev)
        except BaseException as e:  # reported by the main loop
            q.put(e)
        finally:
            q.put(None)

    threading.Thread(target=pump, daemon=True, name="dynspec-follow").start()
    deadline = time.monotonic() + timeout if timeout else None
    last_data = time.monotonic()
    verdict = judge.verdict(at_eof=False)
    try:
        while True:
            wait = 0.25 if deadline is None else max(0.0, min(0.25, deadline - time.monotonic()))
            try:
                ev = q.get(timeout=wait)
            except queue.Empty:
                ev = "tick"
            if isinstance(ev, BaseException):
                raise ev
            if ev is None:
                feeder.flush()
                return judge.verdict(at_eof=True)
            if ev != "tick":
                if ev.kind == "data":
                    feeder.feed(ev.data)
                    last_data = time.monotonic()
                    while not q.empty():  # drain what is already here before judging
                        nxt = q.queue[0]
                        if isinstance(nxt, BaseException) or nxt is None or nxt.kind != "data":
                            break
                        feeder.feed(q.get().data)
                elif ev.kind in ("truncated", "rotated", "gap"):
                    feeder.restart()
            quiet = time.monotonic() - last_data
            if feeder.pending and quiet >= 0.5:
                feeder.flush()  # a last line without newline, written a while ago: judge it
            verdict = judge.verdict(at_eof=False, quiet_for=quiet)
            if on_update is not None:
                on_update(verdict)
            if judge.decided(verdict, quiet_for=quiet):
                return verdict
            if deadline is not None and time.monotonic() >= deadline:
                return verdict
    finally:
        stop.set()
        close = getattr(events, "close", None)
        if close is not None:
            try:
                close()
            except Exception:
                pass
