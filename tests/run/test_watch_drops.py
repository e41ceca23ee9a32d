"""`watch`, `stop` and `status` through SSH drops, on a real OpenSSH sshd whose processes serving
dynspec's connection are killed under dynspec's own remote calls (liveness, health, signals, record
saves). The watch must keep going through every drop, lose or repeat no log byte, and end with the
verdict the log gives; a dead server must still be stopped and confirmed gone. The GPU-server
stand-in (tests/standin) writes the log."""
from __future__ import annotations

import statistics
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest

from dynspec_cli.knowledge.features import load_feature
from dynspec_cli.run import control, records
from dynspec_cli.run.profiles import Profile
from dynspec_cli.run.records import RunRecord
from dynspec_cli.run.watch import watch
from dynspec_cli.transport import shell
from tests.run.helpers import STANDIN_DIR, free_port, group_alive
from tests.support.drops import KillUnder, PeriodicDrops, is_follower

pytestmark = pytest.mark.ssh

DROPS = 20
FLAGS = {"model-path": "/models/tiny", "tp-size": 2, "speculative-algorithm": "EAGLE3",
         "speculative-draft-model-path": "/models/draft", "speculative-num-steps": 3, "speculative-eagle-topk": 1,
         "speculative-num-draft-tokens": 4, "speculative-disable-batch-threshold": 5}


@dataclass
class Remote:
    host: object
    server: object
    home: Path
    dir: Path


@pytest.fixture
def remote(ssh_lab, tmp_path):
    """An sshd of its own (its sessions get killed) whose sessions have HOME in the test's
    directory, so run records never reach the real ~/.dynspec."""
    home = tmp_path / "home"
    home.mkdir()
    server = ssh_lab.add_server("droppy", session_env={"HOME": str(home)})
    host = ssh_lab.host("droppy")
    try:
        yield Remote(host, server, home, tmp_path)
    finally:
        host.close()
        ssh_lab.remove_server("droppy")


def launch_standin(r: Remote, env: dict[str, str]) -> RunRecord:
    name = f"t-{uuid.uuid4().hex[:8]}"
    log = str(r.dir / "server.log")
    prof = Profile(name=name, host="droppy", python=sys.executable, module="fake_sglang_server",
                   workdir=str(STANDIN_DIR), port=free_port(), log=log, env=env, flags=FLAGS)
    s = r.host.spawn_detached(prof.argv(), env=prof.env, cwd=prof.workdir, log_path=log)
    return RunRecord(name=name, host="droppy", pid=s.pid, pgid=s.pgid, argv=prof.argv(), env=prof.env, log=log,
                     log_offset=0, port=prof.port, started_at=time.time(), feature=prof.feature,
                     python=sys.executable, leader_start=records.leader_start(r.host, s.pid))


def record_follow(host) -> bytearray:
    """Every byte the follower hands the watch, in order."""
    fed = bytearray()
    real_follow = host.follow

    def follow(*args, **kw):
        events = real_follow(*args, **kw)

        def recorded():
            try:
                for ev in events:
                    if ev.kind == "data":
                        fed.extend(ev.data)
                    yield ev
            finally:
                events.close()

        return recorded()

    host.follow = follow
    return fed


def kill_group(host, pgid: int) -> None:
    if group_alive(pgid):
        host.stop_group(pgid, grace=5)


def test_watch_survives_twenty_drops_without_losing_a_line(remote, capsys):
    host = remote.host
    # ~33 s from start to ready: 20 drops a second apart fit in its start-up
    rec = launch_standin(remote, {"STANDIN_PACE": "0.11", "SGLANG_ENABLE_SPEC_V2": "True"})
    try:
        fed = record_follow(host)
        events = []
        host.drops.add_listener(events.append)
        save = KillUnder(host, remote.server, lambda script: shell.WRITE_FILE in script)  # the record save
        t0 = time.monotonic()
        with PeriodicDrops(host, remote.server, DROPS) as drops:
            outcome = watch(host, rec, load_feature(rec.feature), timeout=150, keep=False)
        took = time.monotonic() - t0

        assert drops.kills == DROPS, f"only {drops.kills} drops before the watch ended ({outcome.why})"
        assert drops.under_a_call >= DROPS // 2  # most drops cut a liveness or health call
        assert len(save.hits) == 1  # and one cut the final record save
        # the verdict the log gives, reached through every drop
        assert (outcome.verdict.verdict, outcome.why) == ("live", "ready"), outcome
        assert outcome.health and outcome.health.endswith(" 200")
        assert group_alive(rec.pgid) and not outcome.stopped
        saved = records.read(host, rec.name)
        assert saved is not None and saved.verdict == "live"
        assert (remote.home / ".dynspec" / "runs" / f"{rec.name}.json").exists()
        # every byte the follower delivered is the file's, in order, once
        data = Path(rec.log).read_bytes()
        assert bytes(fed) == data[:len(fed)]
        assert b"Dynamic speculation disable enabled" in fed and fed.count(b"\n") > 100
        # each drop was told once and repaired
        lost = [e for e in events if e.state == "lost"]
        assert len(lost) == host.drops.count >= DROPS + 1
        assert [e.n for e in lost] == list(range(1, len(lost) + 1))
        assert not [e for e in events if e.state == "gave-up"]
        times = host.drops.reconnect_times
        assert len(times) == len(lost)
        lines = fed.count(b"\n")
        with capsys.disabled():
            print(f"\n  watch through drops: {drops.kills + len(save.hits)} kills ({drops.under_a_call} under a "
                  f"liveness/health call, 1 under the record save), {host.drops.count} drops seen, 0 deaths, "
                  f"{lines} lines delivered, 0 lost, 0 duplicated; reconnect median "
                  f"{statistics.median(times) * 1000:.0f} ms, max {max(times) * 1000:.0f} ms; watch {took:.1f}s "
                  f"(drop {DROPS} at {drops.last_kill_at - t0:.1f}s)")
    finally:
        kill_group(host, rec.pgid)


def test_dead_run_is_stopped_and_status_told_with_a_drop_under_every_step(remote):
    """Every distinct remote call of watch, the stop that follows a dead verdict, and status gets
    the connection killed under its first try: the server is still stopped and confirmed gone, the
    record says so, status reads it back."""
    host = remote.host
    rec = launch_standin(remote, {"STANDIN_PACE": "0.01"})  # 0.5.9 without SGLANG_ENABLE_SPEC_V2: dead
    try:
        seen: list[str] = []

        def each_step_once(script: str) -> bool:
            if is_follower(script) or (seen and seen[-1] == script):
                return False  # the retry of the call just cut goes through
            seen.append(script)
            return True

        cut = KillUnder(host, remote.server, each_step_once, times=1000)
        told: list = []
        host.drops.add_listener(told.append)
        outcome = watch(host, rec, load_feature(rec.feature), timeout=60, keep=False)
        assert outcome.verdict.verdict == "dead" and outcome.stopped
        assert not group_alive(rec.pgid)
        # the stop proves the run's identity, then signals it, both through inject/runstate.py
        # (`python - identify|signal JSON`, the program on stdin)
        kinds = {k for k, body in [("liveness", shell.GROUP_ALIVE), ("identify", " - identify "),
                                   ("signal", " - signal "), ("save", shell.WRITE_FILE)] for s in cut.hits if body in s}
        assert kinds == {"liveness", "identify", "signal", "save"}, kinds
        saved = records.read(host, rec.name)
        assert saved.verdict == "dead" and saved.stopped_at is not None

        before = len(cut.hits)
        rows = control.status(host, load_feature)
        assert [(r["name"], r["alive"], r["verdict"]) for r in rows] == [(rec.name, False, "dead")]
        assert len(cut.hits) > before  # status's own calls were cut too
        cut.left = 0
        assert host.exists(rec.log)  # a kill just after a quick command is noticed by the next one
        # each drop counted once (on a mismatch: which call saw which drop, against the cut scripts)
        assert host.drops.count == len(cut.hits), ([(e.state, e.n, e.what, e.detail) for e in told],
                                                   [h[:80] for h in cut.hits])
    finally:
        kill_group(host, rec.pgid)
