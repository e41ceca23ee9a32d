"""Secrets never reach the terminal, the JSON or the run record."""
from __future__ import annotations

import fnmatch
from typing import Mapping, Sequence

SECRET_ENV = ("*_TOKEN", "*_KEY", "*PASSWORD*", "*SECRET*", "*_PASS", "*CREDENTIALS*")
SECRET_FLAGS = ("--api-key", "--admin-api-key", "--hf-token", "--token")
MASK = "***"


def is_secret(name: str) -> bool:
    up = name.upper()
    return any(fnmatch.fnmatchcase(up, p) for p in SECRET_ENV)


def redact_env(env: Mapping[str, str]) -> dict[str, str]:
    return {k: (MASK if is_secret(k) else v) for k, v in env.items()}


def redact_argv(argv: Sequence[str]) -> list[str]:
    out, hide = [], False
    for a in argv:
        if hide:
            out.append(MASK)
            hide = False
            continue
        flag, eq, _ = a.partition("=")
        if flag in SECRET_FLAGS or (flag.startswith("--") and is_secret(flag[2:].replace("-", "_"))):
            if eq:
                out.append(f"{flag}={MASK}")
            else:
                out.append(a)
                hide = True
            continue
        out.append(a)
    return out


def scrub(text: str, env: Mapping[str, str]) -> str:
    """Remove secret values from a text (e.g. a log line echoing the command)."""
    for k, v in env.items():
        if is_secret(k) and v and len(v) >= 4:
            text = text.replace(v, MASK)
    return text
