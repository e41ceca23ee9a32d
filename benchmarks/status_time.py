"""`dynspec status --host` for many run records over a real sshd on loopback (tests/support/sshd.py).

  python3 benchmarks/status_time.py [--records 100] [--repeat 5]

Target: under 2 s for 100 records, end to end (`dynspec status --host dut --json`: interpreter
start, SSH connect, the one remote script, judging every log). Baseline measured in the same run:
the per-record loop status used before (records listed, then for each record one call each for the
record, its group's liveness, its log's size and its log: `control.status_per_call`), on the same
warm connection, next to the one-round-trip `control.status` on that connection.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
DYNSPEC = [os.environ.get("DYNSPEC_BENCH_PYTHON", sys.executable), "-m", "dynspec_cli"]


def write_records(home: Path, n: int, sleeps: list) -> None:
    runs = home / "runs"
    runs.mkdir(parents=True)
    logs = [ROOT / "configs" / "demo" / "seed-live.log", ROOT / "configs" / "demo" / "seed-dead.log"]
    for i in range(n):
        name = f"bench-{i:03d}"
        log = home / f"{name}.log"
        shutil.copyfile(logs[i % 2], log)
        token, pid, start = uuid.uuid4().hex, 2 ** 22 + i, None
        if i % 4 == 0:  # a quarter alive: real processes carrying their launch token
            p = subprocess.Popen(["sleep", "600"], start_new_session=True, env={**os.environ, "DYNSPEC_RUN_ID": token})
            sleeps.append(p)
            pid = p.pid
            start = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
        rec = {"name": name, "host": "dut", "pid": pid, "pgid": pid, "argv": ["sleep", "600"], "env": {},
               "log": str(log), "log_offset": 0, "port": 30000 + i, "started_at": 1000.0 + i,
               "feature": "dynamic-spec-disable", "leader_start": start, "token": token,
               "stopped_at": None if start else 2000.0 + i}
        (runs / f"{name}.json").write_text(json.dumps(rec))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=100)
    ap.add_argument("--repeat", type=int, default=5)
    a = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="dynspec-status-bench-"))
    home = tmp / "home"
    os.environ["DYNSPEC_HOME"] = str(home)  # before the sshd starts: its sessions get it (SetEnv)
    from tests.support.sshd import make_lab

    sleeps: list = []
    lab = make_lab(tmp / "lab")
    try:
        write_records(home, a.records, sleeps)
        from dynspec_cli.knowledge.features import load_feature
        from dynspec_cli.run import control

        cli = DYNSPEC + ["status", "--host", "dut", "--json", "--ssh-config", str(lab.ssh_config),
                         "--known-hosts", str(lab.known_hosts)]
        e2e = []
        for _ in range(a.repeat):
            t = time.perf_counter()
            r = subprocess.run(cli, capture_output=True, text=True)
            e2e.append(time.perf_counter() - t)
            assert r.returncode == 0 and len(json.loads(r.stdout)["runs"]) == a.records, r.stderr[-500:]
        host = lab.host("dut")
        try:
            control.status(host, load_feature)  # connect, warm
            one, per = [], []
            for _ in range(a.repeat):
                t = time.perf_counter()
                rows = control.status(host, load_feature)
                one.append(time.perf_counter() - t)
                t = time.perf_counter()
                base = control.status_per_call(host, load_feature)
                per.append(time.perf_counter() - t)
            assert [(r["name"], r["alive"], r["verdict"]) for r in rows] == \
                   [(r["name"], r["alive"], r["verdict"]) for r in base]
        finally:
            host.close()
        md_e2e, md_one, md_per = (statistics.median(x) for x in (e2e, one, per))
        print(f"status --host over sshd, {a.records} records: end to end {md_e2e:.2f} s (median of {a.repeat}; "
              f"target < 2 s) [{'OK' if md_e2e < 2 else 'MISSED'}]")
        print(f"  on a warm connection: one round trip {md_one:.3f} s vs per-record loop {md_per:.3f} s "
              f"(baseline): {md_per / md_one:.1f}x faster")
    finally:
        for p in sleeps:
            p.kill()
            p.wait()
        lab.stop()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
