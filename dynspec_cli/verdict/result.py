"""The verdict every engine's judge returns, and what it is made of that no engine owns: the
claims' shape (each proven with its line, or null) and the text of evidence lines."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from dynspec_cli.evidence.lines import Line
from dynspec_cli.knowledge.findings import Finding
from dynspec_cli.verdict.codes import EXIT

NAMES = ("crashed", "server_ready", "speculative_algorithm", "worker", "speculative")
TOP_LEVEL = ("crashed", "server_ready", "speculative_algorithm", "speculative")  # also top-level JSON fields


def claim(value: Any, line: Optional[Line], basis: str) -> dict[str, Any]:
    if value is None:
        return {"value": None, "line": None, "text": None, "basis": basis or None}
    return {"value": value, "line": (line.no or None) if line else None,
            "text": line.text[:300] if line else None, "basis": basis}


def no_claims() -> dict[str, Any]:
    return {k: claim(None, None, "") for k in NAMES}


@dataclass
class Verdict:
    verdict: str
    feature: str
    engine_version: Optional[str]  # the engine's release (or a range of them), null if unknown
    speculative_algorithm: Optional[str]
    overlap_schedule: Optional[bool]
    worker: dict[str, Any]
    server_ready: bool
    crashed: bool
    crash: Optional[dict[str, Any]]
    marker: dict[str, Any]
    findings: list[Finding]
    launch: dict[str, Any]
    missing: list[str] = field(default_factory=list)
    probe: Optional[dict[str, Any]] = None
    claims: Optional[dict[str, Any]] = None  # each claim proven with its line, or null (engines/sglang/claims.py)
    requested: Optional[dict[str, Any]] = None  # the log's launch command next to what server_args resolved
    engine: str = ""  # whose log it is (the engine's name, engines/__init__.py)
    compute_path: Optional[dict[str, Any]] = None  # CUDA graphs captured and used (engines/sglang/compute_path.py); null: not judged
    stopped: Optional[dict[str, Any]] = None  # the server was asked to stop: the signal, its line, the exits after it
    # the kinds of evidence: the marker, the effect (Decode batch lines by running batch against the
    # threshold), and which of them the verdict rests on (`verdict_from`)
    evidence: Optional[dict[str, Any]] = None
    # the engine's own JSON key of its release, written beside engine_version (engines/protocol.py
    # version_key: the name its consumers read, e.g. "sglang_version"); None: engine_version only
    version_key: Optional[str] = None

    @property
    def exit_code(self) -> int:
        return EXIT[self.verdict]

    def to_json(self) -> dict[str, Any]:
        doc = {
            "verdict": self.verdict,
            "exit_code": self.exit_code,
            "feature": self.feature,
            "engine": self.engine,
            "engine_version": self.engine_version,
            "speculative_algorithm": self.speculative_algorithm,
            "overlap_schedule": self.overlap_schedule,
            "worker": self.worker,
            "server_ready": self.server_ready,
            "crashed": self.crashed,
            "crash": self.crash,
            "marker": self.marker,
            "findings": [f.to_json() for f in self.findings],
            "launch": self.launch,
            "missing": self.missing,
            "probe": self.probe,
            "claims": self.claims,
            "requested": self.requested,
            "compute_path": self.compute_path,
            "stopped": self.stopped,
            "evidence": self.evidence,
        }
        if self.version_key:  # (the name the engine's consumers read; an engine without one has engine_version only)
            doc[self.version_key] = self.engine_version
        if self.claims:  # the top-level facts are the claims' values: null when the evidence does not say
            for key in TOP_LEVEL:
                doc[key] = self.claims[key]["value"]
        return doc

    def died(self, exception: str, message: str, line: Optional[Line], finding: str) -> "Verdict":
        """The server is gone (its process exited, or its log stalled): crashed, unless already dead."""
        no, text = ((line.no or None), line.text) if line is not None else (None, None)
        self.crashed = True
        self.verdict = "dead" if self.verdict == "dead" else "crashed"
        self.crash = {"exception": exception, "message": message, "line": no, "text": text}
        self.findings.append(Finding("DS303", finding, line=no, text=text))
        if self.claims:
            self.claims["crashed"] = claim(True, line, message)
        return self



def empty_message(text_lines: int, engine: str) -> str:
    """DS304's message for a log without one line of `engine`'s: empty, or another program's text."""
    if not text_lines:
        return "the log is empty."
    which = "its one line is not" if text_lines == 1 else f"none of its {text_lines} lines is"
    return f"{which} from {engine} (another program's output, or the server has not written its first line yet)."


def clip_text(text: str, n: int = 300) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


def where(e: dict) -> str:
    """A scope of a file a document names (a hunk of a diff, a marker hit): `Class.function (file:a-b)`."""
    name = ".".join(x for x in (e.get("class"), e.get("function")) if x) or "(module)"
    lines = e.get("lines")
    at = f"{e['file']}:{lines[0]}" + (f"-{lines[1]}" if lines and lines[1] != lines[0] else "") if lines else e["file"]
    return f"{name} ({at})"
