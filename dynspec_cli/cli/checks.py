"""Checks of user input that several commands share: each bad value is one UsageError line (exit 2)."""
from __future__ import annotations

import re
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
        raise UsageError(f"--patch {e}") from None
    except OSError as e:
        raise UsageError(f"{path}: cannot read the diff: {e.strerror}") from None
    name = "standard input" if path == "-" else path
    if len(data) > MAX_DIFF:
        raise UsageError(f"{name}: more than {MAX_DIFF >> 20} MiB, not the diff of a patch")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise UsageError(f"{name}: not a text diff (byte {e.start} is not UTF-8); give the output of `git diff`") from None
    binary = _BINARY.search(text)
    if binary:  # a binary hunk has no lines dynspec could place in a function
        raise UsageError(f"{name}: a binary diff ({binary.group(0).strip()!r}); give a text diff of the Python files (`git diff` without --binary)")
    if not _DIFF.search(text):  # the inspector would find no file in it, and say nothing
        why = "it is empty" if not text.strip() else "no 'diff --git' line, no '---'/'+++' file with an '@@' hunk"
        raise UsageError(f"{name}: not a unified diff ({why}); give the output of `git diff`")
    if not _HUNK.search(text):
        raise UsageError(f"{name}: a diff without a hunk (no '@@' line: only renames or mode changes); nothing to judge")
    return text


_BINARY = re.compile(r"^(GIT binary patch|Binary files .* differ)$", re.M)
_HUNK = re.compile(r"^@@ -\d+(?:,\d+)? \+\d+(?:,\d+)? @@", re.M)
_DIFF = re.compile(r"^diff --git |^--- .*\n\+\+\+ .*\n@@ -\d+(?:,\d+)? \+\d+(?:,\d+)? @@", re.M)


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
