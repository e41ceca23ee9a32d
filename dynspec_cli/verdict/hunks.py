"""The per-hunk entries every engine's preflight writes for `--patch`, and what is read from them.

Each engine judges a scope of a hunk against what it will run (sglang: engines/sglang/hunks.py, its
workers; vLLM: engines/vllm/hunks.py, its runner and proposer). What the entry holds, the roles a scope
can have and how the patch's reach follows from its behaviour hunks are the same for both: they live
here, so the run record's `patch.hunks`, the reports and the log's judge read every engine's alike."""
from __future__ import annotations

from typing import Any, Optional

REACHABLE, NOT_REACHABLE, UNKNOWN = "reachable", "not reachable", "unknown"


def scope_role(sc: dict) -> str:
    """marker, marker+behaviour, behaviour or comment (an engine adds its own, e.g. sglang's flag)."""
    if sc.get("marker"):
        return "marker+behaviour" if sc.get("behaviour") else "marker"
    # comments and blank lines change nothing that runs (an inspector too old to say: behaviour)
    return "behaviour" if sc.get("behaviour", True) else "comment"


def is_behaviour(e: dict) -> bool:
    return e["role"] in ("behaviour", "marker+behaviour")


def method_of(sc: dict) -> Optional[str]:
    """The method of the hunk's class the lines sit in (`Cls.draft.<locals>.f` is in `draft`)."""
    cls, qual = sc.get("class"), sc.get("qualname") or ""
    if not cls:
        return sc.get("function")
    parts = [p for p in qual.split(".") if p != "<locals>"]
    i = len(parts) - 1 - parts[::-1].index(cls) if cls in parts else len(parts)
    return parts[i + 1] if i + 1 < len(parts) else None


def entry(path, h, sc, role, reach, reason, evidence, installed=None) -> dict[str, Any]:
    """One scope of one hunk: file, class, function, lines, role, reach and why."""
    sc = sc or {}
    return {"file": path, "installed": installed, "header": h.get("header"), "applied": h.get("applied"), "class": sc.get("class"),
            "function": method_of(sc) if sc else None, "qualname": sc.get("qualname"), "lines": sc.get("lines"),
            "role": role, "marker": bool(sc.get("marker")), "reach": reach, "reason": reason, "evidence": evidence}


def summary(entries: list[dict]) -> Optional[str]:
    """The patch's reach from its behaviour hunks: reachable when one can run, not reachable when
    none can, unknown otherwise; None when the diff has no behaviour hunk (the marker decides)."""
    b = [e for e in entries if is_behaviour(e)]
    if not b:
        return None
    if any(e["reach"] == REACHABLE for e in b):
        return REACHABLE
    if all(e["reach"] == NOT_REACHABLE for e in b):
        return NOT_REACHABLE
    return UNKNOWN
