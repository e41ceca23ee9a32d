"""Closing an exec channel while its command is still writing, against a real OpenSSH sshd.

Watch stops its log follower, and a timed-out call kills its command, by closing the channel from
another thread while sshd may still be sending that command's output. paramiko delivers that
output on its transport thread; when the channel had an OS pipe for polling (`Channel.fileno`),
`Channel.close()` closed the pipe without the lock the transport thread writes to it under, the
transport thread's write hit a closed descriptor, and the whole connection died (paramiko logs
"Socket exception: Bad file descriptor (9)"): every other command on it saw a drop that no
network caused. Seen in CI as one drop too many in tests/run/test_watch_drops.py."""
from __future__ import annotations

import threading

import pytest

from tests.support.sshd import ssh_lab  # noqa: F401 - fixture

pytestmark = pytest.mark.ssh

ROUNDS = 150


def test_closing_channels_under_streaming_output_never_drops_the_connection(ssh_lab):
    host = ssh_lab.host("dut")  # a connection of its own: its drop count is this test's
    told = []
    host.drops.add_listener(told.append)
    try:
        assert host.run(["true"]).ok
        for _ in range(ROUNDS):
            proc = host.start_script("exec yes dynspec", stdin=False)  # writes as fast as sshd takes it
            got = b""
            while not got:
                got, _, eof = proc.read(5.0)
                assert not eof
            # from another thread, as watch does, while the transport thread is feeding the channel
            t = threading.Thread(target=proc.interrupt)
            t.start()
            proc.read(0.01)
            t.join()
            proc.kill()
        assert host.run(["echo", "still here"]).stdout == b"still here\n"
        assert host.drops.count == 0, [(d.state, d.what, d.detail) for d in told]
    finally:
        host.close()
