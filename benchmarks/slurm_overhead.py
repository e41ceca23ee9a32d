"""What Slurm adds to a two-node launch: `dynspec launch` of a `scheduler = "slurm"` profile (sbatch on
the login host, one srun step, the GPU-server stand-in on each node) from submit to the first verdict,
against the same two nodes started by `dynspec group launch` without a scheduler. The scheduler's own
start-up (sbatch, the job waiting to be scheduled, srun starting the tasks) is named separately:

  sbatch        the `sbatch --parsable` call itself
  to RUNNING    submit -> squeue says RUNNING (scheduling, node allocation, the batch script's start)
  to first log  submit -> the first byte of a node's server log (adds srun's task launch, node.sh)
  to verdict    submit -> the verdict (live: every node's marker, node 0 ready)

Needs root and Debian's slurmctld, slurmd, slurm-client, munge: it starts its own private two-node
cluster (tests/support/slurm.py) and stops it at the end. Prints only.

  python3 benchmarks/slurm_overhead.py [--repeat 3]
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

from tests.multinode.helpers import write_group_profile  # noqa: E402
from tests.run.helpers import DYNSPEC, free_port  # noqa: E402
from tests.slurm.helpers import write_slurm_profile  # noqa: E402
from tests.support.slurm import start_cluster, stop_cluster  # noqa: E402


def run(args, env) -> tuple[float, subprocess.CompletedProcess]:
    t = time.perf_counter()
    r = subprocess.run(DYNSPEC + args, capture_output=True, text=True, env=env, timeout=300)
    return time.perf_counter() - t, r


def slurm_once(d: Path, env) -> dict:
    name = f"bs-{uuid.uuid4().hex[:6]}"
    prof = write_slurm_profile(d / f"{name}.toml", name)
    took, r = run(["launch", str(prof), "--no-preflight", "--no-probe", "--json"], env)
    doc = json.loads(r.stdout)
    if doc["verdict"] != "live":
        raise SystemExit(f"slurm launch: {doc['verdict']}: {doc['message']}")
    run(["stop", name], env)
    t = doc["timings"]
    # the command's wall time minus the watch's own clock: profile loading, sbatch, the record
    return {"wall": took, "before_watch": took - t["to_verdict"], **t}


def group_once(d: Path, env) -> float:
    name = f"bg-{uuid.uuid4().hex[:6]}"
    prof = write_group_profile(d / f"{name}.toml", name, ["local", "local"], nodes={1: {"flags": {"port": free_port()}}})
    took, r = run(["group", "launch", str(prof), "--no-preflight", "--no-probe", "--json"], env)
    doc = json.loads(r.stdout)
    if doc["verdict"] != "live":
        raise SystemExit(f"group launch: {doc['verdict']}: {doc.get('message')} {r.stderr[-500:]}")
    run(["group", "stop", name], env)
    return took


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="dynspec-bench-slurm-"))
    home = root / "home"
    home.mkdir()
    cl = start_cluster(root / "cluster")
    env = {**os.environ, "SLURM_CONF": str(cl.conf), "HOME": str(home)}
    try:
        d = root / "profiles"
        d.mkdir()
        slurm = [slurm_once(d, env) for _ in range(a.repeat)]
        plain = [group_once(d, env) for _ in range(a.repeat)]
    finally:
        left = stop_cluster(cl)
    med = {k: statistics.median(x[k] for x in slurm) for k in slurm[0]}
    g = statistics.median(plain)
    print(f"two nodes, stand-in at STANDIN_PACE=0.01, median of {a.repeat}:")
    print(f"  dynspec group launch (no scheduler), start -> live:      {g:6.2f} s")
    print(f"  dynspec launch, scheduler = slurm, command -> live:       {med['wall']:6.2f} s "
          f"(+{med['wall'] - g:.2f} s, {med['wall'] / g:.2f}x)")
    print("  of which Slurm's own start-up:")
    print(f"    before watching (profile, probe dir, sbatch, record):   {med['before_watch']:6.2f} s")
    print(f"    submit -> RUNNING (scheduling, allocation):             {med['to_running']:6.2f} s")
    print(f"    submit -> first server log byte (srun tasks, node.sh):  {med['to_first_log']:6.2f} s")
    print(f"  submit -> verdict (live):                                 {med['to_verdict']:6.2f} s")
    print(f"  server start-up and judging after the first log byte:     {med['to_verdict'] - med['to_first_log']:6.2f} s")
    if left:
        print(f"  WARNING: left in squeue: {left}")


if __name__ == "__main__":
    main()
