"""A connection drop is visible while watching: on the live line on a terminal, one stderr line
per drop otherwise (where --json keeps stdout for the document)."""
from __future__ import annotations

import io
import time
from types import SimpleNamespace

from rich.console import Console

from dynspec_cli.report.runs import Display
from dynspec_cli.transport.drops import Drop, DropLog


def test_the_live_line_says_reconnecting_then_reconnected():
    buf = io.StringIO()
    out = Console(file=buf, force_terminal=True, width=200)
    d = Display(out, "run1", enabled=True)
    log = DropLog("gpu-box")
    log.add_listener(d.drop)
    verdict = SimpleNamespace(launch={"phase": "weights"}, verdict="inconclusive", worker={}, marker={"found": False})
    with d:
        d.update(verdict)
        log.lost(1, "group_alive", "connection lost while a command was running")
        assert d.ssh_note == "ssh: reconnecting (drop 1)"
        time.sleep(0.3)  # a refresh of the live region
        assert "ssh: reconnecting (drop 1)" in buf.getvalue()
        log.reconnected()
        assert d.ssh_note.startswith("ssh: reconnected after drop 1")


def test_without_a_terminal_each_drop_is_one_stderr_line(capsys):
    d = Display(Console(file=io.StringIO()), "run1", enabled=False)
    d.drop(Drop("gpu-box", "lost", 3, "follow", "no heartbeat from the log follower"))
    d.drop(Drop("gpu-box", "reconnected", 3, took=0.1))
    err = capsys.readouterr().err
    assert err == "dynspec: gpu-box: ssh: reconnecting (drop 3): no heartbeat from the log follower\n"
