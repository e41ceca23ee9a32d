"""Mine every vllm release of configs/vllm/releases.toml for log calls in vllm/config/ and
vllm/v1/spec_decode/ that say a speculative option is disabled, ignored, removed, overridden or
falling back (the same words and the same ast reading as tests/tools/mine_downgrades.py, which
does this for sglang).

    python -m tests.tools.mine_vllm_warnings                # all releases, a summary
    python -m tests.tools.mine_vllm_warnings 0.33.0 --all   # one release, every call with its condition
    python -m tests.tools.mine_vllm_warnings --unhandled    # only calls no data file accounts for

The source comes from the published wheels, member by member (tests/support/vllm_wheels.py), and
is never imported. A call must be accounted for by a row of configs/vllm/log_lines.toml (what the
line proves: its `text` or `pattern`) or of configs/vllm/warnings_reviewed.toml (read and judged
not to change which proposer or runner runs, with the reason);
tests/knowledge/test_vllm_warnings_mined.py fails on any other.
"""
from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Optional

if __package__ in (None, ""):  # run as a file: make `tests` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import msgspec  # noqa: E402

from dynspec_cli.knowledge.tables import load_toml  # noqa: E402
from tests.support import vllm_wheels  # noqa: E402
from tests.tools.mine_downgrades import Call, calls_in_source, sample  # noqa: E402

SEARCHED = ("vllm/config/", "vllm/v1/spec_decode/")
REVIEWED = Path(__file__).resolve().parents[2] / "configs" / "vllm" / "warnings_reviewed.toml"


class Reviewed(msgspec.Struct, forbid_unknown_fields=True):
    file: str
    text: str
    reason: str
    seen: str = ""  # the releases it was found in when reviewed (information only)


class ReviewedFile(msgspec.Struct, forbid_unknown_fields=True):
    reviewed: list[Reviewed] = []


def reviewed_calls() -> list[Reviewed]:
    return load_toml(REVIEWED, ReviewedFile).reviewed


def mine(version: str) -> list[Call]:
    """Every such call in one release's vllm/config/ and vllm/v1/spec_decode/."""
    root = vllm_wheels.members(version)
    out: list[Call] = []
    for p in sorted((root / "vllm").rglob("*.py")):
        rel = p.relative_to(root).as_posix()
        if rel.startswith(SEARCHED):
            out += calls_in_source(rel, p.read_bytes())
    return out


def accounted_by(version: str, call: Call, k=None, reviewed=None) -> Optional[str]:
    """'log_lines.toml:<id>' or 'reviewed:<n>' for the row that accounts for the call; None when
    none does. A log_lines row accounts for it when its pattern matches a message the call can
    produce within the row's releases (or its `text` is the call's template)."""
    from dynspec_cli.engines.vllm.knowledge import knowledge

    k = k or knowledge()
    reviewed = reviewed if reviewed is not None else reviewed_calls()
    msg = sample(call.template)
    for row, rx in k.matchers:
        if row.versions and not k.in_range(version, row.versions):
            continue
        if rx.search(msg) or (row.text and row.text.replace("%s", "{}").replace("%d", "{}") == call.template):
            return f"log_lines.toml:{row.id}"
    for i, r in enumerate(reviewed):
        if r.file == call.file and r.text == call.text:
            return f"reviewed:{i}"
    return None


def main(argv: Optional[list[str]] = None) -> int:
    from dynspec_cli.engines.vllm.knowledge import knowledge

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("versions", nargs="*", help="releases (default: all of configs/vllm/releases.toml)")
    ap.add_argument("--all", action="store_true", help="print every call with its condition")
    ap.add_argument("--unhandled", action="store_true", help="print only calls no data file accounts for")
    a = ap.parse_args(argv)
    k = knowledge()
    rows, totals = [], {"calls": 0, "log_lines": 0, "reviewed": 0, "unhandled": 0}
    for v in a.versions or k.releases:
        calls = mine(v)
        counts = {"log_lines": 0, "reviewed": 0, "unhandled": 0}
        for c in calls:
            by = accounted_by(v, c, k)
            counts[by.split(":")[0].replace(".toml", "") if by else "unhandled"] += 1
            if a.all or (a.unhandled and by is None):
                rows.append({"version": v, **asdict(c), "accounted_by": by})
        totals["calls"] += len(calls)
        for key, n in counts.items():
            totals[key] += n
        print(f"{v:10} {len(calls):3} calls: {counts['log_lines']:3} log_lines.toml, {counts['reviewed']:3} reviewed, "
              f"{counts['unhandled']:3} unhandled")
    for r in rows:
        print(f"\n{r['version']} {r['file']}:{r['line']} {r['func']}  [{r['accounted_by'] or 'UNHANDLED'}]\n"
              f"    {r['text']!r}\n    if {r['condition']}")
    print(f"\ntotal {json.dumps(totals)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
