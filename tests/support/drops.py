"""SSH drops on demand, for tests against the real sshd of tests/support/sshd.py.

The sshd processes serving dynspec's connection are SIGKILLed (the client sees its TCP connection
die, as when a server or a NAT goes away). `KillUnder` does it at a chosen moment: right after a
command has started on the host (its exec request was accepted), so the drop lands under that
command. `PeriodicDrops` does it about once a second for a whole watch.
"""
from __future__ import annotations

import threading
import time
from typing import Callable

FOLLOWER_ARG = "--heartbeat"  # only the log follower's command line has it


def is_follower(script: str) -> bool:
    return FOLLOWER_ARG in script


class KillUnder:
    """Observes `host.start_script` (the one primitive every remote call goes through) and kills the
    server's sessions right after a script for which `when(script)` is true has started, at most
    `times` times. `hits` lists those scripts."""

    def __init__(self, host, server, when: Callable[[str], bool], times: int = 1):
        self.server, self.when, self.left = server, when, times
        self.hits: list[str] = []
        self._lock = threading.Lock()
        real_start = host.start_script

        def start(script, *, stdin):
            proc = real_start(script, stdin=stdin)
            with self._lock:
                fire = self.left > 0 and self.when(script)
                if fire:
                    self.left -= 1
            if fire and self.server.kill_sessions():
                self.hits.append(script)
            return proc

        host.start_script = start


class PeriodicDrops:
    """About once a second, kill the server's sessions at the moment a remote call other than the
    log follower has just started (so the drop lands under it); after 1.5 s without one, whenever
    (then it lands under the follower). Stops after `wanted` kills."""

    def __init__(self, host, server, wanted: int):
        self.server, self.wanted = server, wanted
        self.kills = 0
        self.under_a_call = 0
        self.last_kill_at: float | None = None  # time.monotonic() of the last kill
        self.done = threading.Event()
        self._started = threading.Event()
        real_start = host.start_script

        def start(script, *, stdin):
            proc = real_start(script, stdin=stdin)
            if not is_follower(script):
                self._started.set()
            return proc

        host.start_script = start
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> "PeriodicDrops":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.done.set()
        self._thread.join(10)

    def _run(self) -> None:
        while not self.done.is_set() and self.kills < self.wanted:
            self.done.wait(0.5)
            self._started.clear()
            hit = self._started.wait(1.5)
            if self.done.is_set():
                return
            if self.server.kill_sessions():
                self.kills += 1
                self.under_a_call += hit
                self.last_kill_at = time.monotonic()
