"""Where the test suite's dynspec home is (tests/conftest.py sets DYNSPEC_HOME to a temp dir)."""
import os
from pathlib import Path


def dynspec_home() -> Path:
    return Path(os.environ["DYNSPEC_HOME"])


def runs_dir() -> Path:
    return dynspec_home() / "runs"


def started(name: str) -> bool:
    """The run's record is complete: its server was spawned and its pid is known (a record is
    first written as "starting", before the spawn)."""
    import json

    try:
        rec = json.loads((runs_dir() / f"{name}.json").read_text())
    except (OSError, ValueError):
        return False
    return rec.get("state", "started") == "started" and rec.get("pgid", 0) > 1
