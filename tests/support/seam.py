"""The test of a seam (issue 30): a new member is one folder plus one registry line.

`with_member` builds a private copy of dynspec (the package and its `configs/`, as in a source tree),
copies a member's folder from `tests/` into it and adds ONE line to a registry dict; the CLI then
runs from that copy (`run`). `changed` says what differs between the copy and this checkout, so a
test can assert (and print) the size of the change: the new folder, and the one edited file with
its one added line.
"""
from __future__ import annotations

import difflib
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "dynspec_cli"


def with_member(dest: Path, folder: Path, into: str, registry: str, dict_name: str, line: str) -> Path:
    """A copy of dynspec under `dest` with `folder` copied to `dynspec_cli/<into>` and `line` added
    as the last entry of the dict literal `dict_name` in `dynspec_cli/<registry>`. Returns `dest`
    (put it first on PYTHONPATH)."""
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(PACKAGE, dest / "dynspec_cli", ignore=ignore)
    shutil.copytree(REPO / "configs", dest / "configs", ignore=ignore)
    shutil.copytree(folder, dest / "dynspec_cli" / into, ignore=ignore)
    reg = dest / "dynspec_cli" / registry
    text = reg.read_text(encoding="utf-8")
    m = re.search(rf"^{re.escape(dict_name)}\b[^=\n]*=\s*\{{", text, re.M)
    assert m, f"{registry} has no dict {dict_name}"
    close = _closing_brace(text, m.end() - 1)
    head = text[:close].rstrip()
    indent = re.search(r"\n([ \t]*)\S[^\n]*$", head)
    pad = indent.group(1) if indent and "\n" in text[m.end():close] else "    "
    sep = "" if head.endswith((",", "{")) else ","
    reg.write_text(head + sep + "\n" + pad + line + "\n" + text[close:], encoding="utf-8")
    return dest


def _closing_brace(text: str, start: int) -> int:
    depth = 0
    for i in range(start, len(text)):
        if text[i] == "{":
            depth += 1
        elif text[i] == "}":
            depth -= 1
            if depth == 0:
                return i
    raise AssertionError("unbalanced registry dict")


def changed(dest: Path) -> dict:
    """What the copy changed against this checkout: {"added": [files], "edited": {file: (added
    lines, removed lines)}} (paths relative to the copy's root; caches ignored)."""
    added, edited = [], {}
    for root in ("dynspec_cli", "configs"):
        for p in sorted((dest / root).rglob("*")):
            if p.is_dir() or "__pycache__" in p.parts or p.suffix == ".pyc":
                continue
            rel = p.relative_to(dest)
            orig = REPO / rel
            if not orig.exists():
                added.append(str(rel))
                continue
            a, b = orig.read_text(encoding="utf-8").splitlines(), p.read_text(encoding="utf-8").splitlines()
            if a != b:
                diff = list(difflib.unified_diff(a, b, lineterm="", n=0))
                plus = sum(1 for d in diff if d.startswith("+") and not d.startswith("+++"))
                minus = sum(1 for d in diff if d.startswith("-") and not d.startswith("---"))
                edited[str(rel)] = (plus, minus)
    return {"added": added, "edited": edited}


def run(dest: Path, *args: str, env: dict | None = None, timeout: float = 120, cwd: Path | None = None,
        **kw) -> subprocess.CompletedProcess:
    """`python -m dynspec_cli ARGS` from the copy (its folder first on PYTHONPATH)."""
    e = dict(os.environ, **(env or {}))
    e["PYTHONPATH"] = os.pathsep.join([str(dest)] + [p for p in [e.get("PYTHONPATH")] if p])
    return subprocess.run([sys.executable, "-m", "dynspec_cli", *args], env=e, cwd=cwd or dest,
                          capture_output=True, text=True, timeout=timeout, **kw)
