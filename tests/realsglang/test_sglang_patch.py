"""tests.support.sglang_patch on the real unpacked wheels of 7 releases (no venv needed)."""
from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.support import sglang_patch as sp
from tests.support import wheels

pytestmark = pytest.mark.wheels

VERSIONS = ["0.5.4.post1", "0.5.9", "0.5.11", "0.5.12.post1", "0.5.13", "0.5.16", "0.5.23"]
HAS_V1 = {"0.5.4.post1", "0.5.9", "0.5.11", "0.5.12.post1"}  # eagle_worker.py (EAGLEWorker) exists
FIELD = "speculative_disable_batch_threshold"
MARKER_CALL = ('logger.info(f"Dynamic speculation disable enabled: '
               'threshold={server_args.speculative_disable_batch_threshold}")')
RELS = ["sglang/srt/server_args.py", "sglang/srt/speculative/eagle_worker_v2.py",
        "sglang/srt/speculative/eagle_worker.py"]


def _tree(version: str, dest: Path) -> Path:
    """Copy of the files the patch touches (the cached unpacked wheel itself stays read-only)."""
    src = wheels.unpacked(version)
    for rel in RELS:
        if (src / rel).exists():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src / rel, dest / rel)
    fields = src / "sglang/srt/arg_groups/fields"
    if fields.is_dir():
        shutil.copytree(fields, dest / "sglang/srt/arg_groups/fields")
    return dest


def _func(path: Path, cls: str, fn: str) -> ast.FunctionDef:
    tree = ast.parse(path.read_text())
    c = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls)
    return next(n for n in c.body if isinstance(n, ast.FunctionDef) and n.name == fn)


def _class_fields(path: Path) -> dict:
    out = {}
    for c in ast.parse(path.read_text()).body:
        if isinstance(c, ast.ClassDef):
            for n in c.body:
                if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name):
                    out.setdefault(c.name, []).append(n.target.id)
    return out


@pytest.mark.parametrize("version", VERSIONS)
def test_full_patch(version, tmp_path):
    site = _tree(version, tmp_path)
    before = {p: p.read_bytes() for p in site.rglob("*.py")}
    rec = sp.patch_sglang(site)
    assert rec.field == FIELD and rec.flag == "--speculative-disable-batch-threshold"
    assert rec.worker_class == "EAGLEWorkerV2" and rec.function == "__init__"
    assert rec.worker_module == "sglang.srt.speculative.eagle_worker_v2"
    assert rec.marker == "Dynamic speculation disable enabled: threshold="

    # every changed file still compiles, and only the recorded files changed
    changed = {p for p, b in before.items() if p.read_bytes() != b}
    assert changed == set(rec.files)
    for f in changed:
        compile(f.read_text(), str(f), "exec")

    # each recorded line is where the record says
    for ins in rec.insertions:
        lines = ins.file.read_text().splitlines()
        assert lines[ins.line - 1: ins.line - 1 + len(ins.lines)] == list(ins.lines)

    # the marker is the first statement of EAGLEWorkerV2.__init__
    mk = rec.marker_line
    assert mk.rel == "sglang/srt/speculative/eagle_worker_v2.py"
    assert mk.lines[0].strip() == MARKER_CALL
    fn = _func(mk.file, "EAGLEWorkerV2", "__init__")
    assert fn.body[0].lineno == mk.line
    assert "server_args" in [a.arg for a in fn.args.args]

    # the field is declared where the flag is derived from
    fld = rec.find("field")
    classes = _class_fields(fld.file)
    if version == "0.5.23":
        assert fld.rel == "sglang/srt/arg_groups/fields/spec.py"
        assert FIELD in classes["Spec"]
        assert "A[Optional[int]," in fld.lines[0]  # annotated: argparse flag derived from it
        with pytest.raises(KeyError):
            rec.find("add_argument")
    else:
        assert fld.rel == "sglang/srt/server_args.py"
        assert FIELD in classes["ServerArgs"]
        assert fld.lines[0].strip() == f"{FIELD}: Optional[int] = None"
        add = rec.find("add_argument")
        assert add.lines[1].strip() == '"--speculative-disable-batch-threshold",'
        add_cli = _func(add.file, "ServerArgs", "add_cli_args")
        assert add_cli.lineno < add.line <= add_cli.end_lineno
        # the flag's default is the new field
        assert f"default=ServerArgs.{FIELD}," in "\n".join(add.lines)


@pytest.mark.parametrize("version", VERSIONS)
def test_flag_only_and_marker_only(version, tmp_path):
    a = _tree(version, tmp_path / "a")
    w = (a / RELS[1]).read_bytes()
    rec = sp.patch_flag_only(a)
    assert (a / RELS[1]).read_bytes() == w  # worker untouched
    assert rec.marker_line is None and {i.what for i in rec.insertions} <= {"field", "add_argument"}

    b = _tree(version, tmp_path / "b")
    s = (b / RELS[0]).read_bytes()
    rec = sp.patch_marker_only(b)
    assert (b / RELS[0]).read_bytes() == s  # server_args untouched
    assert [i.what for i in rec.insertions] == ["marker"]  # these modules already have a logger
    assert MARKER_CALL in (b / RELS[1]).read_text()


@pytest.mark.parametrize("version", sorted(HAS_V1))
def test_marker_on_v1_worker(version, tmp_path):
    site = _tree(version, tmp_path)
    rec = sp.patch_sglang(site, worker_module="eagle_worker", worker_class="EAGLEWorker")
    mk = rec.marker_line
    assert mk.rel == "sglang/srt/speculative/eagle_worker.py"
    assert _func(mk.file, "EAGLEWorker", "__init__").body[0].lineno == mk.line
    assert MARKER_CALL not in (site / RELS[1]).read_text()


def test_missing_class_or_module_is_an_error(tmp_path):
    site = _tree("0.5.23", tmp_path)
    with pytest.raises(sp.PatchError, match="EAGLEWorker"):
        sp.patch_marker_only(site, worker_class="EAGLEWorker")  # V1 class is gone in 0.5.23
    with pytest.raises(sp.PatchError, match="no such file"):
        sp.patch_marker_only(site, worker_module="eagle_worker", worker_class="EAGLEWorker")


def test_patching_twice_is_refused(tmp_path):
    site = _tree("0.5.9", tmp_path)
    sp.patch_flag_only(site)
    with pytest.raises(sp.PatchError, match="already has a field"):
        sp.patch_flag_only(site)


def test_logger_is_added_when_missing_and_marker_runs(tmp_path):
    mod = tmp_path / "sglang" / "srt" / "speculative" / "my_worker.py"
    mod.parent.mkdir(parents=True)
    mod.write_text(textwrap.dedent('''\
        """A worker without a logger."""
        from types import SimpleNamespace


        class MyWorker:
            def __init__(self, server_args, gpu_id=0):
                """Docstring stays first."""
                # a leading comment
                self.server_args = server_args
        '''))
    rec = sp.patch_marker_only(tmp_path, worker_module="my_worker", worker_class="MyWorker",
                               marker="custom marker value={...} end")
    assert sorted(i.what for i in rec.insertions) == ["logger", "marker"]
    assert rec.find("logger").line == 3  # right after the import
    fn = _func(mod, "MyWorker", "__init__")
    assert fn.body[1].lineno == rec.marker_line.line  # after the docstring
    code = (
        "import logging, sys\n"
        f"sys.path.insert(0, {str(tmp_path)!r})\n"
        "logging.basicConfig(level=logging.INFO, format='%(message)s', stream=sys.stdout)\n"
        "from types import SimpleNamespace\n"
        "from sglang.srt.speculative.my_worker import MyWorker\n"
        "MyWorker(SimpleNamespace(speculative_disable_batch_threshold=5))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                         env={**os.environ, "PYTHONPATH": ""})
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "custom marker value=5 end"


@pytest.mark.parametrize("version", ["0.5.9", "0.5.23"])
def test_syntax_error_at_known_line(version, tmp_path):
    site = _tree(version, tmp_path)
    ins = sp.introduce_syntax_error(site)
    with pytest.raises(SyntaxError) as e:
        compile((site / RELS[1]).read_text(), "x", "exec")
    assert e.value.lineno == ins.line
    assert (site / RELS[1]).read_text().splitlines()[ins.line - 1] == sp.SYNTAX_ERROR_TEXT

    ins2 = sp.introduce_syntax_error(site, "sglang/srt/server_args.py", line=10)
    assert ins2.line == 10
    with pytest.raises(SyntaxError) as e:
        compile((site / "sglang/srt/server_args.py").read_text(), "x", "exec")
    assert e.value.lineno == 10


def test_hard_links_are_not_written_through(tmp_path):
    """Patched trees made of hard links (SglangEnv.patched_copy) must leave the shared original intact."""
    orig = _tree("0.5.9", tmp_path / "orig")
    linked = tmp_path / "linked"
    shutil.copytree(orig, linked, copy_function=os.link)
    before = (orig / RELS[1]).read_bytes()
    sp.patch_sglang(linked)
    assert (orig / RELS[1]).read_bytes() == before
    assert MARKER_CALL in (linked / RELS[1]).read_text()
