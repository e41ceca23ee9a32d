"""The HostPlacement the sequence drives: one server on one host (this machine, or one reached over
SSH), started by run/launch.py, stopped by run/control.py, recorded in the host's
~/.dynspec/runs/NAME.json."""
from __future__ import annotations

from typing import Any, Optional

from dynspec_cli.run import control, records
from dynspec_cli.run.records import RunRecord


class HostPlacement:
    def __init__(self, host, feature, *, prof=None, name: str = ""):
        self.host, self._feature, self.prof = host, feature, prof  # feature: a Feature, or its name (loaded when needed)
        self.name = name or prof.name
        self.ready_timeout = prof.ready_timeout if prof is not None else None

    @property
    def feature(self):
        if not hasattr(self._feature, "engine"):  # a name (or None: the default feature)
            from dynspec_cli.knowledge.features import load_feature

            self._feature = load_feature(self._feature)
        return self._feature

    # the sequence's steps (place/sequence.py)
    def preflight(self) -> dict[str, Any]:
        from dynspec_cli.run.launch import preflight_result

        return preflight_result(self.host, self.prof, self.feature)

    def refuses(self, pre: dict[str, Any]) -> bool:
        return pre["verdict"] in ("dead", "ineffective")  # ineffective: a draft that accepts nothing (DS113)

    def start(self, pre, *, probe: bool, replace: bool) -> RunRecord:
        from dynspec_cli.run.launch import start_prepared

        return start_prepared(self.host, self.prof, self.feature, pre=pre, probe=probe, replace=replace)

    def watching(self, rec, *, keep: bool, detach: bool) -> None:
        pass

    def watch(self, rec, *, timeout, keep, on_update):
        from dynspec_cli.run.watch import watch

        return watch(self.host, rec, self.feature, timeout=timeout, keep=keep, on_update=on_update)

    def started(self, since: float) -> Optional[RunRecord]:
        from dynspec_cli.run.launch import started_since

        rec = started_since(self.host, self.name, since)
        return None if rec is None or rec.state == records.NOT_STARTED else rec

    def unresolved(self, rec: RunRecord) -> Optional[str]:
        return "its start was cut short before its pid was known" if rec.state == records.STARTING else None

    def release(self, rec) -> None:
        pass

    def stop(self, rec: RunRecord) -> Optional[str]:
        return None if control.stop(self.host, rec) else "its processes survived SIGKILL"

    def hint(self, verb: str, rec: RunRecord) -> str:
        from dynspec_cli.run.hints import command

        return command(verb, rec.name, host=self.host)

    def mark(self, rec: RunRecord, why: str) -> None:
        rec.unwatched = why
        records.save(self.host, rec)

    # what prove needs of the run
    def prove_target(self, rec: RunRecord):
        from dynspec_cli.prove.session import Target

        return Target(self.host, rec.python or "python3", f"http://127.0.0.1:{rec.port}", rec.log, rec.log_offset, rec)

    # what the commands show
    def screen(self, out, json_out: bool):
        from dynspec_cli.report.runs import LaunchScreen

        screen = LaunchScreen(out, self.name, json_out)
        self.host.drops.add_listener(screen.display.drop)
        return screen

    def render(self, out, result, json_out: bool) -> int:
        from dynspec_cli.report.runs import render_launched

        return render_launched(out, self.host, result, json_out)

    def end(self, rec: RunRecord, *, grace: float, out) -> int:
        """`dynspec stop`: SIGTERM, SIGKILL after `grace`, confirmed; the exit code."""
        from dynspec_cli.report.runs import render_stopped

        was_alive, gone = control.stop_run(self.host, rec, grace=grace)
        left = [] if gone else control.still_running(self.host, rec)
        return render_stopped(out, rec, was_alive=was_alive, gone=gone, left=left)
