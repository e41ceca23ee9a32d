"""Connection drops: how a host counts them, tells whoever watches, and which errors are worth
trying again.

A drop is one SSH connection dying under dynspec (sshd killed, a NAT forgetting the flow). The
operations that notice it (the log follower, a liveness check, a file read) report it with the
connection's generation, so one drop is counted once however many calls were running on it.
The connection that replaces it reports `reconnected`, with the time the outage took.
"""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Callable

from dynspec_cli.transport.errors import AuthFailed, ConnectError, ConnectionClosed, HostKeyError, SSHConfigError

# How long (and how many times) one call keeps trying to get a dropped connection back. A minute
# covers an sshd restart or a short network outage; longer and a user would rather hear about it.
RETRY_FOR = 60.0
RETRY_ATTEMPTS = 60


@dataclass(frozen=True)
class Drop:
    """What a host tells its drop listeners.

    state  "lost": noticed, reconnecting · "reconnected": usable again · "gave-up": the call that
           was retrying raised (after RETRY_FOR seconds or RETRY_ATTEMPTS attempts).
    n      drops of this host so far, this one included.
    what   the operation that noticed it ("group_alive", "follow", ...).
    took   reconnected: seconds from noticing the drop to the new connection being up.
    """

    host: str
    state: str
    n: int
    what: str = ""
    detail: str = ""
    took: float | None = None


Listener = Callable[[Drop], None]


class DropLog:
    """Per host: the drop count, the outage in progress, the listeners. Thread-safe (the follower
    runs in its own thread); listeners are called outside the lock, from whichever thread noticed."""

    def __init__(self, host: str) -> None:
        self.host = host
        self.count = 0
        self.reconnect_times: list[float] = []  # seconds per outage, in order
        self._last_generation = -1
        self._lost_at: float | None = None
        self._lock = threading.Lock()
        self._listeners: list[Listener] = []

    @property
    def pending(self) -> bool:
        """A drop was noticed and no new connection is up yet."""
        return self._lost_at is not None

    def add_listener(self, fn: Listener) -> None:
        with self._lock:
            self._listeners.append(fn)

    def lost(self, generation: int | None, what: str, detail: str = "") -> None:
        with self._lock:
            if generation is not None and generation <= self._last_generation:
                return  # this connection's death was already counted
            if generation is not None:
                self._last_generation = generation
            self.count += 1
            self._lost_at = time.monotonic()
            event = Drop(self.host, "lost", self.count, what, detail)
        self._emit(event)

    def reconnected(self) -> None:
        with self._lock:
            if self._lost_at is None:
                return
            took = time.monotonic() - self._lost_at
            self._lost_at = None
            self.reconnect_times.append(took)
            event = Drop(self.host, "reconnected", self.count, took=took)
        self._emit(event)

    def forget_outage(self) -> None:
        """The host was closed: no outage is being repaired any more (so a later first connection
        that fails is reported at once, not retried as a reconnect)."""
        with self._lock:
            self._lost_at = None

    def gave_up(self, what: str, detail: str) -> None:
        self._emit(Drop(self.host, "gave-up", self.count, what, detail))

    def _emit(self, event: Drop) -> None:
        with self._lock:
            listeners = list(self._listeners)
        for fn in listeners:
            try:
                fn(event)
            except Exception:  # noqa: BLE001 - a display's failure must not break the connection
                pass


def transient(e: ConnectError, *, reconnecting: bool) -> bool:
    """Whether connecting may work if tried again. A host key problem never is (that would be
    the man-in-the-middle getting retries), nor a broken ssh_config, nor a refused key (a
    connection cut during authentication is ConnectionClosed, not AuthFailed). A closed
    connection always is, also on the first try; other errors while a drop is being repaired."""
    if isinstance(e, (HostKeyError, SSHConfigError, AuthFailed)):
        return False
    return reconnecting or isinstance(e, ConnectionClosed)


class Backoff:
    """0.05 s doubling to 2 s: the first retry is quick (a killed sshd child is replaced by a new
    connection in ~0.1 s), a host that stays away is not hammered."""

    def __init__(self, first: float = 0.05, cap: float = 2.0) -> None:
        self.first, self.cap, self._next = first, cap, first

    def next(self) -> float:
        delay, self._next = self._next, min(self._next * 2, self.cap)
        return delay

    def reset(self) -> None:
        self._next = self.first
