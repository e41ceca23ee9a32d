"""The one judge core every engine's judge is (engines/<name>/judge.py subclasses `Core`): the
newest launch judged by the engine's ordered steps, each adding findings with their evidence line
to one `Judging`; then the registry's policy (configs/findings.toml, context `log`: dead outranks
crashed) or the engine's own evidence of life decides, and what is missing for a verdict is said.

An engine supplies its launches (fed observations in log order), its steps, what makes a launch
live, what is missing when nothing decides, and how the verdict's engine fields are assembled;
the loop, the order of the findings, the policy, the empty log and the exited server are here.
"""
from __future__ import annotations

from typing import Any, Callable, Optional

import msgspec

from dynspec_cli.evidence.lines import Line
from dynspec_cli.knowledge.findings import Finding, forced_verdict
from dynspec_cli.verdict.result import Verdict, clip_text, empty_message, no_claims

SEVERITY_ORDER = {"error": 0, "warning": 1, "info": 2}


def ordered(findings: list[Finding]) -> list[Finding]:
    """Errors first, then warnings, then notes; by code within each (stable: the steps' order stays)."""
    findings.sort(key=lambda f: (SEVERITY_ORDER[f.severity], f.code))
    return findings


def no_worker() -> dict[str, Any]:
    return {"class": None, "module": None, "basis": None, "candidates": []}


def no_marker() -> dict[str, Any]:
    return {"found": False, "line": None, "text": None, "fields": {}, "ranks": []}


class Judging(msgspec.Struct):  # (a Struct, not a dataclass: `verify` builds the classes at every start)
    """One verdict in the making: what each step found. Engines subclass it with their own fields."""

    la: Any  # the launch judged (the engine's)
    at_eof: bool = True  # no more bytes will come (a crash is final at the end of the file)
    quiet_for: float = 0.0  # seconds the growing log has been quiet
    verdict: str = "inconclusive"
    findings: list[Finding] = msgspec.field(default_factory=list)
    missing: list[str] = msgspec.field(default_factory=list)
    worker: dict[str, Any] = msgspec.field(default_factory=no_worker)
    marker: dict[str, Any] = msgspec.field(default_factory=no_marker)
    crash: Optional[dict[str, Any]] = None
    crashed: bool = False

    def add(self, code: str, message: str, *, line: Optional[Line] = None, text: bool = True, clip: bool = True,
            fix: Optional[str] = None, params: Optional[dict[str, Any]] = None) -> None:
        """A finding; `line` is its evidence (its number and, unless text=False, its text)."""
        no = (line.no or None) if line is not None else None
        shown = None
        if line is not None and text:
            shown = clip_text(line.text) if clip else line.text
        self.findings.append(Finding(code, message, line=no, text=shown, fix=fix, params=params))


class Core:
    """Fed observations in log order; judges the newest launch. Subclasses set the class attributes
    and write `steps`, `is_live`, `missing_evidence` and `assemble`."""

    name: str = ""  # the engine's name ("engine" in the verdict's JSON)
    version_key: Optional[str] = None  # the engine's own JSON key of its release (Verdict.version_key)
    server_noun: str = "a server"  # DS304's words for a log with none of the engine's lines ("an sglang server")
    server_line: str = "any server line"  # what such a log is missing
    exited_finding: str = "the server process exited before it was ready."
    judging: type = Judging
    verdict_class: type = Verdict
    feature: Any
    pinned: Optional[str] = None  # the release the user pinned (None: from the log)

    # --- what an engine writes ---------------------------------------------------------------------
    @property
    def launches(self) -> list:
        raise NotImplementedError

    def feed(self, obs: Any) -> None:
        raise NotImplementedError

    def steps(self) -> list[Callable[[Judging], None]]:
        """The engine's steps, in order; each reads the launch and adds to the Judging."""
        raise NotImplementedError

    def is_live(self, j: Judging) -> bool:
        """The evidence of life when no finding forced the verdict (the marker, at least)."""
        raise NotImplementedError

    def missing_evidence(self, j: Judging) -> list[str]:
        """What would decide an inconclusive launch, in words (DS304)."""
        raise NotImplementedError

    def assemble(self, j: Judging) -> Verdict:
        """The Verdict of a judged launch, with the engine's fields (`make` adds the engine's name)."""
        raise NotImplementedError

    def empty_version(self) -> Optional[str]:
        """The release an empty log's verdict names."""
        return self.pinned

    # --- the core ----------------------------------------------------------------------------------
    def verdict(self, *, at_eof: bool = True, quiet_for: float = 0.0, text_lines: int = 0) -> Verdict:
        """The newest launch's verdict now. `text_lines`: the lines read that are not blank (what a
        log without one server line says)."""
        la = self.launches[-1] if self.launches else None
        if la is None:
            return self.empty(text_lines)
        j = self.judging(la, at_eof=at_eof, quiet_for=quiet_for)
        for step in self.steps():
            step(j)
        self.decide(j)
        ordered(j.findings)
        return self.assemble(j)

    def decide(self, j: Judging) -> None:
        """The registry's policy first (a dead finding outranks a crash: the patch could not run
        anyway), then the engine's evidence of life; else inconclusive, saying what is missing."""
        forced = forced_verdict(j.findings, "log")
        if forced is not None:
            j.verdict = forced
        elif self.is_live(j):
            j.verdict = "live"
        else:
            j.verdict = "inconclusive"
            j.missing.extend(self.missing_evidence(j))
            j.add("DS304", "missing: " + "; ".join(j.missing) + ".")

    def make(self, **fields: Any) -> Verdict:
        return self.verdict_class(feature=self.feature.name, engine=self.name, version_key=self.version_key, **fields)

    def empty(self, text_lines: int) -> Verdict:
        """A log with no line of this engine's (empty, or another program's output)."""
        return self.make(verdict="inconclusive", engine_version=self.empty_version(), speculative_algorithm=None,
                         overlap_schedule=None, worker=no_worker(), server_ready=False, crashed=False, crash=None,
                         marker=no_marker(), findings=[Finding("DS304", empty_message(text_lines, self.server_noun))],
                         launch={"index": 0, "of": 0}, missing=[self.server_line if text_lines else "any log line"],
                         claims=no_claims())

    def decided(self, v: Verdict, *, quiet_for: float = 0.0) -> bool:
        """True when more log lines cannot change the verdict of this launch."""
        return v.verdict in ("dead", "crashed", "live", "ineffective")

    def exited(self, v: Verdict) -> Verdict:
        """The server process is gone before it was ready: a crash, whatever the log says."""
        la = self.launches[-1] if self.launches else None
        return v.died("ProcessExited", "the server process exited", la.last_line if la else None, self.exited_finding)
