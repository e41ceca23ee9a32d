"""`verify --patch`: the classes the diff's behaviour hunks change, which the log verdict then
checks (as `--patched-class` names them), instead of the feature's default [[patch]] location.

The hunks are parsed and classified by the inspector's own code (inject/inspector/diff.py: one
parser) and verdict/hunks.py's roles. Verify has no server python to ask, so the diff is mapped onto
the sglang this interpreter would import, found without importing it; where that install does not
hold the patched text, the class comes from the diff's own lines (the nearest `class` line above
the hunk's first added line, else git's hunk header). A few files parsed: milliseconds."""
from __future__ import annotations

import re
from typing import Optional

_CLASS = re.compile(r"^\s*class\s+([A-Za-z_]\w*)")


def patched_classes(text: str, marker_literal: str) -> list[str]:
    """The classes of the diff's behaviour hunks, in the diff's order."""
    from dynspec_cli.inject.inspector.diff import parse_diff

    files, _ = parse_diff(text)
    pkg = _local_package()
    installed = _from_install(text, pkg, marker_literal) if pkg else {}
    out: list[str] = []
    for f in files:
        path = _path(f)
        if path.replace("\\", "/").rsplit("/", 1)[-1] == "server_args.py" or not path.endswith(".py"):
            continue  # flags (judged as flags), or not code
        for i, h in enumerate(f["hunks"]):
            found = installed.get((path, i))
            out += found if found is not None else _from_text(h, marker_literal)
    return list(dict.fromkeys(out))


def _path(f: dict) -> str:
    old, new = f.get("old") or "", f.get("new") or ""
    p = old if new == "/dev/null" else new
    return p[2:] if p[:2] in ("a/", "b/") else p


def _local_package() -> Optional[str]:
    import importlib.util
    import os

    try:
        spec = importlib.util.find_spec("sglang")
    except (ImportError, ValueError):
        return None
    return os.path.dirname(spec.origin) if spec is not None and spec.origin else None


def analysed(text: str, literal: str) -> Optional[dict]:
    """The diff mapped onto the sglang this interpreter would import (each hunk's scopes: class,
    function, marker, behaviour), for the log's judge to place each hunk against the worker the log
    shows; None when no sglang is importable here."""
    pkg = _local_package()
    return _analyse(text, pkg, literal) if pkg else None


def _analyse(text: str, pkg: str, literal: str) -> dict:
    from dynspec_cli.inject.inspector.common import Source
    from dynspec_cli.inject.inspector.diff import analyse_diff, mark_roles
    from dynspec_cli.inject.inspector.marker import marker_hits_in

    diff = analyse_diff(text, pkg)
    hits = [h for f in diff["files"] if f.get("present") and str(f["installed_path"]).endswith(".py")
            for h in marker_hits_in(Source.get(f["installed_path"]), literal, None)]
    mark_roles(diff, hits)
    return diff


def _from_install(text: str, pkg: str, literal: str) -> dict[tuple[str, int], list[str]]:
    """(diff path, hunk index) -> behaviour classes, for the hunks the installed files hold."""
    from dynspec_cli.verdict import hunks

    diff = _analyse(text, pkg, literal)
    out = {}
    for f in diff["files"]:
        for i, h in enumerate(f["hunks"]):
            if h.get("applied") not in ("exact", "offset") or not h.get("scopes"):
                continue
            out[(f["diff_path"], i)] = [sc["class"] for sc in h["scopes"] if sc.get("class")
                                        and hunks.role(f["diff_path"], sc) in ("behaviour", "marker+behaviour")]
    return out


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
