"""The ToyPlacement the sequence drives, and the toy's records (~/.dynspec/toy/NAME.json, run/'s
RunRecord: the shared watch and screens read it as they read a host run's)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Optional

import msgspec

from dynspec_cli import engines
from dynspec_cli.run import records
from dynspec_cli.run.records import RunRecord

TOY_DIR = "~/.dynspec/toy"
RUNNER = Path(__file__).with_name("runner.py")


def load(req):
    """(profile, feature) of a toy profile: an ordinary profile once `scheduler` is taken out."""
    from dynspec_cli.knowledge.features import load_feature
    from dynspec_cli.run.profiles import as_profile, for_feature, read_profile, with_overrides

    path, raw = read_profile(req.profile)
    raw.pop("scheduler", None)
    prof = with_overrides(as_profile(raw, path), env=req.env, sets=req.sets, name=req.name)
    feature = load_feature(prof.feature)
    return for_feature(prof, feature), feature


def _path(host, name: str) -> Path:
    return Path(records.expand(host, TOY_DIR)) / f"{name}.json"


def save(host, rec: RunRecord) -> None:
    p = _path(host, rec.name)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_bytes(msgspec.json.encode(rec))


def read(host, name: str) -> Optional[RunRecord]:
    try:
        return msgspec.json.decode(_path(host, name).read_bytes(), type=RunRecord)
    except (FileNotFoundError, msgspec.DecodeError):
        return None


def rows(host, names) -> list[dict]:
    """`dynspec status` rows of the toy's runs."""
    out = []
    for p in sorted(Path(records.expand(host, TOY_DIR)).glob("*.json")):
        rec = read(host, p.stem)
        if rec is None or (names and rec.name not in names):
            continue
        alive = rec.stopped_at is None and host.group_alive(rec.pgid)
        try:
            tail = Path(rec.log).read_bytes()[-4096:].decode("utf-8", "replace")
        except OSError:
            tail = ""
        out.append({"name": rec.name, "host": rec.host, "pid": rec.pid, "alive": alive, "verdict": rec.verdict,
                    "port": rec.port, "log": rec.log, "started_at": rec.started_at, "stopped_at": rec.stopped_at,
                    "last_lines": [ln for ln in tail.splitlines() if ln.strip()][-3:], "placement": "toy"})
    return out


class ToyPlacement:
    def __init__(self, host, feature, prof=None, *, name: str = ""):
        self.host, self._feature, self.prof = host, feature, prof
        self.name = name or prof.name
        self.ready_timeout = prof.ready_timeout if prof is not None else None
        self.rec: Optional[RunRecord] = None

    @property
    def feature(self):
        if isinstance(self._feature, str):  # a found run's: loaded when watched
            from dynspec_cli.knowledge.features import load_feature

            self._feature = load_feature(self._feature)
        return self._feature

    # the sequence's steps
    def preflight(self):
        return None  # the toy judges nothing before the start

    def refuses(self, pre) -> bool:
        return False

    def start(self, pre, *, probe: bool, replace: bool) -> RunRecord:
        prof, host = self.prof, self.host
        log = records.expand(host, prof.log_path())
        Path(log).parent.mkdir(parents=True, exist_ok=True)
        state = str(_path(host, prof.name)) + ".state"
        Path(state).parent.mkdir(parents=True, exist_ok=True)
        Path(state).unlink(missing_ok=True)
        first = subprocess.Popen([sys.executable, str(RUNNER), state, log, prof.workdir or "", *prof.argv()],
                                 env={**os.environ, **prof.env}, start_new_session=True, stdin=subprocess.DEVNULL,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        first.wait()  # it forked the runner and left: its session (= process group) is the run's
        deadline = time.monotonic() + 10
        while not os.path.exists(state) and time.monotonic() < deadline:
            time.sleep(0.02)
        pids = json.loads(Path(state).read_text())
        self.rec = RunRecord(name=prof.name, host=host.name, pid=pids["server"], pgid=first.pid, argv=prof.argv(),
                             env={}, log=log, log_offset=0, port=prof.port, started_at=records.now(),
                             feature=self.feature.name, python=prof.python, cwd=prof.workdir,
                             engine=prof.engine or engines.name_of(self.feature))
        save(host, self.rec)
        return self.rec

    def watching(self, rec, *, keep: bool, detach: bool) -> None:
        pass

    def watch(self, rec, *, timeout, keep, on_update):
        """run/watch.py's loop over the log, then the toy's own stop when dead or crashed."""
        from dynspec_cli.run.watch import Outcome, follow_run

        w = follow_run(self.host, rec, self.feature, timeout=timeout, on_update=on_update)
        stopped = kept = False
        if w.verdict.verdict in ("dead", "crashed"):
            if keep:
                kept = self.host.group_alive(rec.pgid)
            else:
                stopped = not self.stop(rec)
        rec.verdict = w.verdict.verdict
        save(self.host, rec)
        return Outcome(w.verdict, w.why, stopped, rec, w.health, kept)

    def started(self, since: float):
        return self.rec

    def unresolved(self, rec) -> Optional[str]:
        return None

    def release(self, rec) -> None:
        pass

    def stop(self, rec) -> Optional[str]:
        gone = self.host.stop_group(rec.pgid, grace=10)
        rec.stopped_at = records.now()
        save(self.host, rec)
        return None if gone else "its processes survived SIGKILL"

    def hint(self, verb: str, rec) -> str:
        from dynspec_cli.run.hints import command

        return command(verb, rec.name, host=self.host)

    def mark(self, rec, why: str) -> None:
        rec.unwatched = why
        save(self.host, rec)

    # what the commands show: dynspec's screens for one server
    def screen(self, out, json_out: bool):
        from dynspec_cli.report.runs import LaunchScreen

        return LaunchScreen(out, self.name, json_out)

    def render(self, out, result, json_out: bool) -> int:
        from dynspec_cli.report.runs import render_launched

        return render_launched(out, self.host, result, json_out)

    def end(self, rec, *, grace: float, out) -> int:
        from dynspec_cli.report.runs import render_stopped

        was = rec.stopped_at is None and self.host.group_alive(rec.pgid)
        left = self.stop(rec)
        return render_stopped(out, rec, was_alive=was, gone=not left)
