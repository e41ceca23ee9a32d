"""The user's diff as a run carries it: read once (cli/checks.py read_diff), then its path, sha256,
the installed files it touches and its hunks' summary go into the run record and from there into
prove's receipt, which the gate checks (the files must still hash as proven)."""
from __future__ import annotations

import hashlib
import os
from typing import Any, Optional


def read(path: str, what: str = "--patch") -> tuple[str, str]:
    """(absolute path, text) of the diff at `path`; one UsageError line (exit 2) when it is missing,
    unreadable or not a text unified diff."""
    from dynspec_cli.cli import checks
    from dynspec_cli.cli.errors import UsageError

    if path != "-" and not os.path.exists(path):
        raise UsageError(f"{what} {path}: no such file")
    return (path if path == "-" else os.path.abspath(path)), checks.read_diff(path)


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def summary(path: str, text: str, pre: Optional[dict[str, Any]]) -> dict[str, Any]:
    """What the run record keeps of the diff: path, sha256, the installed files it touches (from
    preflight's per-hunk judgement, verdict/hunks.py) and one line per hunk scope."""
    entries = (pre or {}).get("hunks") or []
    files = sorted({e["installed"] for e in entries if e.get("installed")})
    return {"path": path, "sha256": sha256(text), "files": files,
            "hunks": [{k: e.get(k) for k in ("file", "class", "function", "lines", "role", "reach")} for e in entries]}
