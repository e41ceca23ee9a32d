"""Log bytes -> lines -> observations, handed to a sink (the judge, or prove's collector).
Nothing here knows what the observations are used for."""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import BinaryIO, Iterator, Protocol

from dynspec_cli.evidence.lines import lines_of
from dynspec_cli.evidence.rules import Classifier, Observation

CHUNK = 1 << 20
MAX_LINE = 1 << 20  # longer lines are cut for analysis (a server_args dump is ~10 KB)


class LogError(Exception):
    """The log cannot be read as a text log (one line, names the file)."""


class Sink(Protocol):
    def feed(self, obs: Observation) -> None: ...


@dataclass
class Feeder:
    """Splits a byte stream into lines, classifies them and hands the observations to `sink`,
    keeping line numbers and offsets. A trailing partial line is held until its newline arrives
    (or `flush`). `no` and `offset` start where the bytes start in the file (a launch watched from
    the middle of its log keeps the file's line numbers)."""

    classifier: Classifier
    sink: Sink
    no: int = 0
    offset: int = 0
    pending: bytes = b""
    numbered: bool = True  # False: line numbers unknown (huge files read in parts)

    def feed(self, data: bytes) -> None:
        buf = self.pending + data if self.pending else data
        start = 0
        find = buf.find
        while True:
            nl = find(b"\n", start)
            if nl < 0:
                break
            self._line(buf[start:nl] if nl - start <= MAX_LINE else buf[start:start + MAX_LINE], nl + 1 - start)
            start = nl + 1
        self.pending = buf[start:]
        if len(self.pending) > MAX_LINE:  # a runaway line: judge its head, skip the rest
            self._line(self.pending[:MAX_LINE], len(self.pending))
            self.pending = b""

    def flush(self) -> None:
        if self.pending:
            self._line(self.pending, len(self.pending))
            self.pending = b""

    def _line(self, raw: bytes, size: int) -> None:
        self.no += 1
        off = self.offset
        self.offset += size
        if not raw.strip():
            return
        classify, feed = self.classifier.classify, self.sink.feed
        for line in lines_of(raw, self.no if self.numbered else 0, off):
            for obs in classify(line):
                feed(obs)

    @property
    def consumed(self) -> int:
        """Bytes taken from the stream so far, the held partial line included."""
        return self.offset + len(self.pending)

    def restart(self) -> None:
        """The file was truncated or replaced: start counting again."""
        self.no, self.offset, self.pending = 0, 0, b""


def open_log(path: str) -> BinaryIO:
    if os.path.isdir(path):
        raise LogError(f"{path}: is a directory, not a log file")
    try:
        fh = open(path, "rb")
    except FileNotFoundError:
        raise LogError(f"{path}: no such file") from None
    except PermissionError:
        raise LogError(f"{path}: permission denied") from None
    except OSError as e:
        raise LogError(f"{path}: cannot open: {e.strerror}") from None
    head = fh.read(65536)
    if b"\x00" in head:
        fh.close()
        raise LogError(f"{path}: binary file (NUL bytes), not a text log")
    fh.seek(0)
    return fh


def feed_file(fh: BinaryIO, feeder: Feeder, start: int = 0) -> None:
    fh.seek(start)
    read = fh.read
    while True:
        chunk = read(CHUNK)
        if not chunk:
            break
        feeder.feed(chunk)


def iter_chunks(fh: BinaryIO, start: int = 0) -> Iterator[bytes]:
    fh.seek(start)
    while True:
        chunk = fh.read(CHUNK)
        if not chunk:
            return
        yield chunk
