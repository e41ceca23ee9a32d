"""Checks of user input that several commands share: each bad value is one UsageError line (exit 2)."""
from __future__ import annotations

from typing import Optional

from dynspec_cli.cli.errors import UsageError


def sglang_version(value: Optional[str], what: str = "--sglang-version") -> Optional[str]:
    """A release the tables know, as given. An unparseable or unknown version would silently turn
    every version-keyed rule off (a dead log read as inconclusive), so it is refused."""
    if value is None:
        return None
    from packaging.version import InvalidVersion, Version

    from dynspec_cli.knowledge.sglang import knowledge

    try:
        Version(value)
    except InvalidVersion:
        raise UsageError(f"{what} {value!r}: not a version (like 0.5.9)") from None
    k = knowledge()
    if not k.known(value):
        raise UsageError(f"{what} {value}: not an sglang release dynspec knows ({k.releases[0]} – {k.releases[-1]})")
    return value


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
