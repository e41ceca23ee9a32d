"""`dynspec verify`'s start-up, side by side in one run: this checkout, the project as it was at commit
41af396 (before the fixed start-up cost grew) and ripgrep, on the same files.

  python3 benchmarks/startup.py [--size-mb 300] [--repeat 7] [--base 41af396]

The base commit is materialized with `git archive BASE | tar -x -C TMP` and run from there with
PYTHONPATH=TMP, so this works on a clean clone. Each round runs the three one after another (a
drift of the machine hits all alike); the best of `repeat` rounds is kept. Both trees run with their
bytecode cached, as in an installed copy (PYTHONDONTWRITEBYTECODE unset, the cache under TMP via
PYTHONPYCACHEPREFIX, so none lands in the repo); `--no-bytecode` measures them compiling from source.

1. One-line log (the overlap warning): `dynspec verify LOG` into a pipe, this checkout vs the base.
   Target: ratio <= 1.00.
2. Big log (default 300 MiB, benchmarks/run.py's two appended launches, mostly `Decode batch`
   lines, warm in the page cache): `dynspec verify LOG` vs `rg -F -c` searching the classifier's
   literals in the same file. Target: <= 2.0x rg.
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.run import SEED, literals, make_big  # noqa: E402

PYTHON = os.environ.get("DYNSPEC_BENCH_PYTHON", sys.executable)


def materialize(commit: str, into: Path) -> None:
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", commit], capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)


def verify_cmd(tree: Path, log: Path, pycache) -> tuple[list, dict, Path]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX")}
    env["PYTHONPATH"] = str(tree)
    env.update({"PYTHONPYCACHEPREFIX": str(pycache)} if pycache else {"PYTHONDONTWRITEBYTECODE": "1"})
    return [PYTHON, "-m", "dynspec_cli", "verify", str(log)], env, tree


def once(cmd: list, env=None, cwd=None) -> tuple[float, float, int]:
    """(wall seconds, CPU seconds of the child, exit code)."""
    t = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, cwd=cwd)
    _, status, usage = os.wait4(p.pid, 0)
    return time.perf_counter() - t, usage.ru_utime + usage.ru_stime, os.waitstatus_to_exitcode(status)


def best_of(named: dict, repeat: int) -> dict:
    """name -> (best wall seconds, best CPU seconds, exit code): the commands run in alternation,
    after one warm-up each."""
    for cmd, env, cwd in named.values():
        once(cmd, env, cwd)  # bytecode written, page cache warm
    best = {k: (float("inf"), float("inf"), None) for k in named}
    for _ in range(repeat):
        for k, (cmd, env, cwd) in named.items():
            wall, cpu, rc = once(cmd, env, cwd)
            best[k] = (min(best[k][0], wall), min(best[k][1], cpu), rc)
    return best


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--size-mb", type=int, default=300)
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--base", default="41af396")
    ap.add_argument("--only", choices=["small", "big"])
    ap.add_argument("--no-bytecode", action="store_true", help="compile from source on every run")
    a = ap.parse_args()
    rg = shutil.which("rg")
    if rg is None:
        print("SKIPPED: ripgrep (rg) is not installed (apt-get install ripgrep)")
        return 2
    with tempfile.TemporaryDirectory(prefix="dynspec-startup-") as t:
        tmp = Path(t)
        base = tmp / "base"
        base.mkdir()
        materialize(a.base, base)
        home = tmp / "home"
        os.environ["DYNSPEC_HOME"] = str(home)
        pycache = None if a.no_bytecode else tmp / "pycache"
        ok_small = ok_big = True
        small = tmp / "one-line.log"
        small.write_text(SEED)
        if a.only != "big":
            ok_small = bench_small(small, base, pycache, a)
        if a.only != "small":
            ok_big = bench_big(tmp / "big.log", base, pycache, a, rg)
    return 0 if ok_small and ok_big else 1


def bench_small(small: Path, base: Path, pycache, a) -> bool:
    r = best_of({"now": verify_cmd(ROOT, small, pycache), "base": verify_cmd(base, small, pycache)}, a.repeat)
    (now, now_cpu, now_rc), (old, old_cpu, old_rc) = r["now"], r["base"]
    ok = now / old <= 1.00 and now_rc == old_rc == 1
    print(f"one-line log: this checkout {now*1000:.1f} ms, {a.base} {old*1000:.1f} ms -> ratio {now/old:.2f} "
          f"(target <= 1.00; best of {a.repeat}; CPU {now_cpu*1000:.1f} vs {old_cpu*1000:.1f} ms, {now_cpu/old_cpu:.2f}); "
          f"exit {now_rc}/{old_rc} (expect 1/1) {'PASS' if ok else 'FAIL'}")
    return ok


def bench_big(big: Path, base: Path, pycache, a, rg: str) -> bool:
    make_big(big, a.size_mb << 20)
    rg_cmd = [rg, "-F", "-c"] + sum((["-e", x] for x in literals()), []) + [str(big)]
    r = best_of({"now": verify_cmd(ROOT, big, pycache), "base": verify_cmd(base, big, pycache), "rg": (rg_cmd, None, None)},
                a.repeat)
    (now, _, now_rc), (old, _, old_rc), t_rg = r["now"], r["base"], r["rg"][0]
    ok = now <= 2.0 * t_rg and now_rc == old_rc == 1
    print(f"{a.size_mb} MiB log: this checkout {now*1000:.0f} ms, {a.base} {old*1000:.0f} ms, rg {t_rg*1000:.0f} ms "
          f"-> {now/t_rg:.2f}x rg (target <= 2.0), {a.base} {old/t_rg:.2f}x rg, this/{a.base} {now/old:.2f} "
          f"(best of {a.repeat}); exit {now_rc}/{old_rc} (expect 1/1) {'PASS' if ok else 'FAIL'}")
    return ok


if __name__ == "__main__":
    sys.exit(main())
