"""Judging the newest launch of a huge log without reading all of it.

A launch's verdict is decided by its start-up (argument checks, worker start, marker, ready)
and its end (a crash). So: find the newest launch by searching backwards for its
`server_args=` line (one byte search, no line splitting), parse its start-up until the server
is in steady state, then parse the file's tail. Line numbers are not counted here (that would
mean reading everything); evidence carries byte offsets instead."""
from __future__ import annotations

from typing import BinaryIO

from dynspec_cli.evidence.scan import Feeder, feed_file
from dynspec_cli.verdict.judge import Verdict

BIG = 256 << 20  # smaller files are simply read whole
BACK = 8 << 20  # backward search step
LOOKBEHIND = 256 << 10  # the launcher's warnings come just before its server_args= line
TAIL = 128 << 10  # a crash's traceback is at the very end
HEAD_MAX = 32 << 20
HEAD_CHUNK = 64 << 10  # small steps, so parsing stops soon after steady state
STEADY_DECODE_LINES = 200
NEEDLE = b"server_args="


def rfind_in_file(fh: BinaryIO, size: int, needle: bytes) -> int:
    buf = bytearray(BACK + len(needle))
    end = size
    while end > 0:
        start = max(0, end - BACK)
        fh.seek(start)
        n = fh.readinto(memoryview(buf)[: end - start + (len(needle) if end < size else 0)])
        pos = buf.rfind(needle, 0, n) if n else -1  # searched in place: no copy of the chunk
        if pos >= 0:
            return start + pos
        end = start
    return -1


def _line_start_after(fh: BinaryIO, offset: int) -> int:
    if offset <= 0:
        return 0
    fh.seek(offset - 1)
    data = fh.read(1 << 20)
    nl = data.find(b"\n")
    return offset + nl if nl >= 0 else offset - 1 + len(data)


def judge_big_file(fh: BinaryIO, size: int, feeder: Feeder) -> Verdict:
    dump = rfind_in_file(fh, size, NEEDLE)
    if dump < 0:  # no launch boundary to jump to: read it all
        feed_file(fh, feeder)
        feeder.flush()
        return feeder.judge.verdict(at_eof=True)
    feeder.numbered = False
    start = _line_start_after(fh, max(0, dump - LOOKBEHIND))
    feeder.offset = start
    fh.seek(start)
    judge = feeder.judge
    head_end = min(size - TAIL, start + HEAD_MAX)
    pos = start
    while pos < head_end:
        chunk = fh.read(min(HEAD_CHUNK, size - pos))
        if not chunk:
            break
        feeder.feed(chunk)
        pos += len(chunk)
        la = judge.launches[-1] if judge.launches else None
        if la is not None and la.ready is not None and la.decode_lines >= STEADY_DECODE_LINES:
            break
    tail = _line_start_after(fh, max(pos, size - TAIL))
    if tail > pos:
        feeder.pending = b""
        feeder.offset = tail
        judge.skipped_bytes = tail - pos
    feed_file(fh, feeder, start=feeder.offset + len(feeder.pending))
    feeder.flush()
    v = judge.verdict(at_eof=True)
    v.launch["partial_read"] = True
    v.launch["skipped_bytes"] = getattr(judge, "skipped_bytes", 0)
    return v
