"""One launch's state, read from its observations in log order.

A log file often holds several appended launches; `Reader` splits them and hands each observation
of the current launch to the part of its state that the observation is about (parts.py;
the claims' evidence: claim_evidence.py). Each part is the only writer of its own fields."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from dynspec_cli.evidence.lines import Line
from dynspec_cli.evidence.observation import Observation
from dynspec_cli.engines.sglang.server_args import parse_dump
from dynspec_cli.knowledge.features import Feature
from dynspec_cli.engines.sglang.knowledge import Knowledge
from dynspec_cli.engines.sglang import claim_evidence
from dynspec_cli.engines.sglang.claim_evidence import ClaimEvidence
from dynspec_cli.engines.sglang.parts import Config, Decoding, Graphs, Life, ProbeState, Release

# What starts a new launch once the current one got past argument resolution. A launch command
# pasted into the log does not: people paste the crash, then "my command was" (a command right
# before a new launch's start-up lines moves into that launch, claim_evidence.adopt_command).
_RESOLVE_PHASE = {"warning", "launch"}
_SPEC_DIR = "/sglang/srt/speculative/"


@dataclass
class Launch:
    """One launch: its first and last line, the feature's own lines, and the parts above."""

    index: int
    first: Line
    release: Release
    config: Config = field(default_factory=Config)
    life: Life = field(default_factory=Life)
    decoding: Decoding = field(default_factory=Decoding)
    graphs: Graphs = field(default_factory=Graphs)
    probe: ProbeState = field(default_factory=ProbeState)
    ev: ClaimEvidence = field(default_factory=ClaimEvidence)
    markers: list[Observation] = field(default_factory=list)
    feature_dead: list[Observation] = field(default_factory=list)
    frames: dict[str, Line] = field(default_factory=dict)  # worker module -> first traceback frame in it
    last_line: Optional[Line] = None

    def steady(self, decode_lines: int) -> bool:
        """Ready and serving: the big-file reader may jump to the file's tail."""
        return self.life.ready is not None and self.decoding.lines >= decode_lines


class Reader:
    """Fed observations in log order: splits the launches and hands each observation to the part
    of the current launch it is about."""

    def __init__(self, knowledge: Knowledge, feature: Feature) -> None:
        self.k = knowledge
        self.feature = feature
        self.launches: list[Launch] = []
        self.earlier_markers: list[Observation] = []  # the markers of the launches before the newest

    def _launch(self, line: Line) -> Launch:
        return Launch(len(self.launches) + 1, line, Release(self.k.all))

    def _current(self, line: Line) -> Launch:
        if not self.launches:
            self.launches.append(self._launch(line))
        return self.launches[-1]

    def _new_launch(self, line: Line) -> Launch:
        la = self._launch(line)
        if self.launches:
            self.earlier_markers.extend(self.launches[-1].markers)
            claim_evidence.adopt_command(self.launches[-1].ev, la.ev)
        self.launches.append(la)
        return la

    def feed(self, obs: Observation) -> None:
        line = obs.line
        la = self._current(line)
        starts = obs.kind in _RESOLVE_PHASE or (obs.kind == "landmark" and obs.id in ("server-args-dump", "unrecognized-arguments"))
        if starts and la.life.past_resolution:  # argument resolution again after runtime lines or a crash
            la = self._new_launch(line)
        la.last_line = line
        if claim_evidence.observe(la.ev, la.life, la.config, obs):  # the claims' own lines (a command, frames, served)
            return
        getattr(self, f"_on_{obs.kind.replace('-', '_')}")(la, obs)

    def _on_launch(self, la: Launch, obs: Observation) -> None:
        la.config.read_header(self.k, obs.data["json"], obs.line)

    def _on_warning(self, la: Launch, obs: Observation) -> None:
        w, k = obs.warning, self.k
        la.config.read_warning(obs)
        la.release.narrow(obs.line, k.mask(w.versions), f"'{w.id}' is logged by {k.span(k.mask(w.versions))}")
        if w.level == "error":
            la.life.argument_error("ValueError", w.text or obs.line.msg, obs.line)

    def _on_marker(self, la: Launch, obs: Observation) -> None:
        la.markers.append(obs)

    def _on_feature_dead(self, la: Launch, obs: Observation) -> None:
        la.feature_dead.append(obs)

    def _on_probe(self, la: Launch, obs: Observation) -> None:
        ev = obs.data.get("event")
        if ev is None:  # not an event of the probe's schema
            return
        la.probe.read(ev, obs.line)
        if ev.get("event") == "server_args":
            la.config.read_probe_args(self.k, ev.get("args") or {}, obs.line)

    def _on_traceback(self, la: Launch, obs: Observation) -> None:
        la.life.traceback(obs.line)

    def _on_exception(self, la: Launch, obs: Observation) -> None:
        la.life.exception(obs.data["exception"], obs.data["message"], obs.line)

    def _on_landmark(self, la: Launch, obs: Observation) -> None:
        row, line, d = obs.landmark, obs.line, obs.data
        if row.id == "server-args-dump":
            self._on_dump(la, obs)
            return
        if row.stop:
            la.life.stopped(row.stop, line)
            return
        if row.crash:
            flag = self.feature.flag
            la.life.crash_line(row, line, d, flag_rejected=row.id == "unrecognized-arguments" and bool(flag)
                               and flag.name in d.get("args", "").split())
            return
        if row.crash_start:
            la.life.in_frame()
            if row.id == "traceback-frame":
                self._on_frame(la, obs)
            return
        la.life.progressed(row, line, d)
        if row.id == "decode-batch":
            la.decoding.read(d, line)
        elif row.id in ("cuda-graph", "draft-cuda-graph"):
            got = self.k.capture_of(line.msg, la.release.mask)
            if got is not None:
                la.graphs.read(got[0].role, got[1], line)
        elif row.id == "scheduler-ready-stats" and d.get("max_running_requests"):
            la.config.read_max_running(int(d["max_running_requests"]), line)

    def _on_frame(self, la: Launch, obs: Observation) -> None:
        path, func = obs.data.get("path", ""), obs.data.get("function", "")
        la.config.loop_named(func, obs.line)
        if _SPEC_DIR in path:
            module = path.split(_SPEC_DIR, 1)[1][:-3].replace("/", ".")
            if any(c.module == module for c in self.k.classes):
                la.frames.setdefault(module, obs.line)

    def _on_dump(self, la: Launch, obs: Observation) -> None:
        k = self.k
        la.life.args_resolved()
        dump = obs.data.get("dump", "")
        for form, spec in obs.landmark.versions_by_form.items():
            if dump.startswith(form):
                la.release.narrow(obs.line, k.mask(spec), f"the server_args dump form '{form}...' is used by {k.span(k.mask(spec))}")
        fields, _complete = parse_dump(dump)
        la.config.read_dump(k, fields, obs.line)
