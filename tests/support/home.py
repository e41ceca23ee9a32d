"""Where the test suite's dynspec home is (tests/conftest.py sets DYNSPEC_HOME to a temp dir)."""
import os
from pathlib import Path


def dynspec_home() -> Path:
    return Path(os.environ["DYNSPEC_HOME"])


def runs_dir() -> Path:
    return dynspec_home() / "runs"
