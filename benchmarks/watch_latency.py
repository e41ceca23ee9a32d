"""Time from an evidence line being written on the host to dynspec's verdict, in process (the
real follower, the real judge), locally and over SSH on loopback; and the CPU cost of watching
an idle log for a minute. Baseline measured in the same run: `tail -F | grep --line-buffered`
(local) and `ssh host 'tail -F log' | grep --line-buffered` (SSH).

  python3 benchmarks/watch_latency.py [--repeat 15] [--idle 60]
"""
from __future__ import annotations

import argparse
import resource
import select
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

SEED = ("[2026-02-27 19:49:17] WARNING server_args.py:2386: Overlap scheduler is disabled when spec v2 is off or using "
        "unsupported speculative algorithm. You can set env SGLANG_ENABLE_SPEC_V2=True to enable the experimental overlap scheduler. \n")
FILLER = "[2026-02-27 19:49:16] Attention backend not specified. Use triton backend by default.\n"


def dynspec_latency(host, path: Path) -> float:
    from dynspec_cli import engines
    from dynspec_cli.knowledge.features import load_feature
    from dynspec_cli.verdict.pipeline import Pipeline, judge_stream

    path.write_text(FILLER)
    feeder = Pipeline(load_feature(None), engine=engines.get(engines.DEFAULT))
    events = host.follow(str(path), 0)
    ready = threading.Event()
    t_written = [0.0]

    def on_update(v):
        ready.set()

    def writer():
        ready.wait(10)
        time.sleep(0.3)
        with open(path, "a") as fh:
            t_written[0] = time.perf_counter()
            fh.write(SEED)
            fh.flush()

    threading.Thread(target=writer, daemon=True).start()
    v, why = judge_stream(events, feeder, timeout=20, on_update=on_update)
    t = time.perf_counter() - t_written[0]
    events.close()
    assert v.verdict == "dead", (v.verdict, why)
    return t


def reaction_time(cmd: list[str], path: Path, line: str = SEED, *, start: str = FILLER, ready_wait: float = 1.0) -> float:
    """Seconds from `line` being appended to `path` to the first output of `cmd` (already following it)."""
    path.write_text(start)
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    time.sleep(ready_wait)
    with open(path, "a") as fh:
        t0 = time.perf_counter()
        fh.write(line)
        fh.flush()
    r, _, _ = select.select([proc.stdout], [], [], 10)
    t = time.perf_counter() - t0 if r else float("inf")
    proc.kill()
    proc.wait()
    return t


def idle_cpu(host, path: Path, seconds: float) -> float:
    """CPU seconds (this process + the follower it starts) per minute of watching an idle log."""
    from dynspec_cli import engines
    from dynspec_cli.knowledge.features import load_feature
    from dynspec_cli.verdict.pipeline import Pipeline, judge_stream

    path.write_text(FILLER)
    feeder = Pipeline(load_feature(None), engine=engines.get(engines.DEFAULT))
    r0, c0 = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    events = host.follow(str(path), 0)
    judge_stream(events, feeder, timeout=seconds)
    events.close()
    time.sleep(0.5)
    r1, c1 = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime) + (c1.ru_utime + c1.ru_stime - c0.ru_utime - c0.ru_stime)
    return cpu * 60.0 / seconds


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument("--idle", type=float, default=60.0)
    a = ap.parse_args()
    from dynspec_cli.transport import LocalHost
    from tests.support.sshd import make_lab

    ok = True
    with tempfile.TemporaryDirectory(prefix="dynspec-watch-bench-") as t:
        tmp = Path(t)
        log = tmp / "server.log"
        local = LocalHost()
        ds = [dynspec_latency(local, log) for _ in range(a.repeat)]
        base = [reaction_time(["sh", "-c", f"tail -n0 -F {log} 2>/dev/null | grep --line-buffered 'Overlap scheduler'"], log)
                for _ in range(a.repeat)]
        md, mb = statistics.median(ds), statistics.median(base)
        ok &= md <= 0.050
        print(f"watch local: verdict {md*1000:.1f} ms after the line is written (median of {a.repeat}; target <= 50 ms); "
              f"tail -F | grep {mb*1000:.1f} ms -> {md/mb:.1f}x {'PASS' if md <= 0.050 else 'FAIL'}")
        lab = make_lab(tmp / "lab")
        try:
            ssh = lab.host("dut")
            ds = [dynspec_latency(ssh, log) for _ in range(a.repeat)]
            sshcmd = ["ssh", "-F", str(lab.ssh_config), "dut", f"tail -n0 -F {log}"]
            base = [reaction_time(["sh", "-c", " ".join(sshcmd) + " | grep --line-buffered 'Overlap scheduler'"], log)
                    for _ in range(a.repeat)]
            md, mb = statistics.median(ds), statistics.median(base)
            ok &= md <= 0.100
            print(f"watch ssh:   verdict {md*1000:.1f} ms after the line is written (median of {a.repeat}; target <= 100 ms); "
                  f"ssh tail -F | grep {mb*1000:.1f} ms -> {md/mb:.1f}x {'PASS' if md <= 0.100 else 'FAIL'}")
            if a.idle > 0:
                print(f"idle watch CPU: local {idle_cpu(local, log, a.idle):.2f} CPU-s per minute, "
                      f"ssh {idle_cpu(ssh, log, a.idle):.2f} CPU-s per minute (watching a log that does not change)")
            ssh.close()
        finally:
            lab.stop()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
