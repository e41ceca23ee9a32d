"""Slurm profiles for the GPU-server stand-in, and driving `dynspec` against the test cluster."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.run.helpers import DYNSPEC, STANDIN_DIR, free_port

# how the nodes run dynspec ([slurm] dynspec) when the login host is reached over SSH: this checkout,
# whether or not it is pip-installed
NODE_DYNSPEC = f"env PYTHONPATH={Path(__file__).resolve().parents[2]} {sys.executable} -m dynspec_cli"


def write_slurm_profile(path: Path, name: str, *, nodes: int = 2, env: dict | None = None, flags: dict | None = None,
                        slurm: dict | None = None, python: str | None = None, extra_top: str = "") -> Path:
    lines = [f"name = {json.dumps(name)}", 'host = "local"', 'scheduler = "slurm"',
             f"python = {json.dumps(python or sys.executable)}", 'module = "fake_sglang_server"',
             f"workdir = {json.dumps(str(STANDIN_DIR))}", f"port = {free_port()}",
             f"log = {json.dumps(str(path.parent / '{name}.log'))}", "ready_timeout = 120", extra_top, "[env]"]
    env = {"STANDIN_PACE": "0.01", "SGLANG_ENABLE_SPEC_V2": "True", **(env or {})}
    lines += [f"{k} = {json.dumps(v)}" for k, v in env.items() if v is not None]
    lines.append("[flags]")
    base = {"model-path": "/models/tiny", "tp-size": nodes, "speculative-algorithm": "EAGLE3",
            "speculative-draft-model-path": "/models/draft", "speculative-num-steps": 3,
            "speculative-eagle-topk": 1, "speculative-num-draft-tokens": 4,
            "speculative-disable-batch-threshold": 5}
    base.update(flags or {})
    lines += [f"{json.dumps(k)} = {json.dumps(v)}" for k, v in base.items() if v is not None]
    lines.append("[slurm]")
    sl = {"nodes": nodes, "partition": "debug", "time": "5", **(slurm or {})}
    lines += [f"{json.dumps(k)} = {json.dumps(v)}" for k, v in sl.items() if v is not None]
    path.write_text("\n".join(lines) + "\n")
    return path


def ds(*args, timeout: float = 150, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(DYNSPEC + list(args), capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "DYNSPEC_DEBUG": "1", **(env or {})})


def slurm_record(name: str) -> dict:
    return json.loads((Path.home() / ".dynspec" / "runs" / f"{name}.slurm.json").read_text())
