"""How the judge's claims compare with the hand labels of the real issue excerpts
(tests/fixtures/logs/issues/*.json): per claim, right / silent / wrong / both-null.

  python3 benchmarks/excerpt_claims.py [--from 31] [--to 99] [--details]

right: the label names a value and dynspec says the same. silent: the label names a value and dynspec
says null. wrong: dynspec says a value that differs from the label, or says one where the label is null
(an unsupported claim). both-null: neither says anything. Works on judges without `claims` (it then
reads the top-level fields, where `crashed`/`server_ready` are always booleans)."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.support.logs import judge_text  # noqa: E402

CLAIMS = ("crashed", "server_ready", "speculative_algorithm", "worker")


def claimed(v) -> dict:
    doc = v.to_json()
    c = doc.get("claims")
    if c:
        return {k: c[k]["value"] for k in CLAIMS}
    w = doc["worker"]
    return {"crashed": doc["crashed"], "server_ready": doc["server_ready"],
            "speculative_algorithm": doc["speculative_algorithm"],
            "worker": w["class"] or (w["module"] and w["module"].rsplit(".", 1)[-1] + ".py")}


def labelled(exp: dict) -> dict:
    w = exp.get("worker_class") or (exp.get("worker_module") and exp["worker_module"].rsplit(".", 1)[-1] + ".py")
    return {"crashed": exp.get("crashed"), "server_ready": exp.get("server_ready"),
            "speculative_algorithm": exp.get("speculative_algorithm"), "worker": w}


def grade(label, value) -> str:
    if label is None:
        return "both-null" if value is None else "wrong"
    if value is None:
        return "silent"
    return "right" if value == label else "wrong"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--from", dest="lo", type=int, default=31)
    ap.add_argument("--to", dest="hi", type=int, default=99)
    ap.add_argument("--details", action="store_true")
    a = ap.parse_args()
    table = {k: {"right": 0, "silent": 0, "wrong": 0, "both-null": 0} for k in CLAIMS}
    n = 0
    for meta in sorted((ROOT / "tests/fixtures/logs/issues").glob("*.json")):
        if not a.lo <= int(meta.name[:2]) <= a.hi:
            continue
        n += 1
        exp = json.loads(meta.read_text())["expected"]
        v = judge_text(meta.with_suffix(".log").read_bytes())
        got, want = claimed(v), labelled(exp)
        for k in CLAIMS:
            g = grade(want[k], got[k])
            table[k][g] += 1
            if a.details and g in ("wrong", "silent"):
                print(f"  {meta.stem[:50]:50} {k:22} label={want[k]!r:22} dynspec={got[k]!r} ({g})")
        if v.verdict == "live":
            print(f"  FALSE LIVE: {meta.stem}")
    print(f"{n} excerpts")
    print(f"{'claim':22} {'right':>6} {'silent':>7} {'wrong':>6} {'both-null':>10}")
    for k, row in table.items():
        print(f"{k:22} {row['right']:6} {row['silent']:7} {row['wrong']:6} {row['both-null']:10}")


if __name__ == "__main__":
    main()
