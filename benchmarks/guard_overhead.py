"""What `dynspec guard` costs the benchmark it watches: the real sglang.bench_serving (published 0.5.9
wheel, tests/support/bench_client.py) against one GPU-server stand-in launched and proven with
dynspec, run unguarded and under `dynspec guard` in alternation (so drifts of the machine hit both
alike), the benchmark's own "Output token throughput" (its result file's output_throughput) side
by side. Target: the guarded median within 1% of the unguarded one.

  python3 benchmarks/guard_overhead.py [--repeat 3] [--prompts 200] [--concurrency 8] [--window 10]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.run.helpers import DYNSPEC, cleanup, record, write_profile  # noqa: E402
from tests.support import bench_client  # noqa: E402

TARGET = 0.01


def bench_cmd(c, port: int, out: Path, a) -> list:
    return c.cmd("--backend", "sglang", "--host", "127.0.0.1", "--port", str(port), "--tokenizer", str(c.tokenizer),
                 "--dataset-name", "random-ids", "--num-prompts", str(a.prompts), "--random-input-len", "32",
                 "--random-output-len", "128", "--random-range-ratio", "1", "--max-concurrency", str(a.concurrency),
                 "--output-file", str(out))


def throughput(out: Path) -> float:
    return float(json.loads(out.read_text().splitlines()[-1])["output_throughput"])


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--prompts", type=int, default=200)
    p.add_argument("--concurrency", type=int, default=8)
    p.add_argument("--window", type=float, default=10.0)
    a = p.parse_args()
    d = Path(tempfile.mkdtemp(prefix="guard-overhead-"))
    os.environ["DYNSPEC_HOME"] = str(d / "home")
    c = bench_client.client("0.5.9")
    env = c.env()
    name = f"go-{uuid.uuid4().hex[:6]}"
    patched = d / "eagle_worker_v2.py"
    patched.write_text("# patched: Dynamic speculation disable enabled: threshold=%d\n")
    prof = write_profile(d / "server.toml", name, env={"SGLANG_ENABLE_SPEC_V2": "True"},
                         flags={"speculative-disable-batch-threshold": a.concurrency, "decode-log-interval": 10,
                                "enable-metrics": True, "tp-size": 1})
    try:
        for step in (["launch", str(prof), "--no-preflight"],
                     ["prove", name, "--duration", "3", "--max-new-tokens", "64", "--patched-file", str(patched)]):
            r = subprocess.run(DYNSPEC + step, capture_output=True, text=True, timeout=300)
            if r.returncode != 0:
                raise SystemExit(f"dynspec {step[0]}: exit {r.returncode}\n{r.stderr}{r.stdout}")
        port = record(name)["port"]
        plain, guarded, walls = [], [], {"plain": [], "guarded": []}
        for i in range(a.repeat):
            for kind in ("plain", "guarded"):
                out = d / f"{kind}-{i}.jsonl"
                cmd = bench_cmd(c, port, out, a)
                if kind == "guarded":
                    cmd = DYNSPEC + ["guard", name, "--window", str(a.window), "--"] + cmd
                t = time.perf_counter()
                r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=900)
                walls[kind].append(time.perf_counter() - t)
                if r.returncode != 0:
                    raise SystemExit(f"{kind} run {i}: exit {r.returncode}\n{r.stderr[-3000:]}")
                (guarded if kind == "guarded" else plain).append(throughput(out))
                print(f"  run {i + 1} {kind:8s} {(guarded if kind == 'guarded' else plain)[-1]:9.1f} tok/s "
                      f"({walls[kind][-1]:.1f} s wall)", flush=True)
        mp, mg = statistics.median(plain), statistics.median(guarded)
        cost = (mp - mg) / mp
        print(f"output token throughput, median of {a.repeat}: unguarded {mp:.1f} tok/s, guarded {mg:.1f} tok/s "
              f"-> guard cost {cost * 100:+.2f}% (target < {TARGET * 100:.0f}%)")
        print(f"  spread: unguarded {min(plain):.1f}-{max(plain):.1f}, guarded {min(guarded):.1f}-{max(guarded):.1f} tok/s")
        return 0 if cost < TARGET else 1
    finally:
        cleanup(name)


if __name__ == "__main__":
    sys.exit(main())
