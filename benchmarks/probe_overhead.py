"""Cost of the in-server probe (dynspec_cli/engines/sglang/probe), each number next to its baseline from the same run.

  python3 benchmarks/probe_overhead.py [--calls 10000000] [--rounds 40] [--starts 40] [--python PATH ...]

1. Hot loop: a patched method (`Worker.step`, two patch lines) called 10^7 times in a loop, in a process with
   the probe injected as dynspec does it (probe_env). Its baseline is `Twin.step`: the same code in an
   unpatched class of the same module, run by the same loop in the same process. Both are timed in CPU time
   (a busy machine delays a round but does not bill it), in interleaved rounds of calls/rounds calls
   (patched, twin, patched, ...); the minimum round of each side is kept and scaled to `calls`.
   - steady: patched vs twin after the first count_limit + 1 calls, i.e. after the first hit.
     Target: <= 1 % on Python 3.12+ (sys.monitoring); 3.10/3.11 (code swap) reported too.
   - noise: the same comparison in a process without the probe (identical code): the measurement's floor.
   - first calls: the one-time extra CPU time of the first count_limit + 1 calls (counting, hit lines, the
     code swaps), against the twin's first calls, and as a share of the whole 10^7-call loop.
2. Start-up: wall time of `python -c pass` with the probe injected vs without, median of interleaved runs
   (with compiled bytecode cached, as in a normal install, and without: PYTHONDONTWRITEBYTECODE=1). The
   probe folder is copied to a temporary directory so the cache never lands in the repo. Target: <= 20 ms.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from dynspec_cli.engines.sglang.probe_setup import PROBE_DIR, probe_env  # noqa: E402

PYTHONS = ["/root/.pyenv/versions/3.10.13/bin/python3.10", "/root/.pyenv/versions/3.11.7/bin/python3.11",
           "/root/.pyenv/versions/3.12.1/bin/python3.12", "/root/.pyenv/versions/3.13.0/bin/python3.13"]

HOT_MODULE = textwrap.dedent('''\
    class Worker:
        def __init__(self, threshold):
            self.threshold = threshold

        def step(self, batch_size):
            if batch_size > self.threshold:  # PATCH
                return batch_size - 1  # PATCH
            return batch_size + 1


    class Twin:
        def __init__(self, threshold):
            self.threshold = threshold

        def step(self, batch_size):
            if batch_size > self.threshold:
                return batch_size - 1
            return batch_size + 1
    ''')

RUNNER = textwrap.dedent('''\
    import json, sys, time
    import hotmod

    calls, rounds, first = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    patched, twin = hotmod.Worker(4), hotmod.Twin(4)
    clock = time.process_time


    def loop(w, n):
        t0 = clock()
        for i in range(n):
            w.step(i & 7)
        return clock() - t0


    first_patched = loop(patched, first)  # the counted calls (with the probe)
    first_twin = loop(twin, first)
    code = hotmod.Worker.step.__code__
    if sys.version_info >= (3, 12):  # probe events left in the bytecode the interpreter runs
        import dis
        ops = dis.get_instructions(code, adaptive=True)
        left = "%d instrumented ops" % sum("INSTRUMENTED" in i.opname for i in ops)
    else:  # the swapped-in variant still in place?
        left = "probe calls" if "__import__" in code.co_names else "original code"
    per = calls // rounds
    p, t = [], []
    for _ in range(rounds):
        p.append(loop(patched, per))
        t.append(loop(twin, per))
    print(json.dumps({"patched": min(p) * rounds, "twin": min(t) * rounds, "first_patched": first_patched,
                      "first_twin": first_twin, "left": left}))
    ''')


def _env(extra: dict | None = None, bytecode: bool = True) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "DYNSPEC_PROBE", "PYTHONDONTWRITEBYTECODE")}
    env["PYTHONNOUSERSITE"] = "1"
    if not bytecode:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    env.update(extra or {})
    return env


def _version(python: str) -> str:
    return subprocess.run([python, "-c", "import sys; print('%d.%d.%d' % sys.version_info[:3])"],
                          capture_output=True, text=True, check=True).stdout.strip()


def hot_loop(python: str, work: Path, probe_dir: Path, calls: int, rounds: int, count_limit: int) -> dict:
    (work / "hotmod.py").write_text(HOT_MODULE)
    (work / "runner.py").write_text(RUNNER)
    lines = [n for n, text in enumerate(HOT_MODULE.splitlines(), 1) if text.endswith("# PATCH")]
    target = {"file": str(work / "hotmod.py"), "class": "Worker", "function": "step", "lines": lines}
    plain_env = _env({"PYTHONPATH": str(work)})
    probe = _env(probe_env([target], existing_pythonpath=str(work), probe_dir=probe_dir, count_limit=count_limit))

    def one(env):
        out = subprocess.run([python, str(work / "runner.py"), str(calls), str(rounds), str(count_limit + 1)],
                             env=env, cwd=work, capture_output=True, text=True, check=True)
        return json.loads(out.stdout.splitlines()[-1]), out.stderr

    r, stderr = one(probe)
    assert '"event":"module"' in stderr and '"event":"error"' not in stderr, stderr[-2000:]
    assert re.search(r'"event":"hit".*"calls":">=%d"' % count_limit, stderr), "the probe did not count"
    plain = one(plain_env)[0]
    modes = re.findall(r'"mode":"(\w+)"', stderr.split('"event":"module"', 1)[-1])
    return {**r, "plain_patched": plain["patched"], "plain_twin": plain["twin"], "mode": modes[0] if modes else "?"}


def startup(python: str, probe_dir: Path, starts: int, bytecode: bool) -> dict:
    """probe_dir: a copy of the probe for this case (PYTHONDONTWRITEBYTECODE only stops writing: a cache
    left by the other case would still be read)."""
    target = {"file": "sglang/srt/speculative/eagle_worker_v2.py", "class": "EAGLEWorkerV2",
              "function": "forward_batch_generation", "lines": [600, 601, 602]}
    base_env = _env(bytecode=bytecode)
    probe = _env(probe_env([target], existing_pythonpath=None, probe_dir=probe_dir), bytecode=bytecode)
    dormant = _env({"PYTHONPATH": str(probe_dir)}, bytecode=bytecode)
    if bytecode:  # fill the cache first
        subprocess.run([python, "-c", "pass"], env=probe, check=True, capture_output=True)
    times = {"baseline": [], "probe": [], "dormant": []}
    for _ in range(starts):
        for key, env in (("baseline", base_env), ("probe", probe), ("dormant", dormant)):
            t0 = time.perf_counter()
            subprocess.run([python, "-c", "pass"], env=env, check=True, capture_output=True)
            times[key].append(time.perf_counter() - t0)
    return {k: statistics.median(v) * 1000 for k, v in times.items()}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--calls", type=int, default=10_000_000)
    ap.add_argument("--rounds", type=int, default=40)
    ap.add_argument("--starts", type=int, default=40)
    ap.add_argument("--count-limit", type=int, default=1000)
    ap.add_argument("--python", action="append", help="interpreters (default: 3.10-3.13 found here)")
    a = ap.parse_args(argv)
    pythons = [p for p in (a.python or PYTHONS) if os.path.exists(p)]
    with tempfile.TemporaryDirectory(prefix="dynspec-probe-bench-") as tmp:
        tmp = Path(tmp)
        probe_dir = tmp / "probe"
        shutil.copytree(PROBE_DIR, probe_dir, ignore=shutil.ignore_patterns("__pycache__"))
        print(f"1. patched method called {a.calls:,} times; count_limit={a.count_limit}; CPU time")
        print(f"   {'python':8} {'mode':10} {'twin':>8} {'patched':>8} {'steady':>8} {'noise':>7}   "
              f"{'first calls: extra':>18} {'of loop':>8}   after the first {a.count_limit + 1} calls")
        for py in pythons:
            work = tmp / f"hot-{Path(py).name}"
            work.mkdir()
            r = hot_loop(py, work, probe_dir, a.calls, a.rounds, a.count_limit)
            steady = (r["patched"] / r["twin"] - 1) * 100
            noise = (r["plain_patched"] / r["plain_twin"] - 1) * 100
            extra = (r["first_patched"] - r["first_twin"]) * 1000
            share = extra / 1000 / r["twin"] * 100
            target = "  (steady target <= 1 %)" if _version(py) >= "3.12" else ""
            print(f"   {_version(py):8} {r['mode']:10} {r['twin']:7.3f}s {r['patched']:7.3f}s {steady:+7.2f}% "
                  f"{noise:+6.2f}%   {extra:15.1f} ms {share:7.2f}%   {r['left']}{target}", flush=True)
        print(f"\n2. start-up of `python -c pass`, median of {a.starts} interleaved runs (target: probe cost <= 20 ms)")
        print(f"   {'python':8} {'bytecode':9} {'baseline':>9} {'probe':>9} {'cost':>8}   {'dormant*':>8}")
        for py in pythons:
            for bytecode in (True, False):
                pdir = tmp / f"probe-{Path(py).name}-{'pyc' if bytecode else 'nopyc'}"
                shutil.copytree(PROBE_DIR, pdir, ignore=shutil.ignore_patterns("__pycache__"))
                r = startup(py, pdir, a.starts, bytecode)
                print(f"   {_version(py):8} {'cached' if bytecode else 'none':9} {r['baseline']:7.1f}ms"
                      f" {r['probe']:7.1f}ms {r['probe'] - r['baseline']:+6.1f}ms"
                      f"   {r['dormant'] - r['baseline']:+6.1f}ms",
                      flush=True)
        print("   * dormant: the probe folder on PYTHONPATH without DYNSPEC_PROBE (--no-probe leaves even that out)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
