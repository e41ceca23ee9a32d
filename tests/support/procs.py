"""Processes on this machine, read from /proc: who is in a process group, whose command line
holds a text. Zombies do not count (they are gone, only not yet reaped)."""
from __future__ import annotations

import os
from pathlib import Path


def stat_fields(pid: str) -> list[str] | None:
    """/proc/PID/stat after the command name: state, ppid, pgrp, ..."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None


def pids_in_group(pgid: int) -> list[int]:
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit() and (st := stat_fields(d)) and int(st[2]) == pgid and st[0] not in "ZX":
            out.append(int(d))
    return out


def pids_with(text: str) -> list[int]:
    """Live processes whose command line contains text (other than this one)."""
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit() or int(d) == os.getpid():
            continue
        try:
            cmd = Path(f"/proc/{d}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        st = stat_fields(d)
        if text in cmd and st and st[0] not in "ZX":
            out.append(int(d))
    return out
