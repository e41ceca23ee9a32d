"""Following a file on a host: the reader side of `dynspec_cli/inject/follower.py`.

The follower (one implementation of the follow semantics, the same on every host) runs with the
host's python via `Host.start_script`; here we parse its framed records into `Event`s and keep the stream
going: when the connection or the follower dies (EOF, or no record for 3 heartbeats + 1 s) we
reconnect with bounded backoff and start a new follower at the last delivered offset of the same
inode, so no byte is lost or delivered twice. If another file is at the path by then, the follower
says so (`gap`) instead of mixing files.
"""
from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterator, Literal

from dynspec_cli import inject
from dynspec_cli.transport import shell
from dynspec_cli.transport.drops import transient
from dynspec_cli.transport.errors import ConnectError, ConnectionLost, FollowError, TransportError

if TYPE_CHECKING:
    from dynspec_cli.transport.host import Host, Process

FOLLOWER = inject.script("follower.py")

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


class Follow:
    """Iterator of `Event`s for one followed path (what `Host.follow` returns).

    `close()` may be called from any thread (e.g. a watchdog or a signal handler's helper) and
    ends the iteration; it also kills the follower. `offset`/`inode` say where the next byte
    comes from, so a later `host.follow(path, f.offset, inode=f.inode)` resumes exactly.
    """

    def __init__(self, host: "Host", path: str, offset: int = 0, *, inode: int | None = None,
                 python: str, heartbeat: float = 1.0, reconnect_for: float = 60.0, watch: str = "auto"):
        if offset < 0:
            raise ValueError("offset must be >= 0 (use host.size(path) to follow from the end)")
        if watch not in ("auto", "poll"):
            raise ValueError("watch must be 'auto' (inotify where available) or 'poll'")
        self.host, self.path, self.python = host, path, python
        self.offset, self.inode = offset, inode
        self.heartbeat, self.reconnect_for, self.watch = heartbeat, reconnect_for, watch
        self.watcher: str | None = None  # "inotify" or "poll", from the follower's hello
        self._stopped = threading.Event()
        self._proc: Process | None = None
        self._gen = self._events()

    def __iter__(self) -> "Follow":
        return self

    def __next__(self) -> Event:
        return next(self._gen)

    def __enter__(self) -> "Follow":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self._stopped.set()
        proc = self._proc
        if proc is not None:
            proc.interrupt()
        try:
            self._gen.close()
        except ValueError:
            pass  # running in another thread: it sees _stopped and ends by itself

    def _events(self) -> Iterator[Event]:
        host, path = self.host, self.path
        script = follower_script()
        dead_after = 3 * self.heartbeat + 1.0
        lost_since: float | None = None  # first failure of the current outage
        backoff = 0.05
        force = False
        lost_generation: int | None = None  # the connection the last loss happened on
        while not self._stopped.is_set():
            if lost_since is not None:
                try:
                    host._reconnect(force=force, generation=lost_generation)
                except ConnectError as e:
                    if not transient(e, reconnecting=True):
                        raise
                    if time.monotonic() - lost_since > self.reconnect_for:
                        raise FollowError(host.name, f"gave up following {path} after "
                                                     f"{self.reconnect_for:g}s: {e.detail}") from e
                    self._stopped.wait(backoff)
                    backoff = min(backoff * 2, 2.0)
                    continue
            args = [path, str(self.offset), "--heartbeat", f"{self.heartbeat:g}"]
            if self.inode is not None:
                args += ["--inode", str(self.inode)]
            if self.watch == "poll":
                args.append("--no-inotify")
            proc: Process | None = None
            try:
                proc = self._proc = host.start_script(shell.command([self.python, "-u", "-", *args]), stdin=True)
                if self._stopped.is_set():
                    return
                _send(proc, script)
                said_hello = False
                parser = FrameParser()
                stderr = bytearray()
                last = time.monotonic()
                while True:
                    out, err, eof = proc.read(min(self.heartbeat, 1.0))
                    if self._stopped.is_set():
                        return
                    stderr += err
                    del stderr[:-8192]
                    now = time.monotonic()
                    if out:
                        last = now
                        for head, payload in _records(parser, out, host.name):
                            event = self._event(head, payload, lost_since is not None)
                            if head.get("k") == "hello":
                                said_hello = True
                                if lost_since is not None:
                                    lost_since, backoff, force = None, 0.05, False
                            if event is not None:
                                yield event
                    if eof:
                        if not said_hello and not proc.lost() and _host_alive(host):
                            why = stderr.decode("utf-8", "replace").strip().splitlines()
                            raise FollowError(host.name, f"could not start the follower with {self.python}: "
                                                         f"{why[-1] if why else 'no output'}")
                        raise _Lost()
                    if now - last > dead_after:
                        force = True  # the connection may be wedged rather than closed
                        raise _Lost()
            except (_Lost, TransportError) as e:
                if isinstance(e, FollowError):
                    raise
                if isinstance(e, ConnectError) and not transient(e, reconnecting=lost_since is not None
                                                                  or host.drops.pending):
                    raise
                lost_generation = proc.generation if proc is not None else getattr(e, "generation", None)
                if isinstance(e, ConnectionLost) or force or (proc is not None and proc.lost()):
                    why = ("no heartbeat from the log follower" if force else
                           getattr(e, "detail", "") or "the log follower's connection closed")
                    host.drops.lost(lost_generation, "follow", why)
                if lost_since is None:
                    lost_since = time.monotonic()
                elif time.monotonic() - lost_since > self.reconnect_for:
                    raise FollowError(host.name, f"gave up following {path} after {self.reconnect_for:g}s") from None
                else:
                    self._stopped.wait(backoff)
                    backoff = min(backoff * 2, 2.0)
            finally:
                self._proc = None
                if proc is not None:
                    if force:
                        proc.interrupt()  # a wedged connection cannot carry a kill; it dies with it
                    else:
                        proc.kill()

    def _event(self, head: dict, payload: bytes, resumed: bool) -> Event | None:
        kind = head.get("k")
        if kind == "hello":
            self.watcher = head.get("watch")
            return Event("reconnected", self.offset, inode=self.inode) if resumed else None
        if kind == "data":
            if head.get("ino") == self.inode and head["off"] != self.offset:
                raise FollowError(self.host.name, f"follower skipped from {self.offset} to {head['off']}")
            self.inode = head["ino"]
            self.offset = head["off"] + len(payload)
            return Event("data", head["off"], payload, self.inode)
        if kind in ("truncated", "rotated", "gap"):
            self.offset, self.inode = 0, head["ino"]
            return Event(kind, 0, inode=self.inode)
        if kind == "missing":
            return Event("missing", head["off"], inode=head.get("ino"))
        if kind == "error":
            raise FollowError(self.host.name, f"follower failed on {self.path}: {head.get('msg')}")
        return None  # hb: only proves the connection is alive


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
