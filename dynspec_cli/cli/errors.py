"""Bad input is one line on stderr and exit 2, whichever command meets it."""
from __future__ import annotations

import sys

BAD_INPUT = 2


class UsageError(Exception):
    """Bad input: printed as one line, exit 2."""


def report(msg: str) -> int:
    sys.stderr.write(f"dynspec: error: {msg}\n")
    return BAD_INPUT


def known_errors() -> tuple:
    """The failures that mean bad input or an unusable target, not a bug in dynspec."""
    from dynspec_cli.engines import EngineError  # (a feature file or profile naming no registered engine)
    from dynspec_cli.evidence.scan import LogError
    from dynspec_cli.knowledge.tables import ConfigError
    from dynspec_cli.prove.plan import PlanError
    from dynspec_cli.run.control import RunError
    from dynspec_cli.run.patchfile import DiffError
    from dynspec_cli.transport import TransportError
    from dynspec_cli.verdict.preflight import InputError  # (every engine's preflight raises its bad input so)

    return ConfigError, LogError, UsageError, RunError, TransportError, PlanError, InputError, DiffError, EngineError
