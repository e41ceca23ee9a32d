"""Checks of user input that several commands share: each bad value is one UsageError line (exit 2)."""
from __future__ import annotations

from typing import Optional

from dynspec_cli.cli.errors import UsageError


def release(key: str, value: Optional[str], what: str) -> Optional[str]:
    """A release pinned by the user (an option or a profile field named after an engine's release,
    `key`: engines/protocol.py version_key), as the engine that owns the key checks it. An unknown
    version would silently turn every version-keyed rule off, so the engine refuses it."""
    if value is None:
        return None
    from dynspec_cli import engines

    engine = engines.by_version_key(key)
    try:
        return engine.check_version(value, what) if engine is not None else value
    except ValueError as e:
        raise UsageError(str(e)) from None


def python_path(value: str, what: str = "--python") -> str:
    if not value or value.startswith("-") or "\n" in value or "\x00" in value:
        raise UsageError(f"{what} {value!r}: not an interpreter path (it is empty, starts with '-' or holds a newline)")
    return value


def env_item(item: str) -> str:
    """`--env NAME=VALUE`, or `--env NAME`: the value of NAME in this shell, so a secret need not be
    typed on dynspec's own command line (as `docker run -e NAME`)."""
    import os
    import re

    name, eq, _ = item.partition("=")
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
        raise UsageError(f"--env {item!r}: expected NAME=VALUE or NAME")
    if eq:
        return item
    if name not in os.environ:
        raise UsageError(f"--env {name}: {name} is not set in this shell (give NAME=VALUE, or export it)")
    return f"{name}={os.environ[name]}"
