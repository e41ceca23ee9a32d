"""The crash and serving lines of log_lines.toml that sglang itself writes but not in every
release (they stay in the table for logs of the releases that do, and of older ones): each is in
the server's source of exactly the releases a person found by reading the wheels, with a string
literal that renders to a line the row's pattern matches."""
from __future__ import annotations

import ast
import functools
import re

import pytest

from dynspec_cli.engines.sglang.knowledge import knowledge
from tests.support import wheels

K = knowledge()
SEARCHED = ("sglang/srt/", "sglang/launch_server.py", "sglang/cli/")
ALL = K.releases
UNTIL_059 = ALL[:ALL.index("0.5.9") + 1]
FROM_0510 = ALL[ALL.index("0.5.10"):]
EXPECTED = {  # row -> releases whose server source writes it (read from the wheels by hand)
    "tp-worker-client-exception": ["0.5.3"],  # srt/managers/tp_worker_overlap_thread.py, removed in 0.5.3.post1
    "scheduler-dead": UNTIL_059,  # srt/entrypoints/engine.py _wait_for_scheduler_ready
    "child-exit-code": UNTIL_059,  # the same function, right after it
    "child-failed-cut": ALL,  # the sigquit handler of the launcher
    "prefill-batch": ALL,  # the scheduler's prefill stats line
    # srt/utils/watchdog.py SubprocessWatchdog._check_processes: f"Subprocess {name} (pid={proc.pid}) crashed "
    # f"with exit code {proc.exitcode}. " f"Triggering SIGQUIT for cleanup..." (the class arrives in 0.5.10)
    "subprocess-crashed": FROM_0510,
    # srt/managers/tokenizer_manager.py SignalHandler.sigterm_handler: f"SIGTERM received. {signum=} {frame=}.
    # Draining requests and shutting down..." in every release (0.5.3-0.5.9 also the gRPC server's
    # "... Shutting down gRPC server...", srt/entrypoints|grpc/grpc_request_manager.py)
    "sigterm-received": ALL,
}

def _render(node: ast.AST) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        # a formatted value (a rank, an exit code) as a number the row's pattern must accept; `{x=}` is
        # its name (a Constant "x=") then the value
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


# Real lines of a real 0.5.12.post1 server (tests/fixtures/logs/gpu-h200/0.5.12.post1/live-probe.log, the end of a
# `dynspec stop`; the -9 line from issue 29's GPU run, its scheduler SIGKILLed): each row reads the fields.
@pytest.mark.parametrize("lid, msg, fields", [
    ("subprocess-crashed", "Subprocess scheduler_0 (pid=5066) crashed with exit code -9. Triggering SIGQUIT for cleanup...",
     {"process": "scheduler_0", "pid": "5066", "exit_code": "-9"}),
    ("subprocess-crashed", "Subprocess scheduler_0 (pid=1729) crashed with exit code -15. Triggering SIGQUIT for cleanup...",
     {"process": "scheduler_0", "pid": "1729", "exit_code": "-15"}),
    ("sigterm-received", "SIGTERM received. signum=None frame=None. Draining requests and shutting down...", {}),
    ("child-failed", "SIGQUIT received. signum=None, frame=None. It usually means one child failed.", {}),
])
def test_real_line_matches_its_row(lid, msg, fields):
    row = next(x for x in K.log_lines if x.id == lid)
    m = re.search(row.pattern, msg)
    assert row.literal in msg and m and {k: v for k, v in m.groupdict().items() if v is not None} == fields
