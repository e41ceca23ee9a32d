"""The probe's line protocol, host side (its one owner): `DYNSPEC-PROBE {json}` lines that the
in-server probe (dynspec_cli/engines/sglang/probe, schema in its README) writes into the server log.
The judge, prove and the tests all read probe lines through here."""
from __future__ import annotations

from typing import Optional

PREFIX = "DYNSPEC-PROBE "
SCHEMA_VERSION = 2  # lines: 2 adds "hunk" events; lines of v1 read the same


def payload(msg: str) -> Optional[str]:
    """The JSON text of a probe line, wherever the prefix starts in it (another process's
    partial line, or a log collector's prefix, may precede it); None if there is none."""
    at = msg.find(PREFIX)
    return msg[at + len(PREFIX):] if at >= 0 else None


def parse_event(text: str) -> Optional[dict]:
    """A probe event: a JSON object with an integer `v` and a string `event`; None otherwise."""
    import json  # (here: a log without probe lines never needs it)

    try:
        doc = json.loads(text.strip())
    except (ValueError, TypeError, AttributeError):
        return None
    if not isinstance(doc, dict) or not isinstance(doc.get("v"), int) or not isinstance(doc.get("event"), str):
        return None
    return doc


def parse_line(text: str) -> Optional[dict]:
    """The event of one log line (with or without its newline), or None when it is not a probe line."""
    if not isinstance(text, str):
        return None
    body = payload(text)
    return parse_event(body) if body is not None else None
