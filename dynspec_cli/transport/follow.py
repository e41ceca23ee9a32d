"""Following a file on a host: the reader side of `dynspec_cli/inject/follower.py`.

The follower (one implementation of the follow semantics, the same on every host) runs with the
host's python via `Host._start`; here we parse its framed records into `Event`s and keep the stream
going: when the connection or the follower dies (EOF, or no record for 3 heartbeats + 1 s) we
reconnect with bounded backoff and start a new follower at the last delivered offset of the same
inode, so no byte is lost or delivered twice. If another file is at the path by then, the follower
says so (`gap`) instead of mixing files.
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Iterator, Literal

from dynspec_cli.transport import shell
from dynspec_cli.transport.errors import ConnectError, FollowError, HostKeyError, AuthFailed, TransportError

if TYPE_CHECKING:
    from dynspec_cli.transport.host import Host, Process

FOLLOWER = Path(__file__).resolve().parent.parent / "inject" / "follower.py"

EventKind = Literal["data", "truncated", "rotated", "missing", "reconnected", "gap"]


@dataclass(frozen=True)
class Event:
    """One thing that happened to the followed path.

    data         `data` are the bytes at [offset, offset+len(data)) of file `inode`; contiguous.
    truncated    the file shrank below the read position; reading restarts at offset 0.
    rotated      the path names a new file (inode); the old one was read to its end; offset 0.
    missing      the path does not exist (yet / any more); offset = where reading will go on.
    reconnected  the connection or follower was replaced; reading goes on at offset (nothing lost).
    gap          after a reconnect (or resume with `inode`), another file is at the path; bytes of
                 the old file after the last data may be lost. Reading starts at 0 of `inode`.
    After truncated/rotated/gap, discard any partial line you were assembling.
    """

    kind: EventKind
    offset: int
    data: bytes = b""
    inode: int | None = None


class FrameParser:
    """Bytes from the follower in, (header dict, payload bytes) records out."""

    def __init__(self) -> None:
        self._buf = bytearray()
        self._head: dict | None = None

    def feed(self, chunk: bytes) -> list[tuple[dict, bytes]]:
        self._buf += chunk
        out = []
        while True:
            if self._head is None:
                nl = self._buf.find(b"\n")
                if nl < 0:
                    if len(self._buf) > 1 << 20:
                        raise ValueError("follower sent a record header over 1 MiB")
                    return out
                try:
                    self._head = json.loads(bytes(self._buf[:nl]))
                except ValueError as e:
                    raise ValueError(f"follower sent a non-JSON record: {bytes(self._buf[:200])!r}") from e
                del self._buf[: nl + 1]
            n = int(self._head.get("n", 0))
            if len(self._buf) < n:
                return out
            out.append((self._head, bytes(self._buf[:n])))
            del self._buf[:n]
            self._head = None


def follower_script() -> str:
    return FOLLOWER.read_text(encoding="utf-8")


class _Lost(Exception):
    """The follower stream ended or went silent: reconnect and resume."""


def follow_events(
    host: "Host",
    path: str,
    offset: int = 0,
    *,
    inode: int | None = None,
    python: str,
    heartbeat: float = 1.0,
    reconnect_for: float = 60.0,
    watch: str = "auto",
) -> Iterator[Event]:
    if offset < 0:
        raise ValueError("offset must be >= 0 (use host.size(path) to follow from the end)")
    script = follower_script()
    pos, ino = offset, inode
    dead_after = 3 * heartbeat + 1.0
    lost_since: float | None = None  # first failure of the current outage
    backoff = 0.05
    force = False
    while True:
        if lost_since is not None:
            try:
                host._reconnect(force=force)
            except (HostKeyError, AuthFailed):
                raise  # not transient
            except ConnectError as e:
                if time.monotonic() - lost_since > reconnect_for:
                    raise FollowError(host.name, f"gave up following {path} after {reconnect_for:g}s: {e.detail}") from e
                time.sleep(backoff)
                backoff = min(backoff * 2, 2.0)
                continue
        args = [path, str(pos), "--heartbeat", f"{heartbeat:g}"]
        if ino is not None:
            args += ["--inode", str(ino)]
        if watch == "poll":
            args.append("--no-inotify")
        proc: Process | None = None
        try:
            proc = host._start(shell.command([python, "-u", "-", *args]), stdin=True)
            _send(proc, script)
            said_hello = False
            parser = FrameParser()
            stderr = bytearray()
            last = time.monotonic()
            while True:
                out, err, eof = proc.read(min(heartbeat, 1.0))
                stderr += err
                del stderr[:-8192]
                now = time.monotonic()
                if out:
                    last = now
                    for head, payload in _records(parser, out, host.name):
                        kind = head.get("k")
                        if kind == "hello":
                            said_hello = True
                            if lost_since is not None:
                                lost_since, backoff, force = None, 0.05, False
                                yield Event("reconnected", pos, inode=ino)
                        elif kind == "data":
                            if head["off"] != pos and head.get("ino") == ino:
                                raise FollowError(host.name, f"follower skipped from {pos} to {head['off']}")
                            ino = head["ino"]
                            pos = head["off"] + len(payload)
                            yield Event("data", head["off"], payload, ino)
                        elif kind in ("truncated", "rotated", "gap"):
                            pos, ino = 0, head["ino"]
                            yield Event(kind, 0, inode=ino)
                        elif kind == "missing":
                            yield Event("missing", head["off"], inode=head.get("ino"))
                        elif kind == "error":
                            raise FollowError(host.name, f"follower failed on {path}: {head.get('msg')}")
                        # hb: only proves the connection is alive
                if eof:
                    if not said_hello and _host_alive(host):
                        why = stderr.decode("utf-8", "replace").strip().splitlines()
                        raise FollowError(host.name, f"could not start the follower with {python}: "
                                                     f"{why[-1] if why else 'no output'}")
                    raise _Lost()
                if now - last > dead_after:
                    force = True  # the connection may be wedged rather than closed
                    raise _Lost()
        except (_Lost, TransportError) as e:
            if isinstance(e, (FollowError, HostKeyError, AuthFailed)):
                raise
            if lost_since is None:
                lost_since = time.monotonic()
            elif time.monotonic() - lost_since > reconnect_for:
                raise FollowError(host.name, f"gave up following {path} after {reconnect_for:g}s") from None
        finally:
            if proc is not None:
                proc.kill()


def _records(parser: FrameParser, chunk: bytes, name: str):
    try:
        return parser.feed(chunk)
    except ValueError as e:
        raise FollowError(name, str(e)) from None


def _send(proc: "Process", script: str) -> None:
    try:
        proc.write(script.encode("utf-8"))
        proc.close_stdin()
    except (OSError, EOFError):
        pass  # the interpreter is not there or died: its stderr and exit will tell


def _host_alive(host: "Host") -> bool:
    check = getattr(host, "_connected", None)
    return True if check is None else check()
