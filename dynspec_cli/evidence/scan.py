"""Log bytes -> lines -> observations, handed to a sink (the judge, or prove's collector).
Nothing here knows what the observations are used for."""
from __future__ import annotations

import os
import select
import stat
import threading
from typing import BinaryIO, Optional, Protocol

import msgspec

from dynspec_cli.evidence.lines import Line, lines_of
from dynspec_cli.evidence.observation import Observation

CHUNK = 1 << 20
MAX_LINE = 1 << 20  # longer lines are cut for analysis (a server_args dump is ~10 KB)


class LogError(Exception):
    """The log cannot be read as a text log (one line, names the file)."""


class Sink(Protocol):
    def feed(self, obs: Observation) -> None: ...


class Classifier(Protocol):  # an engine's rules (engines/protocol.py Classifier)
    def classify(self, line: Line) -> list[Observation]: ...


class Feeder(msgspec.Struct, dict=True):
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
    """A log file on this machine, opened to be read (and seeked) as a file; LogError (one line)
    when it is not one: `open_stream` takes `-`, pipes, FIFOs and terminals."""
    if os.path.isdir(path):
        raise LogError(f"{path}: is a directory, not a log file")
    try:
        st = os.stat(path)
        if not stat.S_ISREG(st.st_mode):
            raise LogError(f"{path}: {_kind(st.st_mode)}, not a log file")
        fh = open(path, "rb")
    except FileNotFoundError:
        raise LogError(f"{path}: no such file") from None
    except PermissionError:
        raise LogError(f"{path}: permission denied") from None
    except OSError as e:
        raise LogError(f"{path}: cannot open: {e.strerror}") from None
    check = TextCheck()
    while not check.done and (data := fh.read(1 << 16 if check.read == 0 else 1 << 20)):
        check.feed(data)
    if check.binary:
        fh.close()
        raise LogError(f"{path}: binary file, not a text log")
    fh.seek(0)
    return fh


_TEXT = bytes([7, 8, 9, 10, 11, 12, 13, 27, *range(0x20, 0x7f), *range(0x80, 0x100)])


class TextCheck:
    """Is it text? NUL bytes alone do not say no (the hole of a log emptied while it was written): the
    first 64 KiB that are not NUL (within 64 MiB) do, when beside NULs more than 1% are control bytes.
    Fed as the bytes are read, so a stream is judged as it comes."""

    SAMPLE, WITHIN = 1 << 16, 64 << 20

    def __init__(self) -> None:
        self.read = self.text = self.control = 0
        self.nul = False

    @property
    def done(self) -> bool:
        return self.text >= self.SAMPLE or self.read >= self.WITHIN

    @property
    def binary(self) -> bool:
        return self.nul and self.control > max(8, self.text // 100)

    def feed(self, data: bytes) -> None:
        if self.done:
            return
        self.read += len(data)
        if b"\x00" in data:
            self.nul = True
            data = data.replace(b"\x00", b"")
        data = data[: self.SAMPLE - self.text]
        self.text += len(data)
        self.control += len(data.translate(None, _TEXT))


WRITER_WAIT = 5.0  # seconds a FIFO may wait for its writer


class Stream:
    """A log read once, as it comes: standard input (`-`), a pipe (`<(cmd)`, /dev/stdin), a FIFO, a
    terminal. Never seeked or held whole; `peek` reads ahead (the engine's first lines), `read`
    hands that out first."""

    def __init__(self, name: str, fd: int) -> None:
        self.name, self.fd = name, fd
        self.ahead = b""
        self.check = TextCheck()

    def seekable(self) -> bool:
        return False

    @property
    def tty(self) -> bool:
        return os.isatty(self.fd)

    def peek(self, wait: Optional[float] = None) -> bytes:
        """The first bytes (read once, handed out again by `read`); `wait`: give up after that
        many seconds without any (b"")."""
        if not self.ahead and (wait is None or select.select([self.fd], [], [], wait)[0]):
            self.ahead = self._read(CHUNK)
        return self.ahead

    def read(self, n: int = CHUNK) -> bytes:
        if self.ahead:
            data, self.ahead = self.ahead, b""
            return data
        return self._read(n)

    def _read(self, n: int) -> bytes:
        try:
            data = os.read(self.fd, n)
        except OSError as e:
            raise LogError(f"{self.name}: cannot read: {e.strerror}") from None
        self.check.feed(data)
        if self.check.binary:
            raise LogError(f"{self.name}: binary data, not text")
        return data

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __enter__(self) -> "Stream":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def open_stream(path: str, *, writer_wait: float = WRITER_WAIT, what: str = "a log") -> Optional[Stream]:
    """`-`, a pipe, a FIFO or a terminal as a Stream; None for a path to be read as a file (a
    regular file, or what `open_log` will refuse: nothing there, a directory); LogError for any
    other file (a device, a socket) and for a FIFO nobody opens for writing within `writer_wait` s."""
    if path == "-":
        try:
            fd = os.dup(0)
        except OSError:
            raise LogError("standard input is closed") from None
        mode = os.fstat(fd).st_mode
        if stat.S_ISREG(mode) or stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or os.isatty(fd):
            return Stream("standard input", fd)
        os.close(fd)
        raise LogError(f"standard input is {_kind(mode)}, not {what}")
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return None
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        return None
    if stat.S_ISFIFO(mode):
        return Stream(path, _open_fifo(path, writer_wait))
    if stat.S_ISCHR(mode):
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOCTTY | os.O_NONBLOCK)
        except OSError as e:
            raise LogError(f"{path}: cannot open: {e.strerror}") from None
        if os.isatty(fd):
            os.set_blocking(fd, True)
            return Stream(path, fd)
        os.close(fd)
    raise LogError(f"{path}: {_kind(mode)}, not {what} file")


def _open_fifo(path: str, wait: float) -> int:
    """Open a FIFO for reading, waiting at most `wait` s for a writer (open(2) blocks until one)."""
    got: list = []

    def opener() -> None:
        try:
            got.append(os.open(path, os.O_RDONLY))
        except OSError as e:
            got.append(e)

    t = threading.Thread(target=opener, daemon=True, name="dynspec-fifo")
    t.start()
    t.join(wait)
    if not got:
        try:  # be the writer ourselves, so the blocked open returns and nothing is left behind
            os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
        except OSError:
            pass
        t.join(1.0)
        if got and isinstance(got[0], int):
            os.close(got[0])
        raise LogError(f"{path}: a FIFO that nothing writes to (no writer opened it within {wait:g} s)")
    if isinstance(got[0], OSError):
        raise LogError(f"{path}: cannot open: {got[0].strerror}")
    return got[0]


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISSOCK, "a socket"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISDIR, "a directory")):
        if test(mode):
            return name
    return "a special file"


def feed_stream(src, feeder: Feeder) -> None:
    """Feed a Stream to its end (bounded memory: only the partial line is held)."""
    while True:
        chunk = src.read(CHUNK)
        if not chunk:
            return
        feeder.feed(chunk)


def feed_file(fh: BinaryIO, feeder: Feeder, start: int = 0) -> None:
    fh.seek(start)
    read = fh.read
    while True:
        chunk = read(CHUNK)
        if not chunk:
            break
        feeder.feed(chunk)
