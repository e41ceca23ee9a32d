"""The inspector folders (each engine's, and the shared module they all ship): importable module by
module (stdlib only), shipped as one program whose command line is constant, and one JSON document
even when the program cannot start."""
import ast
import importlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from dynspec_cli import inject

PACKAGE = Path(inject.__file__).resolve().parents[1]
# (folder inside the package, the engine's own package its dynamic route may import)
FOLDERS = [("engines/sglang/inspector", "sglang"), ("engines/vllm/inspector", "vllm")]
SHARED = "dynspec_cli.inject.inspector_common"  # run in place, an inspector imports the shared module from here
MODULES = [(folder, engine, p.stem) for folder, engine in FOLDERS
           for p in sorted((PACKAGE / folder).glob("*.py")) if p.stem != "__main__"] + [("inject", None, "inspector_common")]


def _imports(tree):
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module.startswith("dynspec_cli"):
            yield from (f"{node.module}.{a.name}" for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            yield node.module


@pytest.mark.parametrize("folder,engine,name", MODULES, ids=[f"{f}/{n}" for f, _, n in MODULES])
def test_each_module_imports_alone_and_only_the_stdlib(folder, engine, name):
    dotted = "dynspec_cli." + folder.replace("/", ".")
    importlib.import_module(f"{dotted}.{name}" if name != "__init__" else dotted)
    for m in _imports(ast.parse((PACKAGE / folder / f"{name}.py").read_text())):
        if m == SHARED:  # (the in-place fallback: bundled, it is a module of the program itself)
            continue
        if m.split(".")[0] != engine:  # the dynamic route imports the target's engine
            assert m.split(".")[0] in sys.stdlib_module_names, f"{folder}/{name}.py imports {m}"


@pytest.mark.parametrize("folder", [f for f, _ in FOLDERS])
def test_the_bundle_holds_every_module_and_the_shared_one(folder):
    text = inject.program(folder)
    for f, _, name in MODULES:
        if f == folder and name != "__init__":
            assert f"'_dynspec_inspector.{name}'" in text
    assert "'_dynspec_inspector.inspector_common'" in text
    compile(text, "<bundle>", "exec")


def test_the_command_line_holds_no_data():
    a = inject.command("/usr/bin/python3")
    assert a[:2] == ["/usr/bin/python3", "-c"] and a[2] == inject.BOOTSTRAP
    payload = inject.stdin("print(1)", b'{"x": 1}', {"HF_TOKEN": "tok-123"})
    assert b"tok-123" in payload and "tok-123" not in inject.BOOTSTRAP


def test_env_reaches_the_program_and_none_unsets(tmp_path):
    prog = "import os, sys; print(os.environ.get('A'), os.environ.get('B'), sys.stdin.read())"
    r = subprocess.run(inject.command(sys.executable), input=inject.stdin(prog, b"rest", {"A": "1", "B": None}),
                       capture_output=True, env={"B": "x", "PATH": "/usr/bin:/bin"}, timeout=30)
    assert r.stdout.decode().split() == ["1", "None", "rest"], r.stderr


def test_a_program_that_cannot_start_is_still_json(tmp_path, monkeypatch):
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "__init__.py").write_text("")
    (broken / "main.py").write_text("import this_module_does_not_exist\n")
    monkeypatch.setattr(inject, "script", lambda name: tmp_path / name)  # a folder of programs beside ours
    inject.program.cache_clear()
    try:
        text = inject.program("broken")
    finally:
        inject.program.cache_clear()
    r = subprocess.run(inject.command(sys.executable), input=inject.stdin(text), capture_output=True, timeout=30)
    doc = json.loads(r.stdout)
    assert r.returncode == 1 and doc["ok"] is False and "this_module_does_not_exist" in doc["error"]
    assert "dynspec_cli/inject/broken/main.py" in doc["exception_traceback"]
