"""Driving `dynspec launch/watch/stop/status` as a user does, against the GPU-server stand-in
(tests/standin/fake_sglang_server.py), locally or over the test suite's real sshd."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from tests.support.home import runs_dir

STANDIN_DIR = Path(__file__).resolve().parent.parent / "standin"
DYNSPEC = [sys.executable, "-m", "dynspec_cli"]


def paused_at(step: str | None) -> list[str]:
    """DYNSPEC, or dynspec held still at a step of starting a server (tests/support/paused_dynspec.py)."""
    return [sys.executable, "-m", "tests.support.paused_dynspec", step] if step else DYNSPEC


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def write_profile(path: Path, name: str, *, host: str = "local", env: dict | None = None, flags: dict | None = None,
                  log: str | None = None, port: int | None = None, python: str | None = None) -> Path:
    lines = [f"name = {json.dumps(name)}", f"host = {json.dumps(host)}",
             f"python = {json.dumps(python or sys.executable)}", 'module = "fake_sglang_server"',
             f"workdir = {json.dumps(str(STANDIN_DIR))}", f"port = {port or free_port()}",
             f"log = {json.dumps(log or str(path.parent / (name + '.log')))}", "ready_timeout = 120", "[env]"]
    env = {"STANDIN_PACE": "0.01", **(env or {})}
    lines += [f"{k} = {json.dumps(v)}" for k, v in env.items()]
    lines.append("[flags]")
    base = {"model-path": "/models/tiny", "tp-size": 2, "speculative-algorithm": "EAGLE3",
            "speculative-draft-model-path": "/models/draft", "speculative-num-steps": 3,
            "speculative-eagle-topk": 1, "speculative-num-draft-tokens": 4,
            "speculative-disable-batch-threshold": 5}
    base.update(flags or {})
    lines += [f"{json.dumps(k)} = {json.dumps(v)}" for k, v in base.items() if v is not None]
    path.write_text("\n".join(lines) + "\n")
    return path


def dynspec(*args, timeout: float = 180, ssh=None, env=None) -> subprocess.CompletedProcess:
    extra = []
    if ssh is not None:
        extra = ["--ssh-config", str(ssh.ssh_config), "--known-hosts", str(ssh.known_hosts)]
    full_env = {**os.environ, **(env or {})}
    return subprocess.run(DYNSPEC + list(args) + extra, capture_output=True, text=True, timeout=timeout, env=full_env)


def group_alive(pgid: int) -> bool:
    if pgid <= 1:  # a "starting" record's 0: killpg(0) would ask about the test's own group
        return False
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # zombies count as gone
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                stat = (p / "stat").read_text()
            except OSError:
                continue
            rest = stat[stat.rfind(")") + 2:].split()
            if int(rest[2]) == pgid and rest[0] != "Z":
                return True
    return False


def record(name: str) -> dict:
    return json.loads((runs_dir() / f"{name}.json").read_text())


def wait_for(cond, timeout: float = 30.0, step: float = 0.1) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(step)
    return False


def cleanup(name: str) -> None:
    try:
        rec = record(name)
    except (OSError, ValueError):
        return
    if group_alive(rec["pgid"]):
        kill_group(rec["pgid"], rec.get("pid"))
    for pid, pgid in token_processes(rec.get("token")):
        kill_group(pgid, pid)


def kill_group(pgid: int, pid: int | None) -> None:
    """SIGKILL a run's process group, never the test's own: a process caught before it left dynspec's
    group (dynspec runs in the test's, as from a shell) is killed alone."""
    try:
        if pgid > 1 and pgid != os.getpgrp():
            os.killpg(pgid, signal.SIGKILL)
        elif pid:
            os.kill(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def token_processes(token) -> list[tuple[int, int]]:
    """(pid, process group) of each process carrying a launch token (a record still "starting")."""
    if not token:
        return []
    out = []
    for p in Path("/proc").iterdir():
        try:
            if p.name.isdigit() and f"DYNSPEC_RUN_ID={token}".encode() in (p / "environ").read_bytes().split(b"\0"):
                out.append((int(p.name), os.getpgid(int(p.name))))
        except (OSError, ProcessLookupError):
            continue
    return out


SPEC = {"method": "eagle3", "model": "/models/draft", "num_speculative_tokens": 3}


def write_vllm_profile(path: Path, name: str, *, env: dict | None = None, port: int | None = None,
                       extra: str = "", flags: dict | None = None) -> Path:
    """A vLLM profile (`engine = "vllm"`) whose server is the stand-in tests/standin/fake_vllm_server.py."""
    lines = [f"name = {json.dumps(name)}", 'engine = "vllm"', 'feature = "vllm-eagle-speculator-example"',
             f"python = {json.dumps(sys.executable)}", 'module = "fake_vllm_server"', 'model = "/models/tiny"',
             f"workdir = {json.dumps(str(STANDIN_DIR))}", f"port = {port or free_port()}",
             f"log = {json.dumps(str(path.parent / (name + '.log')))}", "ready_timeout = 60", extra, "[env]"]
    lines += [f"{k} = {json.dumps(v)}" for k, v in {"STANDIN_PACE": "0.01", **(env or {})}.items()]
    lines += ["[flags]", f"speculative-config = {json.dumps(json.dumps(SPEC))}"]
    lines += [f"{json.dumps(k)} = {json.dumps(v)}" for k, v in (flags or {}).items()]
    path.write_text("\n".join(lines) + "\n")
    return path


REPO = Path(__file__).resolve().parent.parent.parent


def paste(line: str, where: Path, timeout: float = 180) -> subprocess.CompletedProcess:
    """Run a command line dynspec printed, as a user pastes it: in a POSIX shell, in another
    directory, with `dynspec` on PATH and no DYNSPEC_SSH_CONFIG / DYNSPEC_KNOWN_HOSTS set."""
    bin_dir = where / "bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    shim = bin_dir / "dynspec"
    shim.write_text(f'#!/bin/sh\nPYTHONPATH={REPO} exec {sys.executable} -m dynspec_cli "$@"\n')
    shim.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k not in ("DYNSPEC_SSH_CONFIG", "DYNSPEC_KNOWN_HOSTS")}
    env["PATH"] = f"{bin_dir}:{env.get('PATH', '')}"
    return subprocess.run(["sh", "-c", line], cwd=where, capture_output=True, text=True, timeout=timeout, env=env)


def printed(text: str, verb: str) -> list[str]:
    """The `dynspec VERB ...` commands in dynspec's output (each ends at ')', ' / ' or the line's end)."""
    import re

    return [m.strip() for m in re.findall(rf"(dynspec {verb} [^)\n]*?)(?:\)| / |$)", text, re.MULTILINE)]
