"""`dynspec launch / watch / stop / status`: the server's life, locally or over SSH."""
from __future__ import annotations

import time
from typing import Optional

from rich.console import Console
from rich.live import Live
from rich.text import Text

from dynspec_cli.knowledge.features import load_feature
from dynspec_cli.report.console import MARK
from dynspec_cli.verdict.judge import Verdict

PHASES = ["args", "distributed", "weights", "kv-cache", "cuda-graph", "draft", "ready", "serving"]


class Display:
    """One live status line while watching: phase, elapsed time, last evidence, running verdict."""

    def __init__(self, out: Console, name: str, enabled: bool) -> None:
        self.out, self.name, self.t0 = out, name, time.monotonic()
        self.live = Live(Text(""), console=out, refresh_per_second=8, transient=True) if enabled else None
        self.last: Optional[Verdict] = None

    def __enter__(self):
        if self.live:
            self.live.__enter__()
        return self

    def __exit__(self, *exc):
        if self.live:
            self.live.__exit__(*exc)

    def update(self, v: Verdict) -> None:
        self.last = v
        if not self.live:
            return
        la = v.launch or {}
        phase = la.get("phase") or "args"
        shards = f" {la['shards']}" if la.get("shards") and phase == "weights" else ""
        mark, colour = MARK[v.verdict]
        worker = v.worker.get("class") or "?"
        self.live.update(Text.from_markup(
            f"[bold]{self.name}[/] {time.monotonic() - self.t0:6.1f}s  phase [cyan]{phase}{shards}[/]  "
            f"worker {worker}  marker {'yes' if v.marker['found'] else 'no'}  [{colour}]{mark} {v.verdict}[/]"))


def open_target(spec: str, ssh_config: Optional[str], known_hosts: Optional[str], accept_new: bool, python: str = "python3"):
    from dynspec_cli.transport import open_host

    opts = {"python": python}
    if spec not in ("", "local"):
        if ssh_config:
            opts["ssh_config_path"] = ssh_config
        if known_hosts:
            opts["known_hosts_path"] = known_hosts
        if accept_new:
            opts["accept_new_host_key"] = True
    return open_host(spec, **opts)
