"""Reading the launcher's one-line `server_args=` dump without eval.

<= 0.5.18 it is the dataclass repr `ServerArgs(model_path='...', tp_size=8, ...)`; from 0.5.19 a
dict repr `{'model_path': '...', ...}`. Lines are often cut (log shippers, terminal copy, GitHub
issues), so parsing is incremental: every complete top-level item before the cut is kept."""
from __future__ import annotations

import ast
from typing import Any

_OPEN = {"(": ")", "[": "]", "{": "}"}
_SCALARS = {"None": None, "True": True, "False": False}


def parse_dump(dump: str) -> tuple[dict[str, Any], bool]:
    """Return (fields, complete). `dump` starts with `ServerArgs(` or `{`."""
    if dump.startswith("ServerArgs("):
        body, kv_sep, close = dump[len("ServerArgs("):], "=", ")"
    elif dump.startswith("{"):
        body, kv_sep, close = dump[1:], ":", "}"
    else:
        return {}, False
    fields: dict[str, Any] = {}
    items, complete = _split_top(body, close)
    for item in items:
        key, sep, value = item.partition(kv_sep)
        if not sep:
            continue
        key = key.strip()
        if kv_sep == ":":
            if len(key) >= 2 and key[0] == key[-1] and key[0] in "'\"":
                key = key[1:-1]
            else:
                continue
        if not key.isidentifier():
            continue
        fields[key] = _value(value.strip())
    return fields, complete


def _split_top(body: str, close: str) -> tuple[list[str], bool]:
    """Split at top-level commas; stop at the closing bracket. Returns (items, closed)."""
    items: list[str] = []
    stack: list[str] = []
    quote = None
    start = 0
    i, n = 0, len(body)
    while i < n:
        c = body[i]
        if quote:
            if c == "\\":
                i += 2
                continue
            if c == quote:
                quote = None
        elif c in "'\"":
            quote = c
        elif c in _OPEN:
            stack.append(_OPEN[c])
        elif stack and c == stack[-1]:
            stack.pop()
        elif not stack and c == close:
            items.append(body[start:i])
            return [s for s in items if s.strip()], True
        elif not stack and c == ",":
            items.append(body[start:i])
            start = i + 1
        i += 1
    # Cut short: the last item is incomplete unless it is a finished scalar followed by nothing.
    return [s for s in items if s.strip()], False


def _value(text: str) -> Any:
    if text in _SCALARS:
        return _SCALARS[text]
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError, TypeError):
        return text  # enum reprs, objects: keep the text
