"""Server command lines as evidence of what was asked for (what sglang resolved is in its
server_args dump)."""
from __future__ import annotations

from typing import Any


def flag_values(flags: list[str]) -> dict[str, Any]:
    """--name value / --name=value / bare --name (True) from an sglang argv tail."""
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
