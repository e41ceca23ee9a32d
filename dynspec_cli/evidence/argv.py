"""Server command lines as evidence of what was asked for (what the engine resolved is in its own
lines, e.g. sglang's server_args dump)."""
from __future__ import annotations

from typing import Any, Optional, Sequence


def flag_values(flags: list[str]) -> dict[str, Any]:
    """--name value / --name=value / bare --name (True) from a server's argv tail."""
    out: dict[str, Any] = {}
    i = 0
    while i < len(flags):
        a = flags[i]
        if a.startswith("--"):
            name, eq, val = a.partition("=")
            if eq:
                out[name] = val
            elif i + 1 < len(flags) and not flags[i + 1].startswith("--"):
                out[name] = flags[i + 1]
                i += 1
            else:
                out[name] = True
        i += 1
    return out


def flag_value(argv: Sequence[str], flag: str) -> Optional[str]:
    """The value of `flag` in a server command line (`--flag V` or `--flag=V`); the last one wins,
    as with argparse; None when it is not there."""
    value = None
    for i, a in enumerate(argv):
        if a == flag and i + 1 < len(argv):
            value = argv[i + 1]
        elif a.startswith(flag + "="):
            value = a[len(flag) + 1:]
    return value


def int_flag(argv: Sequence[str], flag: str) -> Optional[int]:
    """flag_value as an integer (ValueError when it is no integer)."""
    value = flag_value(argv, flag)
    return None if value is None else int(value)
