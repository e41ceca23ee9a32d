"""The real `python -m sglang.bench_serving` of a published sglang wheel, runnable on this CPU-only
machine: a small venv (realsglang_requirements/bench-client.txt: the client's own imports, no torch)
with the unpacked wheel (tests.support.wheels) first on PYTHONPATH, and a word-level tokenizer made
here (no hub download), which `--tokenizer DIR` loads with transformers' AutoTokenizer.

    c = bench_client.client("0.5.9")
    subprocess.run(c.cmd("--backend", "sglang", "--port", str(port), "--tokenizer", str(c.tokenizer),
                         "--dataset-name", "random-ids", ...), env=c.env())

Built once under $DYNSPEC_TEST_CACHE/sglang-env/bench-client (flock-serialised, stamped with the hash of
the requirement file, like tests.support.sglang_env)."""
from __future__ import annotations

import dataclasses
import json
import os
import sys
from pathlib import Path
from typing import Dict

from tests.support import sglang_env, wheels

REQ = sglang_env.REQ_DIR / "bench-client.txt"
WORDS = ("the quick brown fox jumps over a lazy dog while speculative decoding drafts tokens that a large "
         "target model verifies in one forward pass and accepts the longest matching prefix").split()


@dataclasses.dataclass(frozen=True)
class BenchClient:
    python: Path
    site: Path  # the unpacked wheel (site-packages layout)
    tokenizer: Path

    def env(self, **updates: str) -> Dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
        env.update(PYTHONPATH=str(self.site), PYTHONNOUSERSITE="1", HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1",
                   TRANSFORMERS_OFFLINE="1", TOKENIZERS_PARALLELISM="false", **updates)
        return env

    def cmd(self, *args: str) -> list:
        return [str(self.python), "-m", "sglang.bench_serving", *args]


def _venv(root: Path) -> Path:
    path = root / "bench-client"
    digest = sglang_env._digest(REQ.read_bytes(), sys.version.encode())
    python = path / "bin" / "python"
    if sglang_env._done(path, digest):
        return python
    log = root / "build-bench-client.log"
    log.write_text("")
    if path.exists():
        import shutil

        shutil.rmtree(path)
    sglang_env._run([sys.executable, "-m", "venv", str(path)], log, "creating the bench-client venv")
    sglang_env._run([str(python), "-m", "pip", "install", "-q", "--no-input", "--no-compile", "-r", str(REQ)],
                    log, "installing the bench-client requirements")
    (path / sglang_env.STAMP).write_text(digest + "\n")
    return python


def _tokenizer(root: Path, python: Path) -> Path:
    """A word-level tokenizer over WORDS (plus [UNK]), saved as transformers loads it."""
    path = root / "bench-tokenizer"
    if (path / "tokenizer.json").is_file():
        return path
    tmp = path.with_name(path.name + ".building")
    tmp.mkdir(parents=True, exist_ok=True)
    vocab = {"[UNK]": 0, **{w: i + 1 for i, w in enumerate(dict.fromkeys(WORDS))}}
    script = f"""
import json, sys
from tokenizers import Tokenizer, models, pre_tokenizers, decoders
from transformers import PreTrainedTokenizerFast
t = Tokenizer(models.WordLevel(vocab={json.dumps(vocab)}, unk_token="[UNK]"))
t.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
t.decoder = decoders.WordPiece(prefix="##")
PreTrainedTokenizerFast(tokenizer_object=t, unk_token="[UNK]").save_pretrained(sys.argv[1])
"""
    import subprocess

    subprocess.run([str(python), "-c", script, str(tmp)], check=True, env={"PATH": os.environ.get("PATH", "")})
    tmp.rename(path)
    return path


def client(version: str = "0.5.9") -> BenchClient:
    root = sglang_env.cache_root()
    with sglang_env._locked(root):
        python = _venv(root)
        tok = _tokenizer(root, python)
    return BenchClient(python, wheels.unpacked(version), tok)


if __name__ == "__main__":  # python -m tests.support.bench_client [VERSION]
    c = client(*(sys.argv[1:] or ["0.5.9"]))
    print(json.dumps({k: str(v) for k, v in dataclasses.asdict(c).items()}))
