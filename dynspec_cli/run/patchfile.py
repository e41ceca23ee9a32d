"""The user's diff as a run carries it: read once (`read_diff`: a text unified diff, or one line
saying why not), then its path, sha256, the installed files it touches and its hunks' summary go
into the run record and from there into prove's receipt, which the gate checks (the files must
still hash as proven)."""
from __future__ import annotations

import hashlib
import os
import re
from typing import Any, Optional


class DiffError(ValueError):
    """The `--patch` file is not a diff dynspec can read (bad input: one line, exit 2)."""


def read(path: str, what: str = "--patch") -> tuple[str, str]:
    """(absolute path, text) of the diff at `path`; one DiffError line (exit 2) when it is missing,
    unreadable or not a text unified diff."""
    if path != "-" and not os.path.exists(path):
        raise DiffError(f"{what} {path}: no such file")
    return (path if path == "-" else os.path.abspath(path)), read_diff(path)


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def summary(path: str, text: str, pre: Optional[dict[str, Any]]) -> dict[str, Any]:
    """What the run record keeps of the diff: path, sha256, the installed files it touches (from
    preflight's per-hunk judgement, engines/sglang/hunks.py) and one line per hunk scope."""
    from dynspec_cli.verdict import diffclasses

    entries = (pre or {}).get("hunks") or []
    files = sorted({e["installed"] for e in entries if e.get("installed")})
    return {"path": path, "sha256": sha256(text), "files": files,
            "hunks": [{k: e.get(k) for k in ("file", "class", "function", "lines", "role", "reach")} for e in entries]
            or diffclasses.unjudged(text)}



MAX_DIFF = 16 << 20


def read_diff(path: str) -> str:
    """The text of a `--patch` file (a file, `-`, a pipe such as `<(git diff)`): a unified diff is
    text (UTF-8), and not larger than 16 MiB; a device or a FIFO nothing writes to is refused."""
    from dynspec_cli.evidence.scan import LogError, open_stream

    try:
        src = open_stream(path, what="a diff")
        if src is not None:
            with src:
                data = b""
                while len(data) <= MAX_DIFF and (chunk := src.read()):
                    data += chunk
        else:
            with open(path, "rb") as fh:
                data = fh.read(MAX_DIFF + 1)
    except LogError as e:
        raise DiffError(f"--patch {e}") from None
    except OSError as e:
        raise DiffError(f"{path}: cannot read the diff: {e.strerror}") from None
    name = "standard input" if path == "-" else path
    if len(data) > MAX_DIFF:
        raise DiffError(f"{name}: more than {MAX_DIFF >> 20} MiB, not the diff of a patch")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise DiffError(f"{name}: not a text diff (byte {e.start} is not UTF-8); give the output of `git diff`") from None
    binary = _BINARY.search(text)
    if binary:  # a binary hunk has no lines dynspec could place in a function
        raise DiffError(f"{name}: a binary diff ({binary.group(0).strip()!r}); give a text diff of the Python files (`git diff` without --binary)")
    if not _DIFF.search(text):  # the inspector would find no file in it, and say nothing
        why = "it is empty" if not text.strip() else "no 'diff --git' line, no '---'/'+++' file with an '@@' hunk"
        raise DiffError(f"{name}: not a unified diff ({why}); give the output of `git diff`")
    if not _HUNK.search(text):
        raise DiffError(f"{name}: a diff without a hunk (no '@@' line: only renames or mode changes); nothing to judge")
    return text


_BINARY = re.compile(r"^(GIT binary patch|Binary files .* differ)$", re.M)
_HUNK = re.compile(r"^@@ -\d+(?:,\d+)? \+\d+(?:,\d+)? @@", re.M)
_DIFF = re.compile(r"^diff --git |^--- .*\n\+\+\+ .*\n@@ -\d+(?:,\d+)? \+\d+(?:,\d+)? @@", re.M)
