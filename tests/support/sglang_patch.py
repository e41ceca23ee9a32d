"""Patch a real sglang tree the way a user would, for tests.

The seed's user added ``--speculative-disable-batch-threshold`` to ``ServerArgs`` (a field plus an
``add_argument``) and a log line ``Dynamic speculation disable enabled: threshold={...}`` at the start of
``EAGLEWorkerV2.__init__``.  :func:`patch_sglang` makes the same edits in a tree laid out like
site-packages (``<site_dir>/sglang/srt/...``): an unpacked wheel copy or a ``pip install --target`` overlay.
It copies nothing: callers pass a tree they own (never the cached unpacked wheel itself).

Where the flag goes, per release (found by reading each wheel, checked by tests/realsglang):

* <= 0.5.16: ``ServerArgs`` is a ``@dataclass`` in ``srt/server_args.py``.  A plain field
  ``name: Optional[int] = None`` is added after ``speculative_eagle_topk`` and a
  ``parser.add_argument("--flag", ...)`` in ``ServerArgs.add_cli_args``: after the ``--speculative-eagle-topk``
  call where there is one (<= 0.5.13), else after ``add_cli_args_from_dataclass(parser, ServerArgs)``
  (0.5.16 derives most flags from ``A[...]``-annotated fields; plain fields are skipped by that helper and
  must be registered by hand, which is what we do).
* 0.5.23 (and later): ``ServerArgs`` is assembled from ``msgspec.Struct`` namespaces in
  ``srt/arg_groups/fields/*.py`` and every CLI flag is derived from ``A[T, "help"]`` fields; an explicit
  ``add_argument`` would conflict.  The field is added as ``name: A[Optional[int], "help"] = None`` to the
  namespace class that holds ``speculative_eagle_topk`` (``fields/spec.py``), which also creates the flag.

Line numbers in the returned record are 1-based and refer to the files as they are after the patch.
"""
from __future__ import annotations

import ast
import dataclasses
import json
import os
import re
from pathlib import Path
from typing import List, Optional, Sequence, Tuple

DEFAULT_FLAG = "--speculative-disable-batch-threshold"
DEFAULT_MARKER = "Dynamic speculation disable enabled: threshold={...}"
DEFAULT_WORKER_MODULE = "eagle_worker_v2"
DEFAULT_WORKER_CLASS = "EAGLEWorkerV2"
ANCHOR_FIELD = "speculative_eagle_topk"
SYNTAX_ERROR_TEXT = "this line is not valid python  # dynspec-test: injected syntax error"


class PatchError(RuntimeError):
    """The tree does not have what the patch needs (file, class, function or anchor)."""


@dataclasses.dataclass(frozen=True)
class Insertion:
    file: Path  # absolute path of the edited file
    rel: str  # path relative to site_dir, e.g. "sglang/srt/server_args.py"
    line: int  # 1-based line number of the first inserted line, after patching
    lines: Tuple[str, ...]  # the inserted text, one entry per physical line
    what: str  # "field", "add_argument", "logger", "marker", "syntax_error"


@dataclasses.dataclass
class PatchRecord:
    site_dir: Path
    flag: Optional[str] = None
    field: Optional[str] = None
    marker: Optional[str] = None  # the literal text prefix that appears in the log (before the value)
    worker_module: Optional[str] = None  # e.g. "sglang.srt.speculative.eagle_worker_v2"
    worker_class: Optional[str] = None
    function: Optional[str] = None  # "__init__"
    insertions: List[Insertion] = dataclasses.field(default_factory=list)

    @property
    def files(self) -> List[Path]:
        out: List[Path] = []
        for ins in self.insertions:
            if ins.file not in out:
                out.append(ins.file)
        return out

    def find(self, what: str) -> Insertion:
        for ins in self.insertions:
            if ins.what == what:
                return ins
        raise KeyError(what)

    @property
    def marker_line(self) -> Optional[Insertion]:
        try:
            return self.find("marker")
        except KeyError:
            return None

    def merge(self, other: "PatchRecord") -> "PatchRecord":
        for f in ("flag", "field", "marker", "worker_module", "worker_class", "function"):
            if getattr(self, f) is None:
                setattr(self, f, getattr(other, f))
        self.insertions.extend(other.insertions)
        return self


# --------------------------------------------------------------------------------------------------
# helpers


def field_name_for(flag: str) -> str:
    return flag.lstrip("-").replace("-", "_")


def marker_prefix(marker: str) -> str:
    """The constant text a log line starts with: ``'...threshold={...}'`` -> ``'...threshold='``."""
    return marker.split("{", 1)[0]


def marker_statement(marker: str, field: str, indent: str) -> str:
    """``logger.info(f"...")`` with the first ``{...}``-style placeholder replaced by the field value."""
    m = re.search(r"\{[^{}]*\}", marker)
    if m:
        before, after = marker[: m.start()], marker[m.end():]
        body = _fesc(before) + "{server_args." + field + "}" + _fesc(after)
    else:
        body = _fesc(marker) + " {server_args." + field + "}"
    body = body.replace("\\", "\\\\").replace('"', '\\"')
    return f'{indent}logger.info(f"{body}")'


def _fesc(s: str) -> str:
    return s.replace("{", "{{").replace("}", "}}")


def _read(path: Path) -> Tuple[str, List[str]]:
    if not path.is_file():
        raise PatchError(f"{path}: no such file")
    text = path.read_text(encoding="utf-8")
    return text, text.splitlines(keepends=True)


def _replace(path: Path, text: str) -> None:
    """Write a new file (new inode) in place of ``path``: trees made of hard links to a shared cache
    (see sglang_env.SglangEnv.patched_copy) must never be edited through the link."""
    tmp = path.with_name(path.name + ".dynspec-tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def _indent_of(line: str) -> str:
    return line[: len(line) - len(line.lstrip())]


def _apply(path: Path, site_dir: Path, edits: Sequence[Tuple[int, List[str], str]]) -> List[Insertion]:
    """Insert blocks after the given 1-based line numbers (0 = top of file) of the *original* file.
    Returns insertions with line numbers valid in the edited file. Writes the file."""
    _, lines = _read(path)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    out: List[Insertion] = []
    # apply bottom-up so earlier anchors stay valid
    for after, block, what in sorted(edits, key=lambda e: e[0], reverse=True):
        lines[after:after] = [b + "\n" for b in block]
    # compute final positions top-down
    shift = 0
    for after, block, what in sorted(edits, key=lambda e: e[0]):
        out.append(Insertion(path, path.relative_to(site_dir).as_posix(), after + shift + 1, tuple(block), what))
        shift += len(block)
    text = "".join(lines)
    compile(text, str(path), "exec")  # a patch must never break the file (syntax errors are injected separately)
    _replace(path, text)
    return out


def _class(tree: ast.Module, name: str) -> Optional[ast.ClassDef]:
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == name:
            return node
    return None


def _method(cls: ast.ClassDef, name: str) -> Optional[ast.FunctionDef]:
    for node in cls.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name:
            return node
    return None


def _ann_field(cls: ast.ClassDef, name: str) -> Optional[ast.AnnAssign]:
    for node in cls.body:
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.target.id == name:
            return node
    return None


def _module_level_logger(tree: ast.Module) -> bool:
    for node in tree.body:
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == "logger" for t in targets):
                return True
    return False


def _last_leading_import_end(tree: ast.Module) -> int:
    """End line of the last top-level import that comes before the first class/def (0 if none)."""
    end = 0
    for node in tree.body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            break
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            end = node.end_lineno
        elif end == 0 and isinstance(node, ast.Expr) and isinstance(getattr(node, "value", None), ast.Constant):
            end = node.end_lineno  # module docstring
    return end


def _str_arg(call: ast.Call) -> List[str]:
    return [a.value for a in call.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]


# --------------------------------------------------------------------------------------------------
# flag


def _server_args_file(site_dir: Path) -> Path:
    return site_dir / "sglang" / "srt" / "server_args.py"


def patch_flag_only(site_dir: Path, *, flag: str = DEFAULT_FLAG, help: Optional[str] = None) -> PatchRecord:
    """Add the ServerArgs field and CLI flag (no log line)."""
    site_dir = Path(site_dir)
    field = field_name_for(flag)
    help = help or "Disable speculative decoding when the running batch size exceeds this threshold (dynspec test patch)."
    path = _server_args_file(site_dir)
    text, lines = _read(path)
    tree = ast.parse(text)
    rec = PatchRecord(site_dir=site_dir, flag=flag, field=field)
    sa = _class(tree, "ServerArgs")
    if sa is None:
        raise PatchError(f"{path}: no class ServerArgs")
    anchor = _ann_field(sa, ANCHOR_FIELD)
    if anchor is not None:
        if _ann_field(sa, field) is not None:
            raise PatchError(f"{path}: ServerArgs already has a field {field}")
        ind = _indent_of(lines[anchor.lineno - 1])
        edits = [(anchor.end_lineno, [f"{ind}{field}: Optional[int] = None"], "field")]
        add = _method(sa, "add_cli_args")
        if add is None:
            raise PatchError(f"{path}: ServerArgs has no add_cli_args")
        after = None
        for node in ast.walk(add):
            if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
                fn = node.value.func
                if isinstance(fn, ast.Attribute) and fn.attr == "add_argument" and "--speculative-eagle-topk" in _str_arg(node.value):
                    after = node
                    break
        if after is None:
            for node in add.body:
                if (isinstance(node, ast.Expr) and isinstance(node.value, ast.Call)
                        and isinstance(node.value.func, ast.Name)
                        and node.value.func.id == "add_cli_args_from_dataclass"):
                    after = node
                    break
        if after is None:
            after = add.body[0]
        ind = _indent_of(lines[after.lineno - 1])
        block = [
            f"{ind}parser.add_argument(",
            f"{ind}    {json.dumps(flag)},",
            f"{ind}    type=int,",
            f"{ind}    default=ServerArgs.{field},",
            f"{ind}    help={json.dumps(help)},",
            f"{ind})",
        ]
        edits.append((after.end_lineno, block, "add_argument"))
        rec.insertions += _apply(path, site_dir, edits)
        return rec

    # 0.5.23 layout: fields live in msgspec namespaces under srt/arg_groups/fields/
    fields_dir = site_dir / "sglang" / "srt" / "arg_groups" / "fields"
    for fpath in sorted(fields_dir.glob("*.py")) if fields_dir.is_dir() else []:
        ftext, flines = _read(fpath)
        ftree = ast.parse(ftext)
        for cls in ftree.body:
            if not isinstance(cls, ast.ClassDef):
                continue
            anchor = _ann_field(cls, ANCHOR_FIELD)
            if anchor is None:
                continue
            if _ann_field(cls, field) is not None:
                raise PatchError(f"{fpath}: {cls.name} already has a field {field}")
            ind = _indent_of(flines[anchor.lineno - 1])
            block = [f"{ind}{field}: A[Optional[int], {json.dumps(help)}] = None"]
            rec.insertions += _apply(fpath, site_dir, [(anchor.end_lineno, block, "field")])
            return rec
    raise PatchError(f"{site_dir}: found no {ANCHOR_FIELD} field in ServerArgs nor in sglang/srt/arg_groups/fields/")


# --------------------------------------------------------------------------------------------------
# marker


def worker_file(site_dir: Path, worker_module: str) -> Path:
    mod = worker_module if "." in worker_module else f"sglang.srt.speculative.{worker_module}"
    return Path(site_dir).joinpath(*mod.split(".")).with_suffix(".py")


def patch_marker_only(
    site_dir: Path,
    *,
    worker_module: str = DEFAULT_WORKER_MODULE,
    worker_class: str = DEFAULT_WORKER_CLASS,
    flag: str = DEFAULT_FLAG,
    marker: str = DEFAULT_MARKER,
    function: str = "__init__",
) -> PatchRecord:
    """Add ``logger.info(f"<marker>")`` as the first statement of ``worker_class.function`` (no flag).
    Without the flag the line would raise AttributeError if it ever ran; it is a compile-valid user mistake."""
    site_dir = Path(site_dir)
    field = field_name_for(flag)
    path = worker_file(site_dir, worker_module)
    text, lines = _read(path)
    tree = ast.parse(text)
    cls = _class(tree, worker_class)
    if cls is None:
        raise PatchError(f"{path}: no class {worker_class}")
    fn = _method(cls, function)
    if fn is None:
        raise PatchError(f"{path}: {worker_class} has no {function}")
    first = fn.body[0]
    after = first.lineno - 1
    if (isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
            and isinstance(first.value.value, str)):  # docstring: insert after it
        after = first.end_lineno
        first = fn.body[1] if len(fn.body) > 1 else first
    else:  # go above comments/blank lines that lead the body, right under the signature
        while after > fn.lineno and (not lines[after - 1].strip() or lines[after - 1].lstrip().startswith("#")):
            after -= 1
    ind = _indent_of(lines[first.lineno - 1])
    edits = [(after, [marker_statement(marker, field, ind)], "marker")]
    if not _module_level_logger(tree):
        at = _last_leading_import_end(tree)
        edits.append((at, ["import logging", "logger = logging.getLogger(__name__)"], "logger"))
    mod = worker_module if "." in worker_module else f"sglang.srt.speculative.{worker_module}"
    rec = PatchRecord(site_dir=site_dir, flag=None, field=field, marker=marker_prefix(marker),
                      worker_module=mod, worker_class=worker_class, function=function)
    rec.insertions += _apply(path, site_dir, edits)
    return rec


def patch_sglang(
    site_dir: Path,
    *,
    worker_module: str = DEFAULT_WORKER_MODULE,
    worker_class: str = DEFAULT_WORKER_CLASS,
    flag: str = DEFAULT_FLAG,
    marker: str = DEFAULT_MARKER,
) -> PatchRecord:
    """The full user patch: flag (field + CLI) and the marker log line at the start of the worker's __init__."""
    rec = patch_flag_only(site_dir, flag=flag)
    return rec.merge(patch_marker_only(site_dir, worker_module=worker_module, worker_class=worker_class,
                                       flag=flag, marker=marker))


def introduce_syntax_error(site_dir: Path, rel_path: str = "sglang/srt/speculative/eagle_worker_v2.py",
                           *, line: Optional[int] = None) -> Insertion:
    """Insert an invalid line so that the file no longer compiles (for preflight tests). With ``line`` the
    bad text becomes that 1-based line; by default it goes right after the module's leading imports.
    Returns where it went."""
    site_dir = Path(site_dir)
    path = site_dir / rel_path
    text, lines = _read(path)
    if line is None:
        line = _last_leading_import_end(ast.parse(text)) + 1
    if not 1 <= line <= len(lines) + 1:
        raise PatchError(f"{path}: line {line} out of range 1..{len(lines) + 1}")
    lines.insert(line - 1, SYNTAX_ERROR_TEXT + "\n")
    _replace(path, "".join(lines))
    return Insertion(path, path.relative_to(site_dir).as_posix(), line, (SYNTAX_ERROR_TEXT,), "syntax_error")
