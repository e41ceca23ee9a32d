"""The steps of starting one server on a host: the engine's preflight, the probe, the start, and
after a Ctrl-C the record that start wrote. place/host/ runs them in the shared sequence
(place/sequence.py); place/group/ on every node (`start_prepared`)."""
from __future__ import annotations

from typing import Any, Optional

from dynspec_cli.knowledge.features import Feature
from dynspec_cli.run import control, ownership, records
from dynspec_cli.run.profiles import Profile
from dynspec_cli.run.records import RunRecord
from dynspec_cli.transport import Host


def preflight_result(host: Host, prof: Profile, feature: Feature) -> dict[str, Any]:
    """The engine's preflight (engines/protocol.py) on the profile's server flags."""
    from dynspec_cli import engines

    engine = engines.get(prof.engine or engines.name_of(feature))
    diff = _diff(prof, feature)
    pre = engine.preflight(host, prof.python, feature, prof.argv()[3:], prof.env, prof.patched_class or None,
                           patch_diff=diff[1] if diff else None)
    if diff:  # carried into the run record (start_prepared) and from there into prove's receipt
        from dynspec_cli.run import patchfile

        pre["patch"] = patchfile.summary(diff[0], diff[1], pre)
    return pre


def _diff(prof: Profile, feature: Feature) -> Optional[tuple[str, str]]:
    """(path, text) of the run's diff: --patch, else the profile's `patch`, else the feature's."""
    from dynspec_cli.knowledge.features import patch_file
    from dynspec_cli.run import patchfile

    path = prof.patch or patch_file(feature)
    return patchfile.read(path) if path else None


def start_prepared(host: Host, prof: Profile, feature: Feature, *, pre: Optional[dict[str, Any]], probe: bool,
                   replace: bool, sglang_version: Optional[str] = None) -> RunRecord:
    """Probe (when asked and there is something to instrument), then start the server."""
    from dynspec_cli import engines

    engine = engines.get(prof.engine or engines.name_of(feature))
    extra = None
    if probe and engine.probe is not None:  # (an engine without an in-server probe starts as it is)
        targets = engine.probe.probe_targets(feature, pre, prof.patched_class or None)
        extra = control.probe_env_on(host, prof.python, engine.probe, targets, prof.env) if targets else None
    version = engine.release_of(pre) or sglang_version or prof.sglang_version
    patch = (pre or {}).get("patch")
    diff = _diff(prof, feature) if patch is None else None
    if diff:  # --no-preflight: the diff's path and sha256, its files unknown
        from dynspec_cli.run import patchfile

        patch = patchfile.summary(diff[0], diff[1], None)
    return control.start(host, prof, feature, replace=replace, sglang_version=version, extra_env=extra, patch=patch)


def started_since(host: Host, name: str, since: float) -> Optional[RunRecord]:
    """The record of `name` if this launch wrote it (None: it never got that far). A start cut
    short while spawning resolves once the spawn's pid file is on the host: wait a moment for it."""
    import time

    deadline = time.monotonic() + 3.0
    while True:
        rec = ownership.load(host, name)  # a "starting" record: completed from the host
        if rec is None or rec.started_at < since:
            return None
        if rec.state != records.STARTING:
            return rec
        if time.monotonic() >= deadline:
            if rec.launcher != records.launcher_id():
                return rec
            # this process wrote it and its start has unwound (the spawn is held whole against
            # Ctrl-C): no pid file and no process with the token means nothing was started
            rec = ownership.resolve(host, rec, launch_over=True)
            return None if rec.state == records.NOT_STARTED else rec
        time.sleep(0.1)
