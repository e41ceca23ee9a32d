"""How `dynspec verify --json` compares with the hand labels of the real excerpts
(tests/fixtures/logs/issues/ and tests/fixtures/logs/vllm/): per engine and claim,
right / silent / wrong / both-null, read as a user reads them.

  python3 benchmarks/excerpt_claims.py [--only issue-19] [--top-level] [--details]

Each log is judged as `dynspec verify --json LOG` judges it: engine `auto`, the default feature.
right: the label names a value and dynspec says the same. silent: the label names a value and
dynspec says null. wrong: dynspec says a value that differs from the label, or says one where the
label is null (an unsupported claim). both-null: neither says anything. A claim is read from
`claims` when the JSON has it, else from the top-level field; `--top-level` reads the top-level
fields (what a benchmark script reads) even when `claims` is there. `--only issue-19` grades only
the excerpts labelled for issue 19."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from dynspec_cli.knowledge.features import load_feature  # noqa: E402
from dynspec_cli import engines  # noqa: E402
from dynspec_cli.verdict.pipeline import judge_file  # noqa: E402

CLAIMS = ("crashed", "server_ready", "speculative_algorithm", "worker", "speculative")
TOP = {"crashed": "crashed", "server_ready": "server_ready", "speculative_algorithm": "speculative_algorithm",
       "speculative": "speculative"}


def claimed(doc: dict, top_level: bool) -> dict:
    c = doc.get("claims") or {}
    out = {}
    for k in CLAIMS:
        if c.get(k) is not None and not (top_level and k in TOP):
            out[k] = c[k]["value"]
        elif k == "worker":
            w = doc.get("worker") or {}
            out[k] = w.get("class")
        else:
            out[k] = doc.get(TOP[k])
    return out


def labelled(exp: dict, doc: dict) -> dict:
    return {"crashed": exp.get("crashed"), "server_ready": exp.get("server_ready"),
            "speculative_algorithm": exp.get("speculative_algorithm", exp.get("speculative_method")),
            "worker": exp.get("worker_class", exp.get("worker")),
            "speculative": exp.get("speculative", doc.get("speculative_enabled"))}


def grade(label, value) -> str:
    if label is None:
        return "both-null" if value is None else "wrong"
    if value is None:
        return "silent"
    return "right" if value == label else "wrong"


def judge(log: Path) -> dict:
    feature = load_feature(None)
    engine = engines.resolve("auto", str(log), feature)
    return judge_file(str(log), feature, engine=engines.get(engine)).to_json() | {"_engine": engine}


def cases(only: str | None):
    for sub, engine in (("issues", "sglang"), ("vllm", "vllm")):
        for meta in sorted((ROOT / "tests/fixtures/logs" / sub).glob("*.json")):
            doc = json.loads(meta.read_text())
            if only == "issue-19" and "issue 19" not in doc.get("labelled_by", ""):
                continue
            yield engine, meta, doc


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", choices=["issue-19"])
    ap.add_argument("--top-level", action="store_true")
    ap.add_argument("--details", action="store_true")
    a = ap.parse_args()
    table: dict = {}
    n: dict = {}
    false_live = []
    for engine, meta, doc in cases(a.only):
        exp = doc["expected"]
        v = judge(meta.with_suffix(".log"))
        got, want = claimed(v, a.top_level), labelled(exp, doc)
        n[engine] = n.get(engine, 0) + 1
        if v["_engine"] != engine:
            print(f"  ENGINE {meta.stem[:50]}: {v['_engine']} (label {engine})")
        for k in CLAIMS:
            if k == "speculative" and "speculative" not in exp and "speculative_enabled" not in doc:
                continue
            g = grade(want[k], got[k])
            row = table.setdefault(engine, {}).setdefault(k, {"right": 0, "silent": 0, "wrong": 0, "both-null": 0})
            row[g] += 1
            if a.details and g in ("wrong", "silent"):
                print(f"  {meta.stem[:50]:50} {k:22} label={want[k]!r:16} dynspec={got[k]!r} ({g})")
        if v["verdict"] == "live":
            false_live.append(meta.stem)
    for engine, rows in table.items():
        print(f"{engine}: {n[engine]} excerpts")
        print(f"  {'claim':22} {'right':>6} {'silent':>7} {'wrong':>6} {'both-null':>10}")
        for k, row in rows.items():
            print(f"  {k:22} {row['right']:6} {row['silent']:7} {row['wrong']:6} {row['both-null']:10}")
    print(f"false live: {len(false_live)} {false_live or ''}")


if __name__ == "__main__":
    main()
