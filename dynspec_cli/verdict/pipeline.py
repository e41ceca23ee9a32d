"""The one judging pipeline: bytes -> lines -> observations -> judge -> verdict.

Every caller judges a log through here: `verify` (a whole file, or a growing one), launch and
watch (a stream of follow events from any host), group (one stream per node), prove (a slice
read now) and the tests. Three entry points, one per shape of input, each given the engine
(engines/protocol.py: its classifier and its judge; the caller asks the registry for it):

    judge_bytes(data, feature, engine=e)                    # bytes already in memory
    judge_file(path, feature, engine=e)                     # a file on this machine (huge ones read in
                                                            # parts), or a Stream (stdin, a pipe) to its end
    judge_stream(events, Pipeline(feature, engine=e), ...)  # a growing log: stops once the verdict is decided
"""
from __future__ import annotations

import os
import threading
import time
from typing import BinaryIO, Callable, Iterable, Optional

from dynspec_cli.evidence import bigfile
from dynspec_cli.evidence.scan import Feeder, LogError, Stream, feed_file, feed_stream, open_log
from dynspec_cli.knowledge.features import Feature
from dynspec_cli.verdict.result import Verdict

Tick = Callable[[Verdict, float], Optional[Verdict]]


def record_diff(rec) -> Optional[dict]:
    """The run's diff as its launch's preflight judged each hunk (None: the run was given no diff)."""
    hunks = (getattr(rec, "patch", None) or {}).get("hunks")
    return {"hunks": hunks} if hunks else None


class Pipeline:
    """One log's judging state. `line_base`/`offset`: where the bytes fed start in the file, so
    the evidence of a launch watched from the middle of its log carries the file's line numbers
    (the same numbers `dynspec verify` prints for that file)."""

    def __init__(self, feature: Feature, patched: Optional[list[str]] = None, version: Optional[str] = None, *,
                 engine, line_base: int = 0, offset: int = 0, diff: Optional[dict] = None) -> None:
        self.feature = feature
        self.engine = engine  # its classifier and judge (engines/protocol.py Engine)
        self.judge = engine.judge(feature, patched, version, diff=diff)
        self.feeder = Feeder(engine.classifier(feature), self.judge, no=line_base, offset=offset)

    @classmethod
    def for_record(cls, rec, feature: Feature, engine, *, from_start: bool = True) -> "Pipeline":
        """For a run record's launch (its log from the launch's first byte), by `engine`, the record's."""
        return cls(feature, rec.patched_class or None, rec.sglang_version,
                   line_base=getattr(rec, "log_line_base", 0) or 0, offset=rec.log_offset if from_start else 0,
                   engine=engine, diff=record_diff(rec))

    # --- bytes in -------------------------------------------------------------------------
    def feed(self, data: bytes) -> None:
        self.feeder.feed(data)

    def flush(self) -> None:
        self.feeder.flush()

    def restart(self) -> None:
        self.feeder.restart()

    @property
    def consumed(self) -> int:
        """The file offset up to which bytes were fed (held partial line included)."""
        return self.feeder.consumed

    # --- verdicts out ---------------------------------------------------------------------
    def verdict(self, *, at_eof: bool = True, quiet_for: float = 0.0) -> Verdict:
        return self.judge.verdict(at_eof=at_eof, quiet_for=quiet_for, text_lines=self.feeder.text_lines)

    def decided(self, v: Verdict) -> bool:
        return self.judge.decided(v)

    def final(self, *, exited: bool = False) -> Verdict:
        """The verdict once no more bytes will come (the file is complete or the process is
        gone). `exited`: the server process is gone, so a launch that never became ready
        crashed, whatever the log says."""
        self.flush()
        v = self.verdict(at_eof=True)
        if exited and v.verdict in ("inconclusive", "live") and not v.server_ready:
            v = self.judge.exited(v)
        return v

    @property
    def last_line(self):
        la = self.judge.launches[-1] if self.judge.launches else None
        return la.last_line if la else None


def judge_bytes(data: bytes, feature: Feature, patched: Optional[list[str]] = None,
                version: Optional[str] = None, *, engine) -> Verdict:
    p = Pipeline(feature, patched, version, engine=engine)
    p.feed(data)
    return p.final()


def judge_file(path: str, feature: Feature, patched: Optional[list[str]] = None,
               version: Optional[str] = None, *, engine, source: Optional[Stream] = None,
               diff: Optional[dict] = None) -> Verdict:
    """A complete log file, or `source` (a Stream) to its end; LogError (one line) when it is not a
    readable text log."""
    if source is not None:
        with source:
            p = Pipeline(feature, patched, version, engine=engine, diff=diff)
            feed_stream(source, p.feeder)
            return p.final()
    with open_log(path) as fh:
        fh.seek(0, 2)
        size = fh.tell()
        p = Pipeline(feature, patched, version, engine=engine, diff=diff)
        if size >= bigfile.BIG:
            return _judge_big_file(fh, size, p)
        feed_file(fh, p.feeder)
        return p.final()


def judge_growing(path: str, feature: Feature, patched: Optional[list[str]] = None, version: Optional[str] = None,
                  *, timeout: Optional[float], on_update: Callable[[Verdict], None] | None = None,
                  events=None, engine, source: Optional[Stream] = None, diff: Optional[dict] = None) -> Verdict:
    """A file on this machine as it grows: returns as soon as the verdict is decided (or at
    `timeout`). A file not there yet is waited for (as tail -F), within `timeout`: the shell that
    runs `nohup sglang ... > LOG &` may not have created it yet. `events` replaces following the
    file with any Event iterator; `source` (a Stream) is read as it comes, to its end."""
    if source is not None:
        events = _stream_events(source)
    absent = events is None and not os.path.exists(path)
    if events is None:
        if not absent:
            open_log(path).close()  # bad input fails now, with exit 2
        elif not os.path.isdir(os.path.dirname(path) or "."):
            raise LogError(f"{path}: no such file (its directory does not exist either)")
        from dynspec_cli.transport.local import LocalHost

        events = LocalHost().follow(path, 0)
    verdict, why = judge_stream(events, Pipeline(feature, patched, version, engine=engine, diff=diff), timeout=timeout,
                                on_update=on_update)
    if absent and why == "timeout" and not os.path.exists(path):
        raise LogError(f"{path}: no such file (waited {timeout:g}s for it to appear)")
    return verdict


def judge_stream(events: Iterable, pipeline: Pipeline, *, timeout: Optional[float] = None,
                 on_update: Callable[[Verdict], None] | None = None,
                 on_tick: Tick | None = None, tick_every: float = 1.0,
                 decided: Callable[[Verdict], bool] | None = None) -> tuple[Verdict, str]:
    """Feed follow `events` (from any host) until the verdict is decided. Returns (verdict, why)
    where why is "decided", "timeout", "ended" (the event stream ended) or "tick" (on_tick
    decided). `on_tick(verdict, quiet_seconds)` runs about every `tick_every` s (liveness checks
    etc.); returning a verdict ends the loop with it."""
    import queue  # (here: `verify` of a whole file never follows)

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
    verdict = pipeline.verdict(at_eof=False)
    is_decided = decided or pipeline.decided
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
                return pipeline.final(), "ended"
            if ev != "tick":
                _apply(ev, pipeline)
                if ev.kind == "data":
                    last_data = time.monotonic()
                while not q.empty():  # take what is already here before judging again
                    nxt = q.queue[0]
                    if isinstance(nxt, BaseException) or nxt is None:
                        break
                    _apply(q.get(), pipeline)
            quiet = time.monotonic() - last_data  # a partial line waits for its newline or the end (as tail -F)
            verdict = pipeline.verdict(at_eof=False, quiet_for=quiet)
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


def _stream_events(source: Stream):
    from dynspec_cli.transport.follow import Event

    offset = 0
    with source:
        while True:
            data = source.read()
            if not data:
                return
            yield Event("data", offset, data)
            offset += len(data)


def _apply(ev, pipeline: Pipeline) -> None:
    if ev.kind == "data":
        pipeline.feed(ev.data)
    elif ev.kind in ("truncated", "rotated", "gap"):
        pipeline.restart()


def _judge_big_file(fh: BinaryIO, size: int, p: Pipeline) -> Verdict:
    """The newest launch of a huge log: its start-up until steady state, then the file's tail
    (evidence/bigfile.py says where); line numbers are not counted, offsets are."""
    feeder, judge = p.feeder, p.judge
    needle = p.engine.launch_boundary
    dump = bigfile.rfind_in_file(fh, size, needle) if needle else -1
    if dump < 0:  # no launch boundary to jump to: read it all
        feed_file(fh, feeder)
        return p.final()
    feeder.numbered = False
    start = bigfile.line_start_after(fh, max(0, dump - bigfile.LOOKBEHIND))
    feeder.offset = start
    fh.seek(start)
    head_end = min(size - bigfile.TAIL, start + bigfile.HEAD_MAX)
    pos = start
    while pos < head_end:
        chunk = fh.read(min(bigfile.HEAD_CHUNK, size - pos))
        if not chunk:
            break
        feeder.feed(chunk)
        pos += len(chunk)
        la = judge.launches[-1] if judge.launches else None
        if la is not None and la.steady(bigfile.STEADY_DECODE_LINES):
            break
    tail = bigfile.line_start_after(fh, max(pos, size - bigfile.TAIL))
    skipped = 0
    if tail > pos:
        feeder.skip_to(tail)
        skipped = tail - pos
    feed_file(fh, feeder, start=feeder.consumed)
    v = p.final()
    v.launch["partial_read"] = True
    v.launch["skipped_bytes"] = skipped
    return v
