"""The launch sequence, written once: preflight gate -> probe -> start -> watch -> stop policy.
`dynspec launch` runs it for one server; `dynspec group launch` runs its first steps on every node
(`start_prepared`) and watches the nodes together. The CLI only parses arguments and renders what
the `Screen` hooks hand it."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Optional, Protocol

from dynspec_cli.knowledge.features import Feature
from dynspec_cli.run import control, records
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
    record: Optional[RunRecord] = None  # interrupted: None when nothing was started
    outcome: Optional[Outcome] = None
    stopped: bool = False
    detached: bool = False  # interrupted and left running, as asked
    left: Optional[str] = None  # interrupted: why the run may still be running (not stopped, not asked to stay)
    name: str = ""  # the run's name (also when no record is known)


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
        if pre["verdict"] in ("dead", "ineffective"):  # ineffective: a draft that accepts nothing (DS113)
            return Launched("refused", preflight=pre)
    since = records.now()
    try:  # from here on, Ctrl-C at any moment ends in `interrupted`
        rec = start_prepared(host, prof, feature, pre=pre, probe=opts.probe, replace=opts.replace)
        screen.started(host, rec, prof)
        if not opts.watch:
            return Launched("started", preflight=pre, record=rec, name=rec.name)
        o = watch(host, rec, feature, timeout=opts.timeout or prof.ready_timeout, keep=opts.keep,
                  on_update=screen.update)
    except KeyboardInterrupt:
        return interrupted(host, prof.name, detach=opts.detach, since=since, pre=pre)
    return Launched("watched", preflight=pre, record=rec, outcome=o, stopped=o.stopped, name=rec.name)


def watch_or_interrupt(host: Host, rec: RunRecord, feature: Feature, *, timeout: Optional[float], keep: bool,
                       detach: bool, on_update: Callable[[Verdict], None] | None = None,
                       pre: Optional[dict[str, Any]] = None) -> Launched:
    """Watch to the verdict; on Ctrl-C stop the server and confirm it is gone, unless `detach`."""
    try:
        o = watch(host, rec, feature, timeout=timeout, keep=keep, on_update=on_update)
    except KeyboardInterrupt:
        return interrupted(host, rec.name, detach=detach, rec=rec, pre=pre)
    return Launched("watched", preflight=pre, record=rec, outcome=o, stopped=o.stopped, name=rec.name)


def interrupted(host: Host, name: str, *, detach: bool, since: float = 0.0, rec: Optional[RunRecord] = None,
                pre: Optional[dict[str, Any]] = None) -> Launched:
    """Ctrl-C at any moment of a launch or watch: the run this launch started (its record, written
    at or after `since`) is stopped and confirmed gone, or left running as asked (`detach`), or,
    when that cannot be done (a second Ctrl-C, the host unreachable, a start still unresolved), the
    result says why it may still run, so its name and the stop command get printed."""
    from dynspec_cli.transport import TransportError

    try:
        rec = rec or _started_since(host, name, since)
        if rec is None or rec.state == records.NOT_STARTED:
            return Launched("interrupted", preflight=pre, record=None, stopped=True, name=name)
        if rec.state == records.STARTING:
            return Launched("interrupted", preflight=pre, record=rec, name=name,
                            left="its start was cut short before its pid was known")
        if detach:
            return Launched("interrupted", preflight=pre, record=rec, detached=True, name=name)
        if control.stop(host, rec):
            return Launched("interrupted", preflight=pre, record=rec, stopped=True, name=name)
        return Launched("interrupted", preflight=pre, record=rec, name=name, left="its processes survived SIGKILL")
    except KeyboardInterrupt:
        why = "interrupted again while it was being stopped"
    except (control.RunError, TransportError) as e:
        why = f"it could not be stopped: {e}"
    return Launched("interrupted", preflight=pre, record=rec, name=name, left=why)


def _started_since(host: Host, name: str, since: float) -> Optional[RunRecord]:
    """The record of `name` if this launch wrote it (None: it never got that far). A start cut
    short while spawning resolves once the spawn's pid file is on the host: wait a moment for it."""
    import time

    deadline = time.monotonic() + 3.0
    while True:
        rec = records.load(host, name)  # resolves a "starting" record from the host
        if rec is None or rec.started_at < since:
            return None
        if rec.state != records.STARTING or time.monotonic() >= deadline:
            return rec
        time.sleep(0.1)
