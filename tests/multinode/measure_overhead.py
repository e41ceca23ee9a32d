#!/usr/bin/env python3
"""Wall time of `dynspec group launch` (start + watch to live) for 4 nodes against 1 node, on the
GPU-server stand-in in network namespaces (root, iproute2, openssh-server). Prints only.

    python3 -m tests.multinode.measure_overhead [--repeat 3]
"""
from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
import uuid
from pathlib import Path

from tests.multinode.helpers import cleanup_group, group, write_group_profile
from tests.support.netns import NetnsLab, netns_unavailable


def once(lab: NetnsLab, d: Path, n: int) -> float:
    name = f"ovh-{uuid.uuid4().hex[:6]}"
    prof = write_group_profile(d / f"{name}.toml", name, [lab.alias(i) for i in range(n)])
    try:
        t0 = time.monotonic()
        r = group(lab, "launch", str(prof), "--no-preflight", "--no-probe", "--json")
        took = time.monotonic() - t0
        if r.returncode != 0 or json.loads(r.stdout)["verdict"] != "live":
            raise SystemExit(f"{n} nodes: exit {r.returncode}: {r.stderr[-1000:]}")
        group(lab, "stop", name)
        return took
    finally:
        cleanup_group(name)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    why = netns_unavailable()
    if why:
        raise SystemExit(why)
    d = Path(tempfile.mkdtemp(prefix="dynspec-ovh-"))
    lab = NetnsLab(d / "lab", 4)
    try:
        lab.start()
        one = [once(lab, d, 1) for _ in range(a.repeat)]
        four = [once(lab, d, 4) for _ in range(a.repeat)]
    finally:
        lab.stop()
    m1, m4 = statistics.median(one), statistics.median(four)
    print(f"group launch to live (median of {a.repeat}): 1 node {m1:.2f}s, 4 nodes {m4:.2f}s, "
          f"ratio {m4 / m1:.2f}x (target <= 1.5x)")


if __name__ == "__main__":
    main()
