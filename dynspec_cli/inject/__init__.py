"""Programs that run inside someone else's interpreter (the server's python, on its host): each
is stdlib-only, imports nothing of dynspec, and prints JSON even when it fails. dynspec sends
their text on stdin; `path`/`text` are the one way to find them."""
from __future__ import annotations

from pathlib import Path

HERE = Path(__file__).resolve().parent


def path(name: str) -> Path:
    """A program (or folder, e.g. "probe") of this package, by file name."""
    p = HERE / name
    if not p.exists():
        raise FileNotFoundError(f"dynspec_cli/inject/{name} is missing from this install")
    return p


def text(name: str) -> str:
    return path(name).read_text(encoding="utf-8")
