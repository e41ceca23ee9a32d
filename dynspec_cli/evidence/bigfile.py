"""Where to read in a huge log, without reading all of it (verdict/pipeline.py does the reading).

A launch's verdict is decided by its start-up (argument checks, worker start, marker, ready)
and its end (a crash). So: find the newest launch by searching backwards for the literal every
launch writes once (the engine's `launch_boundary`: sglang's `server_args=` dump; one byte search,
no line splitting), parse its start-up until the server is in steady state, then parse the file's
tail. Line numbers are not counted here (that would
mean reading everything); evidence carries byte offsets instead."""
from __future__ import annotations

from typing import BinaryIO

BIG = 256 << 20  # smaller files are simply read whole
BACK = 8 << 20  # backward search step
LOOKBEHIND = 256 << 10  # the launcher's warnings come just before its boundary line
TAIL = 128 << 10  # a crash's traceback is at the very end
HEAD_MAX = 32 << 20
HEAD_CHUNK = 64 << 10  # small steps, so parsing stops soon after steady state
STEADY_DECODE_LINES = 200


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


def line_start_after(fh: BinaryIO, offset: int) -> int:
    if offset <= 0:
        return 0
    fh.seek(offset - 1)
    data = fh.read(1 << 20)
    nl = data.find(b"\n")
    return offset + nl if nl >= 0 else offset - 1 + len(data)
