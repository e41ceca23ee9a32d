"""The real AIPerf (PyPI `aiperf` 0.13.0, realsglang_requirements/aiperf.txt) in a venv of its own, for
the guard tests: `aiperf profile --url ... --endpoint-type completions --streaming ...` against the vLLM
stand-in, with the word-level tokenizer tests.support.bench_client makes (a local directory: no hub).

Built once under $DYNSPEC_TEST_CACHE/aiperf (flock-serialised, stamped with the hash of the requirement
file, like tests.support.sglang_env): 4 minutes and 1.2 GB the first time on this machine."""
from __future__ import annotations

import dataclasses
import os
import shutil
import sys
from pathlib import Path
from typing import Dict

from tests.support import sglang_env, wheels

REQ = sglang_env.REQ_DIR / "aiperf.txt"


@dataclasses.dataclass(frozen=True)
class AIPerf:
    exe: Path
    tokenizer: Path

    def env(self) -> Dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
        # no HF_HUB_OFFLINE: with it, AIPerf 0.13 takes the local tokenizer directory for a hub repo id and fails
        env.update(PYTHONNOUSERSITE="1", TOKENIZERS_PARALLELISM="false")
        return env

    def profile(self, url: str, out: Path, *, requests: int, concurrency: int = 2) -> list:
        return [str(self.exe), "profile", "--model", "/models/tiny", "--url", url, "--endpoint-type", "completions",
                "--streaming", "--concurrency", str(concurrency), "--request-count", str(requests), "--isl", "16",
                "--osl", "64", "--tokenizer", str(self.tokenizer), "--artifact-dir", str(out), "--ui-type", "none",
                "--random-seed", "7"]


def client() -> AIPerf:
    from tests.support import bench_client

    root = wheels.CACHE / "aiperf"
    path = root / "venv"
    digest = sglang_env._digest(REQ.read_bytes(), sys.version.encode())
    with sglang_env._locked(root):
        if not sglang_env._done(path, digest):
            log = root / "build.log"
            log.write_text("")
            shutil.rmtree(path, ignore_errors=True)
            sglang_env._run([sys.executable, "-m", "venv", str(path)], log, "creating the aiperf venv")
            sglang_env._run([str(path / "bin" / "python"), "-m", "pip", "install", "-q", "--no-input", "-r", str(REQ)],
                            log, "installing aiperf")
            (path / sglang_env.STAMP).write_text(digest + "\n")
    return AIPerf(path / "bin" / "aiperf", bench_client.client("0.5.9").tokenizer)
