"""Group profiles for the GPU-server stand-in on the netns hosts, and driving `dynspec group`."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from tests.run.helpers import DYNSPEC, STANDIN_DIR, free_port, group_alive
from tests.support.home import runs_dir

RUNS = runs_dir()


def write_group_profile(path: Path, name: str, hosts: list[str], *, env: dict | None = None,
                        nodes: dict | None = None, flags: dict | None = None, python: str | None = None) -> Path:
    lines = [f"name = {json.dumps(name)}", f"hosts = {json.dumps(hosts)}",
             f"python = {json.dumps(python or sys.executable)}", 'module = "fake_sglang_server"',
             f"workdir = {json.dumps(str(STANDIN_DIR))}", f"port = {free_port()}",
             f"log = {json.dumps(str(path.parent / '{name}.log'))}", "ready_timeout = 120", "[env]"]
    env = {"STANDIN_PACE": "0.01", "SGLANG_ENABLE_SPEC_V2": "True", **(env or {})}
    lines += [f"{k} = {json.dumps(v)}" for k, v in env.items()]
    lines.append("[flags]")
    base = {"model-path": "/models/tiny", "tp-size": len(hosts), "speculative-algorithm": "EAGLE3",
            "speculative-draft-model-path": "/models/draft", "speculative-num-steps": 3,
            "speculative-eagle-topk": 1, "speculative-num-draft-tokens": 4,
            "speculative-disable-batch-threshold": 5}
    base.update(flags or {})
    lines += [f"{json.dumps(k)} = {json.dumps(v)}" for k, v in base.items() if v is not None]
    for key, ov in (nodes or {}).items():
        for k, v in ov.items():
            if isinstance(v, dict):
                lines.append(f"[nodes.{json.dumps(str(key))}.{k}]")
                lines += [f"{json.dumps(a)} = {json.dumps(b)}" for a, b in v.items()]
            else:
                lines.append(f"[nodes.{json.dumps(str(key))}]")
                lines.append(f"{k} = {json.dumps(v)}")
    path.write_text("\n".join(lines) + "\n")
    return path


def group(lab, *args, timeout: float = 150) -> subprocess.CompletedProcess:
    extra = ["--ssh-config", str(lab.ssh_config), "--known-hosts", str(lab.known_hosts)]
    return subprocess.run(DYNSPEC + ["group", *args] + extra, capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "DYNSPEC_DEBUG": "1"})


def group_cmd(lab, *args) -> list[str]:
    return DYNSPEC + ["group", *args, "--ssh-config", str(lab.ssh_config), "--known-hosts", str(lab.known_hosts)]


def node_record(group_name: str, rank: int) -> dict:
    return json.loads((RUNS / f"{group_name}-n{rank}.json").read_text())


def cleanup_group(group_name: str, n: int = 8) -> None:
    for rank in range(n):
        try:
            rec = node_record(group_name, rank)
        except (OSError, ValueError):
            continue
        if group_alive(rec["pgid"]):
            try:
                os.killpg(rec["pgid"], signal.SIGKILL)
            except ProcessLookupError:
                pass


def fake_sglang(root: Path, *, variant: str = "") -> Path:
    """A minimal installed-looking sglang 0.5.9 (what preflight's inspector reads): version, the
    server flags the stand-in profile passes, and EAGLEWorkerV2 logging the patch's marker."""
    pkg = root / "sglang"
    (pkg / "srt" / "speculative").mkdir(parents=True)
    (pkg / "version.py").write_text('__version__ = "0.5.9"\n')
    (pkg / "__init__.py").write_text("from sglang.version import __version__\n")
    (pkg / "srt" / "__init__.py").write_text("")
    (pkg / "srt" / "speculative" / "__init__.py").write_text("")
    flags = [("model-path", "str"), ("port", "int"), ("tp-size", "int"), ("nnodes", "int"), ("node-rank", "int"),
             ("dist-init-addr", "str"), ("api-key", "str"), ("speculative-algorithm", "str"), ("speculative-draft-model-path", "str"),
             ("speculative-num-steps", "int"), ("speculative-eagle-topk", "int"),
             ("speculative-num-draft-tokens", "int"), ("speculative-disable-batch-threshold", "int")]
    (pkg / "srt" / "server_args.py").write_text(
        "import argparse\n\n\nclass ServerArgs:\n    @staticmethod\n    def add_cli_args(parser: argparse.ArgumentParser):\n"
        + "".join(f'        parser.add_argument("--{f}", type={t})\n' for f, t in flags))
    (pkg / "srt" / "speculative" / "eagle_worker_v2.py").write_text(
        "import logging\n\nlogger = logging.getLogger(__name__)\n\n\nclass EAGLEWorkerV2:\n"
        "    def __init__(self, server_args):\n"
        "        self.threshold = server_args.speculative_disable_batch_threshold\n"
        '        logger.info(f"Dynamic speculation disable enabled: threshold={self.threshold}")\n' + variant)
    return root


def python_with(root: Path, path: Path) -> Path:
    """An interpreter wrapper whose sglang is the one under `root` (one per simulated host)."""
    path.write_text(f'#!/bin/sh\nPYTHONPATH={root}${{PYTHONPATH:+:$PYTHONPATH}} exec {sys.executable} "$@"\n')
    path.chmod(0o755)
    return path
