"""The placement seam (issue 30): outside place/, no module asks which placement it has. Fails,
naming file:line, on a comparison of anything with a registered placement's name (==, !=, in,
not in, match/case), on a lookup of the registry by such a name (KINDS["slurm"], place.get("group")),
and on an import of a member's module. (The names are common words: a profile's `host` key or a
row's "host" is no comparison and no lookup, and is not counted.)"""
from __future__ import annotations

import ast
from pathlib import Path

from dynspec_cli import place

PACKAGE = Path(place.__file__).resolve().parents[1]
NAMES = set(place.KINDS)
MEMBERS = {module for module in place.KINDS.values()}


def _names_in(node) -> set[str]:
    """The member names a constant, or a tuple/list/set of constants, spells."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return {node.value} & NAMES
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return set().union(*map(_names_in, node.elts)) if node.elts else set()
    return set()


def _is_registry(node) -> bool:
    """`KINDS`, `place.KINDS`, `place` (as in place.get)."""
    return (isinstance(node, ast.Name) and node.id in ("KINDS", "place")) or \
        (isinstance(node, ast.Attribute) and node.attr == "KINDS")


def offences(tree: ast.AST) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare) and any(isinstance(op, (ast.Eq, ast.NotEq, ast.In, ast.NotIn))
                                                 for op in node.ops):
            hit = set().union(*map(_names_in, [node.left, *node.comparators]))
            if hit:
                found.append((node.lineno, f"compares with {sorted(hit)}"))
        elif isinstance(node, ast.MatchValue) and _names_in(node.value):
            found.append((node.lineno, f"match case {sorted(_names_in(node.value))}"))
        elif isinstance(node, ast.Subscript) and _is_registry(node.value) and _names_in(node.slice):
            found.append((node.lineno, f"looks the registry up by {sorted(_names_in(node.slice))}"))
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get"
              and _is_registry(node.func.value) and node.args and _names_in(node.args[0])):
            found.append((node.lineno, f"looks the registry up by {sorted(_names_in(node.args[0]))}"))
        elif isinstance(node, ast.ImportFrom) and node.module:
            mod = node.module
            names = [f"{mod}.{a.name}" for a in node.names]
            hit = [m for m in MEMBERS for n in [mod, *names] if n == m or n.startswith(m + ".")]
            if hit:
                found.append((node.lineno, f"imports a member: {sorted(set(hit))}"))
        elif isinstance(node, ast.Import):
            hit = [m for m in MEMBERS for a in node.names if a.name == m or a.name.startswith(m + ".")]
            if hit:
                found.append((node.lineno, f"imports a member: {sorted(set(hit))}"))
    return found


def test_no_module_outside_place_names_a_placement():
    bad = []
    files = [p for p in sorted(PACKAGE.rglob("*.py")) if "place" not in p.relative_to(PACKAGE).parts[:1]]
    assert len(files) > 100  # the whole package but place/
    for path in files:
        for line, what in offences(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            bad.append(f"{path.relative_to(PACKAGE.parent)}:{line}: {what}")
    assert not bad, "a placement named outside place/ (ask the registry instead):\n" + "\n".join(bad)


def test_the_scan_sees_what_it_forbids():
    src = '''
if kind == "slurm": pass
if "group" != x: pass
if p in ("host", "other"): pass
match kind:
    case "group": pass
KINDS["slurm"]
place.get("host")
from dynspec_cli.place.slurm import report
from dynspec_cli.place import group
import dynspec_cli.place.host
row.get("host"); prof.host == spec; x == "hosts"; d["host"]
'''
    lines = sorted(line for line, _ in offences(ast.parse(src)))
    assert lines == [2, 3, 4, 6, 7, 8, 9, 10, 11], offences(ast.parse(src))
