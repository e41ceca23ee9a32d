"""`dynspec demo`: recorded sglang start-ups replayed into a file at their recorded pace,
judged by the same `verify --follow` code a user runs. No GPU, no network."""
from __future__ import annotations

import os
import re
import tempfile
import threading
import time
from pathlib import Path

from dynspec_cli.knowledge.features import load_feature
from dynspec_cli.knowledge.tables import configs_dir

_TS = re.compile(r"\[(\d{4}-\d\d-\d\d) (\d\d):(\d\d):(\d\d)")
SCENES = (
    ("seed-dead.log", "the seed: patch in EAGLEWorkerV2, sglang 0.5.9, SGLANG_ENABLE_SPEC_V2 not set"),
    ("seed-live.log", "the fix: SGLANG_ENABLE_SPEC_V2=True and --speculative-eagle-topk 1"),
)


def _pace(lines: list[str]) -> list[float]:
    """Seconds to wait before each line, from the recorded timestamps (bare lines: none)."""
    out, last = [], None
    for ln in lines:
        m = _TS.search(ln[:60])
        if m:
            t = int(m.group(2)) * 3600 + int(m.group(3)) * 60 + int(m.group(4))
            out.append(min(max(t - last, 0), 60) if last is not None else 0.0)
            last = t
        else:
            out.append(0.02)
    return out


def _writer(path: Path, lines: list[str], speed: float, stop: threading.Event, written: list[int]) -> None:
    if stop.wait(0.5):  # let the follower attach first, so the verdict shows how early it comes
        return
    with open(path, "a", encoding="utf-8") as fh:
        for ln, wait in zip(lines, _pace(lines)):
            if stop.wait(wait / speed):
                return
            fh.write(ln + "\n")
            fh.flush()
            written[0] += 1


def run_demo(speed: float = 50.0, json_out: bool = False) -> int:
    from dynspec_cli import engines
    from dynspec_cli.report.console import console, render_verdict
    from dynspec_cli.report.jsonout import emit
    from dynspec_cli.verdict.pipeline import judge_growing

    out = console()
    feature = load_feature(None)
    codes, scenes = [], []
    with tempfile.TemporaryDirectory(prefix="dynspec-demo-") as tmp:
        for name, title in SCENES:
            lines = (configs_dir() / "demo" / name).read_text(encoding="utf-8").splitlines()
            log = Path(tmp) / "server.log"
            log.write_bytes(b"")
            if not json_out:
                out.print(f"\n[bold]▶ {title}[/]\n  [dim]replaying {name} ({len(lines)} lines) into {log} at {speed:g}x; "
                          f"dynspec verify --follow {log}[/]\n")
            stop, written = threading.Event(), [0]
            t0 = time.monotonic()
            w = threading.Thread(target=_writer, args=(log, lines, speed, stop, written), daemon=True)
            w.start()
            v = judge_growing(str(log), feature, None, None, timeout=120, engine=engines.of(feature))
            took = time.monotonic() - t0
            stop.set()
            w.join()
            doc = v.to_json()
            if json_out:
                scenes.append({"log": name, "title": title, "verdict": doc, "decided_after_s": round(took, 2),
                               "lines_written": written[0], "lines": len(lines)})
            else:
                render_verdict(doc, out, source=str(log))
                out.print(f"  [dim]decided after {took:.1f} s, with {written[0]} of {len(lines)} lines written "
                          f"({len(lines) - written[0]} never needed)[/]")
            codes.append(v.exit_code)
            os.unlink(log)
    # The demo succeeds when it shows what it promises: dead first, then live.
    code = 0 if codes == [1, 0] else 1
    if json_out:  # one document, as every --json
        emit({"scenes": scenes, "exit_code": code})
    return code
