"""Following a file on both hosts, and the follower script on its own (a separate interpreter)."""
from __future__ import annotations

import ast
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from dynspec_cli.transport import FollowError
from dynspec_cli.transport.follow import FOLLOWER, FrameParser


class Collector:
    """Runs host.follow in a thread; tests wait for what they expect to arrive."""

    def __init__(self, host, path, offset=0, **kw):
        self.events = []
        self.error = None
        self._gen = host.follow(str(path), offset, **kw)
        self._cond = threading.Condition()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self):
        try:
            for ev in self._gen:
                with self._cond:
                    self.events.append((time.monotonic(), ev))
                    self._cond.notify_all()
        except Exception as e:  # noqa: BLE001 - handed to the test
            with self._cond:
                self.error = e
                self._cond.notify_all()

    def wait_for(self, cond, timeout=10.0):
        deadline = time.monotonic() + timeout
        with self._cond:
            while not cond(self):
                if self.error is not None:
                    raise self.error
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"timed out; events: {self.kinds()}")
                self._cond.wait(left)

    def kinds(self):
        return [ev.kind for _, ev in self.events]

    def data(self, inode=None):
        return b"".join(ev.data for _, ev in self.events if ev.kind == "data" and inode in (None, ev.inode))

    def close(self):
        self._gen.close()
        self._thread.join(10)
        assert not self._thread.is_alive()


@pytest.fixture
def follow(host):
    made = []

    def start(path, offset=0, **kw):
        c = Collector(host, path, offset, heartbeat=kw.pop("heartbeat", 0.5), **kw)
        made.append(c)
        return c

    yield start
    for c in made:
        c.close()


def append(path: Path, data: bytes) -> None:
    with open(path, "ab") as f:
        f.write(data)


def test_data_events_have_exact_offsets(follow, tmp_path):
    p = tmp_path / "log"
    p.write_bytes(b"first line\n")
    c = follow(p)
    expected = b"first line\n"
    for i in range(50):
        chunk = f"line {i} " .encode() + b"x" * (i * 37) + b"\n"
        append(p, chunk)
        expected += chunk
    big = os.urandom(300_000)  # more than one read; binary is fine
    append(p, big)
    expected += big
    c.wait_for(lambda c: len(c.data()) >= len(expected))
    assert c.data() == expected == p.read_bytes()
    pos = 0
    for _, ev in c.events:
        if ev.kind == "data":
            assert ev.offset == pos and ev.inode == os.stat(p).st_ino
            pos += len(ev.data)


def test_follow_from_offset(follow, tmp_path):
    p = tmp_path / "log"
    p.write_bytes(b"old stuff\nnew")
    c = follow(p, offset=10)
    append(p, b" line\n")
    c.wait_for(lambda c: c.data() == b"new line\n")
    assert c.events[0][1].offset == 10


def test_missing_then_created(follow, tmp_path):
    p = tmp_path / "sub" / "log"
    c = follow(p)
    c.wait_for(lambda c: "missing" in c.kinds())
    p.parent.mkdir()
    p.write_bytes(b"hello\n")
    c.wait_for(lambda c: c.data() == b"hello\n")
    assert c.kinds() == ["missing", "data"]


def test_truncation_restarts_at_zero(follow, tmp_path):
    p = tmp_path / "log"
    p.write_bytes(b"a" * 100 + b"\n")
    c = follow(p)
    c.wait_for(lambda c: len(c.data()) == 101)
    p.write_bytes(b"")  # truncate (what copytruncate rotation does)
    c.wait_for(lambda c: "truncated" in c.kinds())
    append(p, b"after\n")
    c.wait_for(lambda c: c.data().endswith(b"after\n"))
    tail = c.events[c.kinds().index("truncated"):]
    assert tail[0][1].offset == 0 and [ev.offset for _, ev in tail if ev.kind == "data"][0] == 0


def test_rotation_finishes_old_file_then_follows_new(follow, tmp_path):
    p = tmp_path / "log"
    p.write_bytes(b"one\n")
    c = follow(p)
    c.wait_for(lambda c: c.data() == b"one\n")
    old_ino = os.stat(p).st_ino
    with open(p, "ab") as writer:  # the server keeps its fd across the rename
        os.rename(p, tmp_path / "log.1")
        writer.write(b"two\n")
        writer.flush()
        c.wait_for(lambda c: c.data() == b"one\ntwo\n")
        p.write_bytes(b"new-1\n")
    c.wait_for(lambda c: c.data().endswith(b"new-1\n"))
    new_ino = os.stat(p).st_ino
    rotated = [ev for _, ev in c.events if ev.kind == "rotated"]
    assert rotated == [rotated[0]] and rotated[0].inode == new_ino and rotated[0].offset == 0
    assert c.data(old_ino) == b"one\ntwo\n" and c.data(new_ino) == b"new-1\n"


def test_resume_with_another_inode_gives_gap(follow, tmp_path):
    p = tmp_path / "log"
    p.write_bytes(b"0123456789")
    old_ino = os.stat(p).st_ino
    os.rename(p, tmp_path / "old")
    p.write_bytes(b"fresh\n")
    c = follow(p, offset=5, inode=old_ino)
    c.wait_for(lambda c: c.data() == b"fresh\n")
    assert c.kinds()[0] == "gap" and c.events[0][1].inode == os.stat(p).st_ino


def test_resume_same_inode_continues(follow, tmp_path):
    p = tmp_path / "log"
    p.write_bytes(b"0123456789")
    c = follow(p, offset=4, inode=os.stat(p).st_ino)
    c.wait_for(lambda c: c.data() == b"456789")


def test_follower_error_is_raised(host, tmp_path):
    with pytest.raises(FollowError, match="IsADirectoryError"):
        for _ in host.follow(str(tmp_path)):
            pass


def test_missing_interpreter_is_reported(host, tmp_path):
    with pytest.raises(FollowError, match="could not start the follower"):
        for _ in host.follow(str(tmp_path / "x"), python="/nonexistent/python3"):
            pass


@pytest.mark.parametrize("watch", ["auto", "poll"])
def test_latency(follow, tmp_path, watch, capsys):
    """Measured, reported, not asserted tightly (the report quotes these numbers)."""
    p = tmp_path / "log"
    p.write_bytes(b"")
    c = follow(p, watch=watch)
    time.sleep(0.3)
    sent = []
    for i in range(40):
        sent.append(time.monotonic())
        append(p, f"{i}\n".encode())
        c.wait_for(lambda c, i=i: c.data().count(b"\n") > i)
        time.sleep(0.01)
    got, seen = [], 0
    for t, ev in c.events:
        for _ in range(ev.data.count(b"\n")):
            got.append(t - sent[seen])
            seen += 1
    med = statistics.median(got) * 1000
    with capsys.disabled():
        print(f"\n  follow latency [{c._gen.host.name} {c._gen.watcher}]: median {med:.1f} ms, "
              f"max {max(got) * 1000:.1f} ms over {len(got)} lines")
    assert med < 1000


# --- the follower script on its own --------------------------------------------------------------
def test_follower_is_python38_syntax_and_stdlib_only():
    tree = ast.parse(FOLLOWER.read_text(), feature_version=(3, 8))
    imported = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert imported <= set(sys.stdlib_module_names), imported - set(sys.stdlib_module_names)
    for node in ast.walk(tree):  # 3.9+ str methods / 3.10+ syntax that feature_version misses
        if isinstance(node, ast.Attribute):
            assert node.attr not in ("removeprefix", "removesuffix"), node.attr


def _run_follower(args, timeout=3.0):
    """python - args with the script on stdin, as hosts run it; returns the parsed records."""
    proc = subprocess.Popen([sys.executable, "-u", "-", *args], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        out, _ = proc.communicate(FOLLOWER.read_bytes(), timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate()
    return proc.returncode, FrameParser().feed(out)


@pytest.mark.parametrize("args", [[], ["p", "not-a-number"], ["p", "0", "--bogus"]])
def test_follower_prints_json_even_when_it_fails(args):
    code, records = _run_follower(args)
    assert code == 1
    head, _ = records[-1]
    assert head["k"] == "error" and head["msg"] and "Traceback" in head["exception_traceback"]


def test_follower_heartbeats_and_says_hello(tmp_path):
    p = tmp_path / "log"
    p.write_bytes(b"x\n")
    _, records = _run_follower([str(p), "0", "--heartbeat", "0.2"], timeout=1.0)
    kinds = [h["k"] for h, _ in records]
    assert kinds[:2] == ["hello", "data"] and kinds.count("hb") >= 3
    assert records[0][0]["watch"] == "inotify"
    assert all(h["off"] == 2 for h, _ in records if h["k"] == "hb")


def test_frame_parser_handles_split_records():
    raw = b'{"k":"data","off":0,"ino":1,"n":5}\nhello{"k":"hb","off":5,"ino":1}\n'
    p = FrameParser()
    out = []
    for i in range(len(raw)):
        out += p.feed(raw[i:i + 1])
    assert [(h["k"], d) for h, d in out] == [("data", b"hello"), ("hb", b"")]
    with pytest.raises(ValueError):
        FrameParser().feed(b"not json\n")


def test_follower_over_json_is_ascii(tmp_path):
    p = tmp_path / "ü $(x).log"
    p.write_bytes("ünïcode\n".encode())
    _, records = _run_follower([str(p), "0"], timeout=0.5)
    assert records[1][1] == "ünïcode\n".encode()
    json.dumps(records[0][0])
