"""The per-hunk probe's cost on decode throughput, from what stage `hunkcost` of run.sh gathered. Stdlib only.

    python hunkcost_summary.py hunkcost.txt [--log NAME=PATH ...]

hunkcost.txt holds one line per round and server, `NAME cCONC round K {throughput.py's JSON}`. The servers:
`hunks` (launched with --patch: the probe instruments every hunk), `bare` (--no-probe) and, when present,
`bare2`, a second probe-less server of the same build: bare2/bare is the floor of what two servers differ by
with no probe at all (an A/A control, measured in the same run).

Why ratios per round: the rounds of one concurrency run back to back in a rotating order, so a drift of the
machine (clocks, the other servers' idle loops) moves both sides of a round's ratio alike. The mean of those
ratios gets a 95% t-interval; the probe's cost is under 1% when the whole interval lies above 0.99.
--log NAME=PATH adds the servers' own measure: the median `gen throughput (token/s)` of the Decode batch
lines at `#running-req` equal to the concurrency (the first line after an idle gap reads near zero and
is dropped by taking the median).
"""
from __future__ import annotations

import argparse
import json
import re
import statistics
import sys

# two-sided 95% Student t quantiles, df 1..30 (beyond: the normal's 1.96)
T95 = [12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145, 2.131,
       2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042]
DECODE = re.compile(r"Decode batch, #running-req: (\d+),.*gen throughput \(token/s\): ([\d.]+)")


def interval(values: list[float]) -> tuple[float, float, float]:
    m = statistics.fmean(values)
    if len(values) < 2:
        return m, float("nan"), float("nan")
    half = (T95[len(values) - 2] if len(values) <= 31 else 1.96) * statistics.stdev(values) / len(values) ** 0.5
    return m, m - half, m + half


def read_rounds(path: str) -> dict:
    """{conc: {round: {name: tokens_per_s}}}"""
    out: dict = {}
    for line in open(path, encoding="utf-8"):
        if not line.strip():
            continue
        name, conc, _, k, blob = line.split(" ", 4)
        out.setdefault(conc, {}).setdefault(int(k), {})[name] = json.loads(blob)["tokens_per_s"]
    return out


def decode_medians(path: str) -> dict:
    by_batch: dict = {}
    for line in open(path, encoding="utf-8", errors="replace"):
        m = DECODE.search(line)
        if m:
            by_batch.setdefault(int(m.group(1)), []).append(float(m.group(2)))
    return {n: (statistics.median(v), len(v)) for n, v in by_batch.items()}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("rounds")
    ap.add_argument("--log", action="append", default=[], metavar="NAME=PATH")
    a = ap.parse_args(argv)
    verdicts = []
    for conc, rounds in read_rounds(a.rounds).items():
        full = [r for _, r in sorted(rounds.items()) if "hunks" in r and "bare" in r]
        if not full:
            continue
        names = [n for n in ("hunks", "bare", "bare2") if all(n in r for r in full)]
        means = ", ".join(f"{n} {statistics.fmean(r[n] for r in full):.0f}" for n in names)
        print(f"{conc}: {len(full)} rounds; mean tok/s {means}")
        for n in names[:1] + names[2:]:
            m, lo, hi = interval([r[n] / r["bare"] for r in full])
            med = statistics.median(r[n] / r["bare"] for r in full)
            label = "per-hunk probe / no probe" if n == "hunks" else "no probe / no probe (A/A floor)"
            print(f"  {label}: mean ratio {m:.4f}, 95% CI [{lo:.4f}, {hi:.4f}], median {med:.4f}")
            if n == "hunks":
                verdicts.append((conc, lo))
    for spec in a.log:
        name, path = spec.split("=", 1)
        meds = decode_medians(path)
        shown = ", ".join(f"batch {n}: {v:.0f} tok/s over {c} lines" for n, (v, c) in sorted(meds.items()) if c >= 5)
        print(f"server {name}'s Decode batch lines (median gen throughput): {shown or 'none'}")
    for conc, lo in verdicts:
        if lo != lo:  # NaN: a single round has no interval
            print(f"{conc}: one round only, no interval: more rounds are needed to judge the 1% bar")
        else:
            bar = "under 1%" if lo >= 0.99 else "not shown to be under 1%"
            print(f"{conc}: the per-hunk probe's cost is {bar} (lower end of the ratio's 95% interval {lo:.4f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
