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
    the middle of its log keeps the file's line numbers). NUL bytes carry nothing and are dropped
    from the lines (the hole a `nohup ... > LOG` log gets when it is emptied while the server goes
    on writing, a block zeroed by a crash); offsets still count them."""

    classifier: Classifier
    sink: Sink
    no: int = 0
    offset: int = 0
    pending: bytes = b""
    numbered: bool = True  # False: line numbers unknown (huge files read in parts)
    nuls: int = 0  # NUL bytes dropped from the line being assembled
    text_lines: int = 0  # lines with more than blanks: an empty log and a log of another program differ

    def feed(self, data: bytes) -> None:
        if b"\x00" in data:
            parts = data.split(b"\n")
            for i, part in enumerate(parts):  # one newline at a time: each line's NULs are its own
                kept = part.replace(b"\x00", b"")
                self.nuls += len(part) - len(kept)
                self._feed(kept if i == len(parts) - 1 else kept + b"\n")
        else:
            self._feed(data)

    def _feed(self, data: bytes) -> None:
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
        self.offset += size + self.nuls
        self.nuls = 0
        if not raw.strip():
            return
        self.text_lines += 1
        classify, feed = self.classifier.classify, self.sink.feed
        for line in lines_of(raw, self.no if self.numbered else 0, off):
            for obs in classify(line):
                feed(obs)

    @property
    def consumed(self) -> int:
        """Bytes taken from the stream so far, the held partial line included."""
        return self.offset + len(self.pending) + self.nuls

    def skip_to(self, offset: int) -> None:
        """Drop the partial line; the next byte fed is the file's `offset`."""
        self.offset, self.pending, self.nuls = offset, b"", 0

    def restart(self) -> None:
        """The file was truncated or replaced: start counting again."""
        self.no = 0
        self.skip_to(0)


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
    if _binary(fh):
        fh.close()
        raise LogError(f"{path}: binary file, not a text log")
    fh.seek(0)
    return fh


_TEXT = bytes([7, 8, 9, 10, 11, 12, 13, 27, *range(0x20, 0x7f), *range(0x80, 0x100)])


def _binary(fh: BinaryIO) -> bool:
    """NUL bytes alone do not make a log binary (a hole where it was emptied while written): the
    first 64 KiB of what is not NUL (within 64 MiB) are, unless more than 1% are control bytes."""
    head = fh.read(65536)
    if b"\x00" not in head:
        return False
    text = head.replace(b"\x00", b"")
    read = len(head)
    while len(text) < 65536 and read < 64 << 20:
        chunk = fh.read(1 << 20)
        if not chunk:
            break
        read += len(chunk)
        text += chunk.replace(b"\x00", b"")
    text = text[:65536]
    return len(text.translate(None, _TEXT)) > max(8, len(text) // 100)


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
