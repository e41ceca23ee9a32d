"""The finding registry (configs/findings.toml): codes, severities and their docs."""
from __future__ import annotations

import functools

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

    def __post_init__(self) -> None:
        d = doc(self.code)
        if d is None:
            raise KeyError(f"finding code {self.code} is not in configs/findings.toml")
        if not self.severity:
            self.severity = d.severity
        if self.fix is None:
            self.fix = d.fix

    @property
    def name(self) -> str:
        return doc(self.code).name


def markdown_table() -> str:
    """The findings table for README.md (kept equal to it by tests/cli)."""
    rows = ["| code | name | severity | what |", "|---|---|---|---|"]
    for code, d in registry().items():
        rows.append(f"| {code} | {d.name} | {d.severity} | {d.what.replace('|', '/')} |")
    return "\n".join(rows)
