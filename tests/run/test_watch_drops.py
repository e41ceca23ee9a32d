"""`watch` through SSH drops: the sshd child serving dynspec's connection is killed every ~1 s, each
time while one of watch's own remote calls (liveness, health, record save) is running on it. The
watch must keep going through every drop, lose or repeat no log byte, and end with the verdict the
log gives. Real OpenSSH sshd; the GPU-server stand-in (tests/standin) writes the log."""
from __future__ import annotations

import statistics
import sys
import threading
import time
import uuid

import pytest

from dynspec_cli.cli.verify import make_feeder
from dynspec_cli.knowledge.features import load_feature
from dynspec_cli.run import control, records
from dynspec_cli.run.profiles import Profile
from dynspec_cli.run.records import RunRecord
from tests.run.helpers import STANDIN_DIR, free_port, group_alive

pytestmark = pytest.mark.ssh

DROPS = 20


class DropInjector:
    """Kills the sshd processes of every connection about once a second, at the moment a remote
    call other than the log follower has just started (so the drop lands under it); after 1.5 s
    without one, whenever (then it lands under the follower)."""

    def __init__(self, host, server, wanted: int):
        self.server, self.wanted = server, wanted
        self.kills = 0
        self.under_a_call = 0
        self.done = threading.Event()
        self._started = threading.Event()
        self._what: list[str] = []
        real_start = host._start

        def start(script, *, stdin):
            proc = real_start(script, stdin=stdin)
            if "--heartbeat" not in script:  # not the follower
                self._started.set()
            return proc

        host._start = start  # the real method, observed
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        while not self.done.is_set() and self.kills < self.wanted:
            self.done.wait(0.8)
            self._started.clear()
            hit = self._started.wait(1.5)
            if self.done.is_set():
                return
            if self.server.kill_sessions():
                self.kills += 1
                self.under_a_call += hit

    def stop(self) -> None:
        self.done.set()
        self._thread.join(10)


def test_watch_survives_twenty_drops_without_losing_a_line(ssh_lab, tmp_path, capsys):
    home = tmp_path / "home"  # the session's HOME: the run record stays in the test's directory
    home.mkdir()
    server = ssh_lab.add_server("droppy", session_env={"HOME": str(home)})
    host = ssh_lab.host("droppy")
    spawned = None
    try:
        name = f"t-{uuid.uuid4().hex[:8]}"
        log = str(tmp_path / "server.log")
        # ~38 s from start to ready: 20 drops a second apart fit in its start-up
        prof = Profile(name=name, host="droppy", python=sys.executable, module="fake_sglang_server",
                       workdir=str(STANDIN_DIR), port=free_port(), log=log,
                       env={"STANDIN_PACE": "0.13", "SGLANG_ENABLE_SPEC_V2": "True"},
                       flags={"model-path": "/models/tiny", "tp-size": 2, "speculative-algorithm": "EAGLE3",
                              "speculative-draft-model-path": "/models/draft", "speculative-num-steps": 3,
                              "speculative-eagle-topk": 1, "speculative-num-draft-tokens": 4,
                              "speculative-disable-batch-threshold": 5})
        spawned = host.spawn_detached(prof.argv(), env=prof.env, cwd=prof.workdir, log_path=log)
        rec = RunRecord(name=name, host="droppy", pid=spawned.pid, pgid=spawned.pgid, argv=prof.argv(),
                        env=prof.env, log=log, log_offset=0, port=prof.port, started_at=time.time(),
                        feature=prof.feature, python=sys.executable,
                        leader_start=records.leader_start(host, spawned.pid))
        fed = bytearray()

        def feeder_factory(*args):
            feeder = make_feeder(*args)
            feed = feeder.feed

            def recording_feed(data: bytes) -> None:
                fed.extend(data)
                feed(data)

            feeder.feed = recording_feed
            return feeder

        events = []
        host.drops.add_listener(events.append)
        injector = DropInjector(host, server, DROPS)
        injector.start()
        t0 = time.monotonic()
        try:
            outcome = control.watch(host, rec, load_feature(prof.feature), timeout=150, keep=False,
                                    feeder_factory=feeder_factory)
        finally:
            injector.stop()
        took = time.monotonic() - t0

        assert injector.kills == DROPS, f"only {injector.kills} drops before the watch ended ({outcome.why})"
        assert injector.under_a_call >= DROPS // 2  # most drops cut a liveness/health call
        # the verdict the log gives, reached through every drop
        assert (outcome.verdict.verdict, outcome.why) == ("live", "ready"), outcome
        assert outcome.health and outcome.health.endswith(" 200")
        assert group_alive(spawned.pgid) and not outcome.stopped
        # every byte the follower delivered is the file's, in order, once
        data = (tmp_path / "server.log").read_bytes()
        assert bytes(fed) == data[:len(fed)]
        assert b"Dynamic speculation disable enabled" in fed and fed.count(b"\n") > 100
        # the drops were told, each once, and each was repaired
        lost = [e for e in events if e.state == "lost"]
        assert len(lost) == host.drops.count >= DROPS
        assert [e.n for e in lost] == list(range(1, len(lost) + 1))
        assert not [e for e in events if e.state == "gave-up"]
        assert len(host.drops.reconnect_times) == len(lost)
        saved = records.load(host, name)
        assert saved is not None and saved.verdict == "live"
        assert (home / ".dynspec" / "runs" / f"{name}.json").exists()
        times = host.drops.reconnect_times
        lines = fed.count(b"\n")
        with capsys.disabled():
            print(f"\n  watch through drops: {injector.kills} kills ({injector.under_a_call} under a liveness/health "
                  f"call), {host.drops.count} drops seen, 0 deaths, {lines} lines delivered, 0 lost, "
                  f"0 duplicated; reconnect median {statistics.median(times) * 1000:.0f} ms, "
                  f"max {max(times) * 1000:.0f} ms; watch took {took:.1f}s")
    finally:
        if spawned is not None:
            try:
                host.stop_group(spawned.pgid, grace=5)
            finally:
                host.close()
        ssh_lab.remove_server("droppy")
