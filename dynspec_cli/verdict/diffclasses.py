"""`verify --patch`: the classes the diff's behaviour hunks change, which the log verdict then
checks (as `--patched-class` names them), instead of the feature's default [[patch]] location.

Verify has no server python to ask. An engine that can map the diff onto the install this
interpreter would import says which classes its hunks change there (`installed`, sglang's:
engines/sglang/diffclasses.py); a hunk it cannot map is read from the diff's own lines: the nearest
`class` line above the hunk's first added line, else git's hunk header. A few files parsed:
milliseconds."""
from __future__ import annotations

import re
from typing import Callable, Optional

_CLASS = re.compile(r"^\s*class\s+([A-Za-z_]\w*)")


def from_diff(text: str, marker_literal: str, installed: Optional[dict[tuple[str, int], list[str]]] = None,
              skip: Callable[[str], bool] = lambda path: False) -> list[str]:
    """The classes of the diff's behaviour hunks, in the diff's order. `installed`: (diff path, hunk
    index) -> classes, for the hunks an engine mapped onto its install; `skip`: files that are not
    the patch's behaviour (the engine's flags file)."""
    from dynspec_cli.inject.inspector_common import parse_diff

    files, _ = parse_diff(text)
    out: list[str] = []
    for f in files:
        path = diff_path(f)
        if skip(path) or not path.endswith(".py"):
            continue  # flags (judged as flags), or not code
        for i, h in enumerate(f["hunks"]):
            found = (installed or {}).get((path, i))
            out += found if found is not None else _from_text(h, marker_literal)
    return list(dict.fromkeys(out))


def diff_path(f: dict) -> str:
    old, new = f.get("old") or "", f.get("new") or ""
    p = old if new == "/dev/null" else new
    return p[2:] if p[:2] in ("a/", "b/") else p


def _from_text(h: dict, literal: str) -> list[str]:
    """The hunk's class from its own lines, when it adds code besides the line logging the marker."""
    code = [b for _, b in h["added_lines"] if b.strip() and not b.strip().startswith("#")]
    if not code or all(literal in b for b in code):
        return []
    cls = None
    m = _CLASS.match(h["header"].split("@@", 2)[-1])
    if m:
        cls = m.group(1)
    first = h["added_lines"][0][0]
    ln = h["new_start"]
    for body in h["new_side"]:
        if ln >= first:
            break
        m = _CLASS.match(body)
        if m:
            cls = m.group(1)
        ln += 1
    return [cls] if cls else []


def unjudged(text: str) -> list[dict]:
    """The hunks of a diff no preflight judged (`launch --no-preflight`, `prove --patch`), from its text
    alone: file and lines, role and reach not known. Enough for the log's judge to see a diff that
    changes only the engine's flags file (sglang's DS228)."""
    from dynspec_cli.inject.inspector_common import parse_diff

    out = []
    for f in parse_diff(text)[0]:
        for h in f["hunks"]:
            added = [no for no, _ in h["added_lines"]] or [h["new_start"]]
            out.append({"file": diff_path(f), "class": None, "function": None, "lines": [min(added), max(added)],
                        "role": "not judged", "reach": "unknown"})
    return out
