"""Nothing outside `dynspec_cli/engines/` names an engine (issue 30): every module of the package
outside that folder is read as a syntax tree, and a string constant equal to an engine's name
("sglang", "vllm", or any name in the registry; compared without case, so a display string "vLLM"
counts too) fails the test wherever it stands: a comparison (`engine == "sglang"`), a subscript
(`SERVING["vllm"]`), a default argument or field (`engine: str = "sglang"`), a dict key, a match
case, a plain or f-string literal (`_fact("sglang", ...)`). Docstrings and comments are prose and
are not read. An engine's behaviour belongs to its folder, reached through the protocol
(engines/protocol.py); a branch on a member's name outside it is the seam leaking."""
from __future__ import annotations

import ast
from pathlib import Path

from dynspec_cli import engines

PACKAGE = Path(__file__).resolve().parents[2] / "dynspec_cli"
NAMES = {n.lower() for n in engines.names()} | {"sglang", "vllm"}
# (file relative to dynspec_cli/, line) -> why it may stay. Empty: every engine name outside
# engines/ was replaced by a member of the protocol.
ALLOWED: dict[tuple[str, int], str] = {}


def _docstrings(tree: ast.AST) -> set[int]:
    """ids of the Constant nodes that are docstrings (a module's, a class's, a function's)."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                    and isinstance(body[0].value.value, str):
                out.add(id(body[0].value))
    return out


def _context(parents: dict[int, ast.AST], node: ast.AST) -> str:
    """What the constant is used in, for the message."""
    p = parents.get(id(node))
    kinds = [(ast.Compare, "a comparison"), (ast.Subscript, "a subscript"), (ast.arguments, "a default argument"),
             (ast.Dict, "a dict"), (ast.match_case, "a match case"), (ast.JoinedStr, "an f-string"),
             (ast.AnnAssign, "a default field"), (ast.Call, "a call's argument")]
    while p is not None:
        for cls, word in kinds:
            if isinstance(p, cls):
                return word
        p = parents.get(id(p))
    return "a str literal"


def offenders(root: Path = PACKAGE) -> list[str]:
    found = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        if rel.startswith("engines/"):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        docs = _docstrings(tree)
        parents = {id(c): n for n in ast.walk(tree) for c in ast.iter_child_nodes(n)}
        hits = [n for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs
                and n.value.strip().lower() in NAMES and (rel, n.lineno) not in ALLOWED]
        for node in sorted(hits, key=lambda n: (n.lineno, n.col_offset)):
            found.append(f"dynspec_cli/{rel}:{node.lineno}: {node.value!r} in {_context(parents, node)}")
    return found


def test_no_module_outside_engines_names_an_engine():
    bad = offenders()
    assert not bad, "an engine named outside dynspec_cli/engines/ (use a member of engines/protocol.py):\n" + "\n".join(bad)


def test_the_scan_sees_each_kind_of_use(tmp_path):
    """The scan itself: each form the issue names is found, a docstring and a comment are not."""
    (tmp_path / "m.py").write_text(
        '"""A module about sglang; "vllm" in its docstring."""\n'
        "def f(engine='sglang'):  # vllm in a comment\n"
        "    '''vllm'''\n"
        "    if engine == 'vllm':\n"
        "        return TABLE['sglang'], {'vllm': 1}, f\"{'sglang'}\", 'vLLM'\n"
        "    match engine:\n"
        "        case 'sglang':\n"
        "            pass\n"
        "class C:\n"
        "    engine: str = 'sglang'\n", encoding="utf-8")
    got = offenders(tmp_path)
    assert [g.split(":")[1] for g in got] == ["2", "4", "5", "5", "5", "5", "7", "10"], got
    assert "a default argument" in got[0] and "a comparison" in got[1] and "a match case" in got[6]
    assert "a default field" in got[7]
