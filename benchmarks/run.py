"""dynspec's performance targets, each printed with its baseline measured in the same run.

  python3 benchmarks/run.py [--size-mb 1024] [--repeat 15]

1. Huge log (default 1 GiB: two appended launches, mostly `Decode batch` lines): wall time of
   `dynspec verify --json` vs `rg -F` searching the same literals in the same (warm) file.
   Target: <= 2x rg, peak RSS <= 100 MB.
2. Small log: `dynspec verify` end to end, into a pipe (as in a benchmark script) and on a terminal
   (drawn with rich). Target: <= 0.2 s (baseline: the same python's `-c pass`).
3. `verify --follow`: time from the evidence line being appended to the verdict on stdout.
   Target: median <= 50 ms (baseline: `tail -F | grep --line-buffered` on the same file).
"""
from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
DYNSPEC = [os.environ.get("DYNSPEC_BENCH_PYTHON", sys.executable), "-m", "dynspec_cli"]
SEED = ("[2026-02-27 19:49:17] WARNING server_args.py:2386: Overlap scheduler is disabled when spec v2 is off or using "
        "unsupported speculative algorithm. You can set env SGLANG_ENABLE_SPEC_V2=True to enable the experimental overlap scheduler. \n")


def make_big(path: Path, size: int) -> None:
    from dynspec_cli.engines.sglang.knowledge import knowledge
    live = (ROOT / "configs" / "demo" / "seed-live.log").read_text()
    dead = (ROOT / "configs" / "demo" / "seed-dead.log").read_text()
    dec = ("[2026-02-27 20:59:17 TP0] Decode batch, #running-req: 37, #token: 81234, token usage: 0.12, accept len: 2.81, "
           "accept rate: 0.45, cuda graph: True, gen throughput (token/s): 1834.22, #queue-req: 0\n").encode()
    block = dec * 4096
    with open(path, "wb") as fh:
        for head in (live, dead):  # launch 1 (live), launch 2 (dead): the newest must be judged
            fh.write(head.encode())
            target = fh.tell() + size // 2 - len(head)
            while fh.tell() + len(block) < target:
                fh.write(block)
    knowledge()


def literals() -> list[str]:
    from dynspec_cli.engines.sglang.rules import Classifier
    from dynspec_cli.knowledge.features import load_feature
    from dynspec_cli.engines.sglang.knowledge import knowledge
    return Classifier(knowledge(), load_feature(None)).literals


def timed(cmd: list[str], repeat: int) -> tuple[float, int, int]:
    times, rc = [], 0
    for _ in range(repeat):
        t = time.perf_counter()
        rc = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode
        times.append(time.perf_counter() - t)
    return statistics.median(times), rc, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss


def bench_big(tmp: Path, size_mb: int, repeat: int) -> bool:
    rg = shutil.which("rg")
    if rg is None:
        print("big-log: SKIPPED: ripgrep (rg) is not installed (apt-get install ripgrep)")
        return False
    path = tmp / "big.log"
    make_big(path, size_mb << 20)
    subprocess.run(["cat", str(path)], stdout=subprocess.DEVNULL)  # warm the page cache for both
    rg_cmd = [rg, "-F", "-c"] + sum((["-e", x] for x in literals()), []) + [str(path)]
    t_rg, _, _ = timed(rg_cmd, repeat)
    # RSS of dynspec alone: run it in a fresh child and read its own peak
    probe = subprocess.run([sys.executable, "-c",
                            "import resource,subprocess,sys; subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL);"
                            "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)"] + DYNSPEC + ["verify", "--json", str(path)],
                           capture_output=True, text=True)
    rss_mb = int(probe.stdout.strip()) / 1024
    t_ds, rc, _ = timed(DYNSPEC + ["verify", "--json", str(path)], repeat)
    ok = t_ds <= 2 * t_rg and rss_mb <= 100 and rc == 1
    print(f"big-log ({size_mb} MiB, 2 launches): dynspec {t_ds*1000:.0f} ms vs rg {t_rg*1000:.0f} ms "
          f"-> ratio {t_ds/t_rg:.2f}x (target <= 2x); peak RSS {rss_mb:.0f} MB (target <= 100); verdict exit {rc} (expect 1) "
          f"{'PASS' if ok else 'FAIL'}")
    path.unlink()
    return ok


def on_a_terminal(cmd: list[str], repeat: int) -> float:
    """Median wall time with stdout on a pseudo-terminal (the report is drawn with rich there)."""
    import pty

    times = []
    for _ in range(repeat):
        master, slave = pty.openpty()
        t = time.perf_counter()
        p = subprocess.Popen(cmd, stdout=slave, stderr=subprocess.DEVNULL)
        os.close(slave)
        while True:  # drain the terminal so the child never blocks on it
            try:
                if not os.read(master, 65536):
                    break
            except OSError:  # EIO: the child closed its end
                break
        p.wait()
        times.append(time.perf_counter() - t)
        os.close(master)
    return statistics.median(times)


def bench_small(tmp: Path, repeat: int) -> bool:
    path = tmp / "small.log"
    path.write_text(SEED)
    t_py, _, _ = timed([DYNSPEC[0], "-c", "pass"], repeat)
    t_ds, rc, _ = timed(DYNSPEC + ["verify", str(path)], repeat)
    t_tty = on_a_terminal(DYNSPEC + ["verify", str(path)], repeat)
    ok = max(t_ds, t_tty) <= 0.2 and rc == 1
    print(f"small-log: dynspec verify {t_ds*1000:.0f} ms end to end into a pipe, {t_tty*1000:.0f} ms on a terminal "
          f"(target <= 200 ms); the same python's `-c pass` {t_py*1000:.0f} ms -> {t_ds/t_py:.1f}x / {t_tty/t_py:.1f}x "
          f"the bare interpreter {'PASS' if ok else 'FAIL'}")
    return ok


def bench_follow(tmp: Path, repeat: int) -> bool:
    path = tmp / "follow.log"
    from benchmarks.watch_latency import reaction_time

    ds = [reaction_time(DYNSPEC + ["verify", "--follow", "--json", str(path)], path, SEED, start="", ready_wait=2.5)
          for _ in range(repeat)]
    base = [reaction_time(["sh", "-c", f"tail -n +1 -F {path} 2>/dev/null | grep --line-buffered 'Overlap scheduler'"], path, SEED, start="")
            for _ in range(repeat)]
    md, mb = statistics.median(ds), statistics.median(base)
    ok = md <= 0.050
    print(f"follow: verdict {md*1000:.1f} ms after the line is appended (median of {repeat}; target <= 50 ms); "
          f"tail -F | grep {mb*1000:.1f} ms {'PASS' if ok else 'FAIL'}")
    return ok


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--size-mb", type=int, default=1024)
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--only", choices=["big", "small", "follow"])
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="dynspec-bench-") as t:
        tmp = Path(t)
        results = []
        if a.only in (None, "small"):
            results.append(bench_small(tmp, max(a.repeat, 10)))
        if a.only in (None, "follow"):
            results.append(bench_follow(tmp, a.repeat))
        if a.only in (None, "big"):
            results.append(bench_big(tmp, a.size_mb, a.repeat))
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
