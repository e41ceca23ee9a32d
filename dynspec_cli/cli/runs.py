"""`dynspec launch / watch / stop / status`: the server's life, locally or over SSH."""
from __future__ import annotations

import time
from typing import TYPE_CHECKING, Optional

if TYPE_CHECKING:  # rich is imported when something is shown, not at start-up
    from rich.console import Console

    from dynspec_cli.verdict.judge import Verdict


class LiveDisplay:
    """A transient rich Live region while watching (nothing when output is not a terminal)."""

    def __init__(self, out: "Console", enabled: bool) -> None:
        self.out, self.t0 = out, time.monotonic()
        self.live = None
        if enabled:
            from rich.live import Live
            from rich.text import Text

            self.live = Live(Text(""), console=out, refresh_per_second=8, transient=True)

    def __enter__(self):
        if self.live:
            self.live.__enter__()
        return self

    def __exit__(self, *exc):
        if self.live:
            self.live.__exit__(*exc)


class Display(LiveDisplay):
    """One live status line while watching: phase, elapsed time, last evidence, running verdict."""

    def __init__(self, out: "Console", name: str, enabled: bool) -> None:
        super().__init__(out, enabled)
        self.name = name
        self.last: Optional["Verdict"] = None

    def update(self, v: "Verdict") -> None:
        from rich.text import Text

        from dynspec_cli.report.console import MARK

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
