"""The finding registry (configs/findings.toml): codes, severities and their docs."""
from __future__ import annotations

import functools
from typing import Any

import msgspec

from dynspec_cli.knowledge.tables import FindingDoc, cached, configs_dir, load_toml


@functools.lru_cache(maxsize=1)
def registry() -> dict[str, FindingDoc]:
    path = configs_dir() / "findings.toml"
    return cached("findings", [path], lambda: load_toml(path, dict[str, FindingDoc]))


def doc(code: str) -> FindingDoc | None:
    return registry().get(code.upper())


class Finding(msgspec.Struct):
    code: str
    message: str
    severity: str = ""
    line: int | None = None  # 1-based line number in the log (None: not from a log line)
    text: str | None = None  # the evidence line's text
    fix: str | None = None
    params: dict[str, Any] | None = None  # numbers for the registry's fix_template
    rank: int | None = None  # group findings: the node
    host: str | None = None
    file: str | None = None

    def __post_init__(self) -> None:
        d = doc(self.code)
        if d is None:
            raise KeyError(f"finding code {self.code} is not in configs/findings.toml")
        if not self.severity:
            self.severity = d.severity
        if self.fix is None:
            self.fix = d.fix_template.format(**self.params) if d.fix_template and self.params else d.fix

    @property
    def name(self) -> str:
        return doc(self.code).name

    def effect(self, context: str) -> str | None:
        """What this finding does to the verdict in `context` (log, preflight, group): the
        registry's policy, not the code's."""
        return doc(self.code).verdict.get(context)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"code": self.code, "name": self.name, "severity": self.severity,
                               "message": self.message, "line": self.line, "text": self.text, "fix": self.fix}
        for key in ("rank", "host", "file"):
            if getattr(self, key) is not None:
                out[key] = getattr(self, key)
        return out


def forced_verdict(findings: list[Finding], context: str) -> str | None:
    """"dead" if any finding makes the verdict dead in `context`, else "crashed" if any makes it
    crashed, else "ineffective", else None (the verdict rests on the other evidence)."""
    effects = {f.effect(context) for f in findings}
    for v in ("dead", "crashed", "ineffective"):
        if v in effects:
            return v
    return None


def markdown_table() -> str:
    """The findings table of docs/findings.md (report/findings_doc.py) and `dynspec explain --markdown`."""
    rows = ["| code | name | severity | what |", "|---|---|---|---|"]
    for code, d in registry().items():
        rows.append(f"| {code} | {d.name} | {d.severity} | {d.what.replace('|', '/')} |")
    return "\n".join(rows)
