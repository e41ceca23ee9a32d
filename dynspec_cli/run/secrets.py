"""Secrets never reach the terminal, the JSON or the run record."""
from __future__ import annotations

import fnmatch
from typing import Callable, Mapping, Sequence

SECRET_ENV = ("*_TOKEN", "*_KEY", "*PASSWORD*", "*SECRET*", "*_PASS", "*CREDENTIALS*")
SECRET_FLAGS = ("--api-key", "--admin-api-key", "--hf-token", "--token")
MASK = "***"


def is_secret(name: str) -> bool:
    up = name.upper()
    return any(fnmatch.fnmatchcase(up, p) for p in SECRET_ENV)


def redact_env(env: Mapping[str, str]) -> dict[str, str]:
    return {k: (MASK if is_secret(k) else v) for k, v in env.items()}


def _secret_flag(flag: str) -> bool:
    return flag in SECRET_FLAGS or (flag.startswith("--") and is_secret(flag[2:].replace("-", "_")))


def split_secrets(argv: Sequence[str], word: Callable[[int], str]) -> tuple[list[str], list[str]]:
    """argv with every secret flag's value (`--api-key V` or `--api-key=V`) replaced by word(n)
    (n from 1), and the values taken out, in that order."""
    out: list[str] = []
    values: list[str] = []
    hide = False
    for a in argv:
        if hide:
            values.append(a)
            out.append(word(len(values)))
            hide = False
            continue
        flag, eq, value = a.partition("=")
        if _secret_flag(flag):
            if eq:
                values.append(value)
                a = f"{flag}={word(len(values))}"
            else:
                hide = True
        out.append(a)
    return out, values


def redact_argv(argv: Sequence[str]) -> list[str]:
    return split_secrets(argv, lambda n: MASK)[0]
