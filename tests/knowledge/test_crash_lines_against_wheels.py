"""The crash and serving lines of log_lines.toml that sglang itself writes but not in every
release (they stay in the table for logs of the releases that do, and of older ones): each is in
the server's source of exactly the releases a person found by reading the wheels, with a string
literal that renders to a line the row's pattern matches."""
from __future__ import annotations

import ast
import functools
import re

import pytest

from dynspec_cli.knowledge.sglang import knowledge
from tests.support import wheels

K = knowledge()
SEARCHED = ("sglang/srt/", "sglang/launch_server.py", "sglang/cli/")
ALL = K.releases
UNTIL_059 = ALL[:ALL.index("0.5.9") + 1]
EXPECTED = {  # row -> releases whose server source writes it (read from the wheels by hand)
    "tp-worker-client-exception": ["0.5.3"],  # srt/managers/tp_worker_overlap_thread.py, removed in 0.5.3.post1
    "scheduler-dead": UNTIL_059,  # srt/entrypoints/engine.py _wait_for_scheduler_ready
    "child-exit-code": UNTIL_059,  # the same function, right after it
    "child-failed-cut": ALL,  # the sigquit handler of the launcher
    "prefill-batch": ALL,  # the scheduler's prefill stats line
}

def _render(node: ast.AST) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        # a formatted value (a rank, an exit code) as a number the row's pattern must accept
        return "".join(v.value if isinstance(v, ast.Constant) else "3" for v in node.values)
    return None


@functools.lru_cache(maxsize=None)
def _writers(version: str) -> dict[str, bool]:
    rows = [x for x in K.log_lines if x.id in EXPECTED]
    found = {x.id: False for x in rows}
    root = wheels.unpacked(version)
    for p in sorted((root / "sglang").rglob("*.py")):
        rel = str(p.relative_to(root))
        if not rel.startswith(SEARCHED):
            continue
        data = p.read_bytes()
        todo = [x for x in rows if not found[x.id] and x.literal.encode() in data]
        if not todo:
            continue
        lits = [s for n in ast.walk(ast.parse(data)) if (s := _render(n)) is not None]
        for x in todo:
            found[x.id] = any(x.literal in s and re.search(x.pattern, s) for s in lits)
    return found


@pytest.mark.parametrize("lid", sorted(EXPECTED))
def test_crash_line_in_sglang_source(lid):
    present = [v for v in ALL if _writers(v)[lid]]
    assert present == EXPECTED[lid], f"{lid}: written by {K.span(sum(K.mask_of(v) for v in present))}"
