"""What every engine's preflight shares (engines/<name>/preflight.py): its bad-input errors, reading
the inspector's one JSON document, the order of its findings and the registry's preflight policy
(configs/findings.toml, context `preflight`: a dead finding makes the verdict dead).

Preflight's verdicts and exit codes (verdict/codes.py): reachable 0, dead 1, unknown 3, ineffective 5."""
from __future__ import annotations

import json
from typing import Any

from dynspec_cli.knowledge.findings import Finding, forced_verdict
from dynspec_cli.verdict.core import ordered


class InputError(Exception):
    """Bad input to a preflight: one line, exit 2 (cli/errors.py)."""


class InterpreterError(InputError):
    """The `python` preflight was given cannot be run on the host."""


class PatchError(InputError):
    """The `--patch` diff does not describe the installed engine."""


def facts_of(res, python: str) -> dict[str, Any]:
    """The inspector's document from a finished run of it (its stdout), or one saying why there is none."""
    try:
        return json.loads(res.stdout)
    except ValueError:
        err = res.stderr.decode("utf-8", "replace").strip().splitlines()
        return {"ok": False, "error": f"{python} did not run the inspector: {err[-1] if err else f'exit {res.exit_code}'}"}


def judged(p: Any, steps) -> bool:
    """Run an engine's preflight steps over one preflight in the making (`p`, with a `verdict`
    attribute) until one settles the verdict early; True when one did."""
    for step in steps:
        step(p)
        if p.verdict is not None:
            return True
    return False


def decided(findings: list[Finding], otherwise: str) -> str:
    """dead when a finding's preflight effect says so, else `otherwise`."""
    return "dead" if forced_verdict(findings, "preflight") == "dead" else otherwise


__all__ = ["InputError", "InterpreterError", "PatchError", "facts_of", "judged", "decided", "ordered"]
