"""The launch sequence, written once: preflight gate -> probe -> start -> watch -> stop policy.
`dynspec launch` runs it for one server; `dynspec group launch` runs its first steps on every node
(`start_prepared`) and watches the nodes together. The CLI only parses arguments and renders what
the `Screen` hooks hand it."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Optional, Protocol

from dynspec_cli.knowledge.features import Feature
from dynspec_cli.run import control
from dynspec_cli.run.profiles import Profile
from dynspec_cli.run.records import RunRecord
from dynspec_cli.run.watch import Outcome, watch
from dynspec_cli.transport import Host
from dynspec_cli.verdict.judge import Verdict


@dataclass
class LaunchOptions:
    replace: bool = False
    keep: bool = False  # a dead or crashed server keeps running
    detach: bool = False  # Ctrl-C leaves the server running
    watch: bool = True
    preflight: bool = True
    probe: bool = True
    timeout: Optional[float] = None


@dataclass
class Launched:
    """How a launch ended. kind: refused (preflight dead: nothing started) | started (not
    watched) | watched | interrupted (Ctrl-C: stopped, or left running with detach)."""

    kind: str
    preflight: Optional[dict[str, Any]] = None
    record: Optional[RunRecord] = None
    outcome: Optional[Outcome] = None
    stopped: bool = False
    detached: bool = False  # interrupted and left running, as asked


class Screen(Protocol):
    """What the launch shows while it runs (the CLI's renderers, or nothing)."""

    def preflight(self, result: dict[str, Any]) -> None: ...
    def started(self, host: Host, rec: RunRecord, prof: Profile) -> None: ...
    def update(self, v: Verdict) -> None: ...


def preflight_result(host: Host, prof: Profile, feature: Feature) -> dict[str, Any]:
    """The engine's preflight (verdict/engines.py) on the profile's server flags."""
    from dynspec_cli.verdict import engines

    engine = engines.get(prof.engine or feature.engine)
    return engine.preflight(host, prof.python, feature, prof.argv()[3:], prof.env, prof.patched_class or None)


def start_prepared(host: Host, prof: Profile, feature: Feature, *, pre: Optional[dict[str, Any]], probe: bool,
                   replace: bool, sglang_version: Optional[str] = None) -> RunRecord:
    """Probe (when asked and there is something to instrument), then start the server."""
    from dynspec_cli.run import probe as probe_setup
    from dynspec_cli.verdict.engines import SERVING

    extra = None
    if probe and SERVING[prof.engine or feature.engine].probe:  # no in-server probe for vLLM yet
        targets = probe_setup.probe_targets(feature, pre, prof.patched_class or None)
        extra = control.probe_env_on(host, prof.python, targets, prof.env) if targets else None
    version = (pre or {}).get("sglang_version") or sglang_version or prof.sglang_version
    return control.start(host, prof, feature, replace=replace, sglang_version=version, extra_env=extra)


def launch(host: Host, prof: Profile, feature: Feature, opts: LaunchOptions, screen: Screen) -> Launched:
    pre = None
    if opts.preflight:
        pre = preflight_result(host, prof, feature)
        screen.preflight(pre)
        if pre["verdict"] == "dead":
            return Launched("refused", preflight=pre)
    rec = start_prepared(host, prof, feature, pre=pre, probe=opts.probe, replace=opts.replace)
    screen.started(host, rec, prof)
    if not opts.watch:
        return Launched("started", preflight=pre, record=rec)
    return watch_or_interrupt(host, rec, feature, timeout=opts.timeout or prof.ready_timeout, keep=opts.keep,
                              detach=opts.detach, on_update=screen.update, pre=pre)


def watch_or_interrupt(host: Host, rec: RunRecord, feature: Feature, *, timeout: Optional[float], keep: bool,
                       detach: bool, on_update: Callable[[Verdict], None] | None = None,
                       pre: Optional[dict[str, Any]] = None) -> Launched:
    """Watch to the verdict; on Ctrl-C stop the server and confirm it is gone, unless `detach`."""
    try:
        o = watch(host, rec, feature, timeout=timeout, keep=keep, on_update=on_update)
    except KeyboardInterrupt:
        if detach:
            return Launched("interrupted", preflight=pre, record=rec, detached=True)
        return Launched("interrupted", preflight=pre, record=rec, stopped=control.stop(host, rec))
    return Launched("watched", preflight=pre, record=rec, outcome=o, stopped=o.stopped)
