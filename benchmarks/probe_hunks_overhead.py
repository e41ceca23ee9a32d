"""Cost of the per-hunk probe (schema v2: one target per hunk of the diff, a `hunk` line at the first
execution of each), each number next to its baseline from the same run.

  python3 benchmarks/probe_hunks_overhead.py [--calls 5000000] [--rounds 20] [--python PATH ...]

The hot loop of benchmarks/probe_overhead.py (the same module and runner: `Worker.step` called in a
loop, its unpatched twin `Twin.step` in the same process as the baseline, interleaved rounds, minimum
CPU time of each side), but the probe is given the two patch lines as two hunks (a behaviour hunk and a
marker hunk, as launch gives preflight's `hunks`). Reported per interpreter:
  - ratio: Worker.step / Twin.step with the per-hunk probe, after the first count_limit + 1 calls;
  - noise: the same ratio in a process without the probe (identical code): the measurement's floor.
Target: ratio - noise <= 1 % on 3.12+ (sys.monitoring: every LINE location DISABLEd at its first hit,
PY_START DISABLEd at count_limit); 3.10/3.11 (code swap) reported too.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from probe_overhead import HOT_MODULE, PYTHONS, RUNNER, _env, _version  # noqa: E402

from dynspec_cli.engines.sglang.probe_setup import PROBE_DIR, probe_env  # noqa: E402


def measure(python: str, work: Path, calls: int, rounds: int, count_limit: int) -> dict:
    (work / "hotmod.py").write_text(HOT_MODULE)
    (work / "runner.py").write_text(RUNNER)
    lines = [n for n, text in enumerate(HOT_MODULE.splitlines(), 1) if text.endswith("# PATCH")]
    targets = [{"file": str(work / "hotmod.py"), "class": "Worker", "function": "step", "lines": [n], "hunk": i,
                "role": role} for i, (n, role) in enumerate(zip(lines, ("behaviour", "marker")))]
    probe = _env(probe_env(targets, existing_pythonpath=str(work), probe_dir=PROBE_DIR, count_limit=count_limit))

    def one(env):
        out = subprocess.run([python, str(work / "runner.py"), str(calls), str(rounds), str(count_limit + 1)],
                             env=env, cwd=work, capture_output=True, text=True, check=True)
        return json.loads(out.stdout.splitlines()[-1]), out.stderr

    r, stderr = one(probe)
    assert stderr.count('"event":"hunk"') == 2 and '"event":"error"' not in stderr, stderr[-2000:]
    plain = one(_env({"PYTHONPATH": str(work)}))[0]
    return {"python": _version(python), "ratio": r["patched"] / r["twin"], "noise": plain["patched"] / plain["twin"],
            "left": r["left"]}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=5_000_000)
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--count-limit", type=int, default=1000)
    ap.add_argument("--python", action="append")
    a = ap.parse_args(argv)
    pythons = [p for p in (a.python or PYTHONS) if os.path.exists(p)]
    if not pythons:
        print("probe_hunks_overhead: no interpreter found (pass --python PATH)", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as d:
        for py in pythons:
            m = measure(py, Path(d), a.calls, a.rounds, a.count_limit)
            print(f"python {m['python']}: per-hunk probe {m['ratio']:.4f}x twin, without probe {m['noise']:.4f}x "
                  f"(overhead {100 * (m['ratio'] - m['noise']):+.2f} %; left in code: {m['left']})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
