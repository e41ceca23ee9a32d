"""configs/sglang/*.toml checked against the real published sglang wheels.

Every release in releases.toml is downloaded once (tests/support/wheels.py caches the wheels)
and read statically: source through `ast`, never imported. `ast` joins implicitly concatenated
literals (`"Overlap ... algorithm. " "You can set env ..."` is one string), and an f-string is
read as its literal parts with a placeholder for each formatted value.

Each table row is checked on every release it covers and on the release just before and
just after its range (the boundary). The whole-tree text search of a release (about 2-8 s of
parsing per release) is stored beside the wheel cache, keyed by everything it depends on, so
only the first run on a machine pays it.
Measured cold on 2 cores: 37 wheels, ~360 MB downloaded (~1.5 GB unpacked), ~65 s download +
~100 s search; warm: the whole module runs in well under a minute.
"""
from __future__ import annotations

import ast
import concurrent.futures
import functools
import hashlib
import inspect
import json
import os
import re
from pathlib import Path
from typing import Iterable, Optional

import pytest

try:  # Python 3.11+
    import re._parser as sre_parse  # type: ignore[import-not-found]
except ImportError:  # pragma: no cover
    import sre_parse  # type: ignore[no-redef]

from dynspec_cli.engines.sglang.knowledge import knowledge
from tests.support import wheels

pytestmark = pytest.mark.wheels

K = knowledge()
RELEASES: list[str] = K.releases
FIELD = "\ufffc"  # stands for a formatted value ({...}) of an f-string


# --- releases and their files ----------------------------------------------------------------
def releases_of(spec: str) -> list[str]:
    return K.versions_in(K.mask(spec))


def neighbours(spec: str) -> list[tuple[str, str]]:
    """(side, release) just outside the range: the release before its first and after its last."""
    inside = releases_of(spec)
    out = []
    if inside:
        i, j = RELEASES.index(inside[0]), RELEASES.index(inside[-1])
        if i > 0:
            out.append(("before", RELEASES[i - 1]))
        if j + 1 < len(RELEASES):
            out.append(("after", RELEASES[j + 1]))
    return out


def span(versions: Iterable[str]) -> Optional[str]:
    return K.span(sum(K.mask_of(v) for v in set(versions)))


@functools.lru_cache(maxsize=None)
def root(version: str) -> Path:
    return wheels.unpacked(version)


def src(version: str, rel: str) -> Optional[Path]:
    p = root(version) / rel
    return p if p.is_file() else None


def module_rel(module: str) -> str:
    """Path of `sglang.srt.speculative.<module>` inside a wheel."""
    return "sglang/srt/speculative/" + module.replace(".", "/") + ".py"


def _parse(version: str, rel: str) -> Optional[ast.Module]:
    p = src(version, rel)
    return ast.parse(p.read_bytes(), filename=str(p)) if p else None


tree = functools.lru_cache(maxsize=16)(_parse)  # ASTs are large: keep only the recent ones


def render(node: ast.AST) -> Optional[str]:
    """Text of a string literal; an f-string's formatted values become FIELD."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value if isinstance(v, ast.Constant) else FIELD for v in node.values)
    return None


SAMPLES = {  # a formatted value whose source is a key renders as each of the values
    "capture_name": ["target verify", "target decode", "target prefill"],  # the target runner's role
    "cache_name": ["KV Cache"],  # memory_pool.py, no allocation_label
    "self.debug_name": ["Scheduler"],  # utils/watchdog.py of the scheduler
    # adaptive_spec_params.py: a list of ints, printed as Python prints a list
    "self.candidate_steps": ["[1, 3, 7]"], "first_slot.candidate_steps": ["[1, 3, 5, 7]"],
}


def cuda_graph_name(t: ast.AST) -> str:
    """What `graph_backend[device]` gives for "cuda" in a module that builds
    `graph_backend = defaultdict(lambda: <default>, {"cpu": ..., "cuda": ...})`."""
    for n in ast.walk(t):
        if isinstance(n, ast.Assign) and ast.unparse(n.targets[0]) == "graph_backend" and isinstance(n.value, ast.Call):
            default, table = n.value.args
            named = {k.value: v.value for k, v in zip(table.keys, table.values) if isinstance(v, ast.Constant)}
            return named.get("cuda") or default.body.value
    return "cuda graph"


def variants(node: ast.AST, limit: int = 64, graph: str = "cuda graph") -> list[str]:
    """Messages a literal can produce on a CUDA device: conditional values with literal branches
    give each branch, SAMPLES their values, `graph_backend[...]` `graph`, anything else '7'."""
    if isinstance(node, ast.Constant):
        return [node.value]
    out = [""]
    for v in node.values:
        if isinstance(v, ast.Constant):
            choices = [v.value]
        else:
            expr = ast.unparse(v.value)
            if isinstance(v.value, ast.IfExp) and all(isinstance(b, ast.Constant) for b in (v.value.body, v.value.orelse)):
                choices = [str(v.value.body.value), str(v.value.orelse.value)]
            elif expr in SAMPLES:
                choices = SAMPLES[expr]
            elif expr.startswith("graph_backend["):
                choices = [graph]
            else:
                choices = ["7"]
        out = [p + c for p in out for c in choices][:limit]
    return out


@functools.lru_cache(maxsize=None)
def strings(version: str, rel: str) -> tuple[str, ...]:
    t = _parse(version, rel)
    return tuple(s for n in ast.walk(t) if (s := render(n)) is not None) if t else ()


def template_matches(template: str, text: str) -> bool:
    """Whether a whole message `text` can be produced by the literal `template` (FIELD = anything)."""
    rx = ".+?".join(re.escape(part) for part in template.split(FIELD))
    return re.fullmatch(rx, text, re.S) is not None


@functools.lru_cache(maxsize=None)
def top_classes(version: str, rel: str) -> dict[str, list[str]]:
    t = _parse(version, rel)
    return {n.name: [ast.unparse(b) for b in n.bases] for n in t.body if isinstance(n, ast.ClassDef)} if t else {}


def literal_fragments(pattern: str, minimum: int = 12) -> list[str]:
    """Runs of literal characters at the top level of a regular expression."""
    out, run = [], []
    for op, arg in list(sre_parse.parse(pattern)) + [(None, None)]:
        if op is sre_parse.LITERAL:
            run.append(chr(arg))
            continue
        if len(run) >= minimum:
            out.append("".join(run))
        run = []
    return out


def warning_needles(w) -> list[str]:
    return [w.text.rstrip()] if w.text is not None else literal_fragments(w.pattern)


# --- one pass over a release's source tree, cached on disk ------------------------------------
FOREIGN_LINES = {  # log_lines.toml rows written by Python, argparse, torch or the kernel
    "unrecognized-arguments": "argparse",
    "traceback": "the Python interpreter",
    "traceback-frame": "the Python interpreter",
    "exception-line": "the Python interpreter",
    "cuda-oom": "torch",
    "killed": "the shell / OOM killer",
    "no-nvidia-driver": "torch",
    "fatal-python-error": "CPython's fatal-error handler",
    "faulthandler-dump": "CPython's faulthandler",
    "faulthandler-frame": "CPython's faulthandler",
    "traceback-frame-elided": "the Python interpreter (path elided by the poster)",
    "traceback-frame-cut": "the Python interpreter (the line cut by a paste)",
    "pyspy-frame": "py-spy",
    "event-loop-call": "the Python interpreter (source line under a frame)",
    "worker-constructor": "the Python interpreter (source line under a frame)",
    "nccl-watchdog": "torch ProcessGroupNCCL",
    "cuda-error": "torch / CUDA kernels",
    "served-request": "uvicorn's access log",
    "scheduler-constructor": "the Python interpreter (source line under a frame)",
    "device-assert": "the CUDA kernels (ATen, Triton, flashinfer device asserts)",
}
OWN_CHECK_LINES = {  # rows checked by a test of their own below
    "server-args-dump": "test_server_args_dump_form",
    "cuda-graph": "test_capture_lines_match_their_pattern",
    "draft-cuda-graph": "test_capture_lines_match_their_pattern",
    "checkpoint-shards": "test_checkpoint_shards_line",
    # tests/knowledge/test_crash_lines_against_wheels.py (lines kept for logs of older releases too)
    "tp-worker-client-exception": "test_crash_line_in_sglang_source",
    "scheduler-dead": "test_crash_line_in_sglang_source",
    "child-exit-code": "test_crash_line_in_sglang_source",
    "child-failed-cut": "test_crash_line_in_sglang_source",
    "prefill-batch": "test_crash_line_in_sglang_source",
    "subprocess-crashed": "test_crash_line_in_sglang_source",
    "sigterm-received": "test_crash_line_in_sglang_source",
}
BAR = "% Completed | "  # tqdm's bar format of sglang's weight loaders
SGLANG_LINES = [x for x in K.log_lines if x.id not in FOREIGN_LINES and x.id not in OWN_CHECK_LINES]
OVERLAP_REASONS = sorted({rule.reason for r in K.overlap_ranges for rule in r.rules if rule.reason})
NEEDLES: tuple[str, ...] = tuple(sorted(
    {n for w in K.warnings for n in warning_needles(w)}
    | set(OVERLAP_REASONS)
    | {"SGLANG_ENABLE_SPEC_V2", " checkpoint shards", BAR}
))
SEARCHED = ("sglang/srt/", "sglang/launch_server.py", "sglang/cli/")  # what a server runs
CAPTURE_DIRS = ("sglang/srt/model_executor/", "sglang/srt/speculative/")
_JUNCTION = re.compile(rb"""(["'])\s+[fFrRuU]{0,2}(["'])""")
_CAPTURE_START = re.compile(rb"""[fF]?["']Capture """)


def _joined(data: bytes) -> bytes:
    """Source bytes with the junctions of implicitly concatenated literals removed
    (`"abc " "def"` -> `"abc def"`): a cheap pre-filter before the exact AST check."""
    return _JUNCTION.sub(b"", data)


def _is_capture_message(text: str) -> bool:
    return text.startswith("Capture ") and "failed" not in text and bool(
        re.search(r"\b(?:begin|end)\b|graph bs |graph num tokens ", text))


def _log_prefilter(row) -> re.Pattern:
    """Bytes a file must hold to possibly write the row's line: for a line-start pattern, its
    literal right after a quote (`"Init ` is rarer than `Init `)."""
    lit = re.escape(row.literal.encode())
    return re.compile(rb"""[fF]?["']""" + lit if row.pattern.startswith("^" + re.escape(row.literal)[:1]) else lit)


def _scan(version: str) -> dict:
    """needle -> files whose literals contain it; log row -> files with a literal holding its
    `literal` whose rendering matches its `pattern`; rendered capture messages."""
    r = root(version)
    occ: dict[str, list[str]] = {n: [] for n in NEEDLES}
    logs: dict[str, list[str]] = {x.id: [] for x in SGLANG_LINES}
    captures: list[tuple[str, str]] = []
    encoded = [(n, n.encode()) for n in NEEDLES]
    log_filters = [(x, x.literal.encode(), _log_prefilter(x)) for x in SGLANG_LINES]
    for p in sorted((r / "sglang").rglob("*.py")):
        rel = str(p.relative_to(r))
        if not rel.startswith(SEARCHED):
            continue
        raw = p.read_bytes()
        data = _joined(raw)
        cands = [n for n, b in encoded if b in data]
        log_rows = [x for x, lit, rx in log_filters if lit in data and rx.search(data)]
        capture = rel.startswith(CAPTURE_DIRS) and _CAPTURE_START.search(raw)
        if not cands and not log_rows and not capture:
            continue
        t = ast.parse(raw)
        lits = [(n, s) for n in ast.walk(t) if (s := render(n)) is not None]
        for needle in cands:
            if any(needle in s for _, s in lits):
                occ[needle].append(rel)
        for x in log_rows:
            if any(x.literal in s and any(re.search(x.pattern, m) for m in variants(n))
                                          for n, s in lits if x.literal in s):
                logs[x.id].append(rel)
        if capture:
            graph = cuda_graph_name(t)
            captures += [(rel, m) for n, s in lits if _is_capture_message(s) for m in variants(n, graph=graph)]
    return {"occ": occ, "logs": logs, "captures": captures}


def _scan_key() -> str:
    h = hashlib.sha256()
    for f in (_scan, _joined, _is_capture_message, render, variants, _log_prefilter, cuda_graph_name):
        h.update(inspect.getsource(f).encode())
    h.update(json.dumps([NEEDLES, [(x.id, x.literal, x.pattern) for x in SGLANG_LINES], SEARCHED, SAMPLES,
                         CAPTURE_DIRS, _JUNCTION.pattern.decode(), _CAPTURE_START.pattern.decode()]).encode())
    return h.hexdigest()[:16]


def _scan_path(version: str) -> Path:
    return wheels.CACHE / "scans" / f"{version}-{_scan_key()}.json"


def _scan_to_disk(version: str) -> None:
    out = _scan(version)
    path = _scan_path(version)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(out))
    tmp.replace(path)


@functools.lru_cache(maxsize=None)
def scan(version: str) -> dict:
    if not _scan_path(version).is_file():
        missing = [v for v in RELEASES if not _scan_path(v).is_file()]
        for v in missing:
            root(v)  # download and unpack here, not in the workers
        with concurrent.futures.ProcessPoolExecutor(min(len(missing), os.cpu_count() or 1)) as ex:
            list(ex.map(_scan_to_disk, missing))
    return json.loads(_scan_path(version).read_text())


def where(version: str, needle: str) -> list[str]:
    assert needle in NEEDLES, f"add {needle!r} to NEEDLES"
    return scan(version)["occ"][needle]


def mentions_anywhere(version: str, word: bytes) -> list[str]:
    r = root(version)
    return [str(p.relative_to(r)) for p in (r / "sglang").rglob("*") if p.is_file() and word in p.read_bytes()]


def ids(cases: Iterable[tuple]) -> list[str]:
    return ["-".join(str(x) for x in c) for c in cases]


# =============================================================================================
# releases.toml
# =============================================================================================
@pytest.mark.parametrize("version", RELEASES)
def test_release_exists_on_pypi(version):
    whl = wheels.wheel(version)
    assert whl.is_file() and whl.name.startswith(f"sglang-{version}-"), whl
    assert (root(version) / "sglang" / "srt" / "speculative" / "spec_info.py").is_file()


# =============================================================================================
# warnings.toml
# =============================================================================================
WARNING_CASES = [(w.id, v, "in") for w in K.warnings for v in releases_of(w.versions)] + [
    (w.id, v, side) for w in K.warnings for side, v in neighbours(w.versions)]


@pytest.mark.parametrize("wid,version,side", WARNING_CASES, ids=ids(WARNING_CASES))
def test_warning_text_in_range_only(wid, version, side):
    w = K.warning_by_id[wid]
    for needle in warning_needles(w):
        hits = where(version, needle)
        if side == "in":
            assert hits, f"{wid}: {needle!r} is not in sglang {version} (row says {w.versions})"
        else:
            assert not hits, f"{wid}: {needle!r} is also in sglang {version}, {side} {w.versions}: {hits}"


def test_pattern_rows_have_literal_fragments():
    for w in K.warnings:
        if w.pattern is not None:
            assert literal_fragments(w.pattern), f"{w.id}: no literal part of the pattern to look for"


# =============================================================================================
# modules.toml
# =============================================================================================
CLASS_CASES = [(c.name, c.versions, v) for c in K.classes for v in releases_of(c.versions)]
CLASS_EDGE_CASES = [(c.name, c.versions, v, side) for c in K.classes for side, v in neighbours(c.versions)]


def _class_row(name: str, versions: str):
    return next(c for c in K.classes if c.name == name and c.versions == versions)


@pytest.mark.parametrize("name,versions,version", CLASS_CASES, ids=ids(CLASS_CASES))
def test_class_has_those_bases(name, versions, version):
    row = _class_row(name, versions)
    rel = module_rel(row.module)
    assert src(version, rel), f"{rel} is not in sglang {version}"
    classes = top_classes(version, rel)
    assert name in classes, f"{name} is not defined in {rel} of sglang {version}"
    assert classes[name] == row.bases, f"{name} bases in sglang {version}: {classes[name]}, row says {row.bases}"


@pytest.mark.parametrize("name,versions,version,side", CLASS_EDGE_CASES, ids=ids(CLASS_EDGE_CASES))
def test_class_absent_just_outside(name, versions, version, side):
    row = _class_row(name, versions)
    other = [c for c in K.classes if c.name == name and c is not row and K.mask(c.versions) & K.mask_of(version)]
    if other:  # another row (other bases or module) takes over at the boundary
        assert (other[0].bases, other[0].module) != (row.bases, row.module), f"{name}: rows {versions} and {other[0].versions} could be one"
        return
    classes = top_classes(version, module_rel(row.module))
    assert name not in classes, f"{name} exists in sglang {version} ({side} {versions}) with bases {classes.get(name)}"


@pytest.mark.parametrize("version", RELEASES)
def test_speculative_bases_have_rows(version):
    """A base of a known class that is itself defined under srt/speculative/ has a row too, so the
    MRO built from modules.toml reaches every speculative class a patch could sit in."""
    spec = root(version) / "sglang" / "srt" / "speculative"
    for c in K.classes:
        if not K.mask(c.versions) & K.mask_of(version):
            continue
        for b in c.bases:
            defined = [str(p.relative_to(root(version))) for p in spec.rglob("*.py")
                       if f"class {b}".encode() in p.read_bytes()
                       and b in top_classes(version, str(p.relative_to(root(version))))]
            if defined:
                assert K.class_row(version, b), f"{c.name} derives from {b} ({defined[0]}), which has no row for {version}"


# =============================================================================================
# dispatch.toml
# =============================================================================================
DISPATCH_FILES = ("sglang/srt/speculative/spec_info.py", "sglang/srt/managers/scheduler.py")
WORKER_IMPORT = re.compile(r"^sglang\.srt\.speculative\.(?P<module>[\w.]*worker[\w.]*)$")
DISPATCH_CASES = [(r.versions, v) for r in K.dispatch_ranges for v in releases_of(r.versions)]


def _dispatch_range(versions: str):
    return next(r for r in K.dispatch_ranges if r.versions == versions)


def dispatch_imports(version: str) -> set[tuple[str, str]]:
    """(module, class) of every worker class the dispatch files import (at any depth)."""
    out = set()
    for rel in DISPATCH_FILES:
        t = tree(version, rel)
        for n in ast.walk(t) if t else ():
            if isinstance(n, ast.ImportFrom) and n.module and (m := WORKER_IMPORT.match(n.module)):
                for a in n.names:
                    if a.name.endswith(("Worker", "WorkerV2")) and not a.name.startswith("Base"):
                        out.add((m["module"], a.name))
    return out


@pytest.mark.parametrize("versions,version", DISPATCH_CASES, ids=ids(DISPATCH_CASES))
def test_dispatch_rule_classes_exist(versions, version):
    for rule in _dispatch_range(versions).rules:
        if rule.cls is not None:
            rel = module_rel(rule.module)
            assert src(version, rel), f"{rule.algorithms}: {rel} is not in sglang {version}"
            assert rule.cls in top_classes(version, rel), f"{rule.cls} is not defined in {rel} of {version}"


@pytest.mark.parametrize("versions,version", DISPATCH_CASES, ids=ids(DISPATCH_CASES))
def test_dispatch_rules_are_the_imported_workers(versions, version):
    """The worker classes the dispatch code imports are exactly the classes the rules name."""
    named = {(rule.module, rule.cls) for rule in _dispatch_range(versions).rules if rule.cls}
    assert dispatch_imports(version) == named


@pytest.mark.parametrize("versions,version", DISPATCH_CASES, ids=ids(DISPATCH_CASES))
def test_dispatch_errors_are_raised_there(versions, version):
    lits = [s for rel in DISPATCH_FILES for s in strings(version, rel)]
    for rule in _dispatch_range(versions).rules:
        if rule.error is not None:
            assert any(template_matches(s, rule.error) for s in lits), f"{rule.error!r} is not raised by sglang {version}"


def unresolved_imports(version: str, rel: str) -> list[str]:
    """Top-level `from sglang.x import ...` of one module whose module x is not in the wheel.
    (Names are not checked: sglang re-exports many through `import *`.)"""
    r = root(version)
    bad = []
    for n in _parse(version, rel).body:
        if isinstance(n, ast.ImportFrom) and n.module and n.module.split(".")[0] == "sglang":
            base = r / n.module.replace(".", "/")
            if not (base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()
                    or list(base.parent.glob(base.name + ".*.so"))):
                bad.append(f"{n.module} (line {n.lineno})")
    return bad


@pytest.mark.parametrize("versions,version", DISPATCH_CASES, ids=ids(DISPATCH_CASES))
def test_dispatch_modules_import_only_what_the_wheel_has(versions, version):
    """The module of each chosen worker imports (at top level) only sglang modules that exist in
    the same wheel, so choosing it does not fail with ModuleNotFoundError."""
    for rule in _dispatch_range(versions).rules:
        if rule.cls is not None:
            assert unresolved_imports(version, module_rel(rule.module)) == [], f"{rule.module} in {version}"


# =============================================================================================
# overlap.toml
# =============================================================================================
def env_default(version: str, name: str) -> Optional[bool]:
    """`NAME = EnvBool(<default>)` in srt/environ.py; None when the variable is not declared."""
    t = tree(version, "sglang/srt/environ.py")
    for n in ast.walk(t) if t else ():
        if isinstance(n, (ast.Assign, ast.AnnAssign)):
            targets = n.targets if isinstance(n, ast.Assign) else [n.target]
            if any(isinstance(x, ast.Name) and x.id == name for x in targets):
                assert isinstance(n.value, ast.Call) and ast.unparse(n.value.func) == "EnvBool", ast.unparse(n)
                return n.value.args[0].value
    return None


def has_flag(version: str, flag: str) -> bool:
    return flag in strings(version, "sglang/srt/server_args.py")


OVERLAP_CASES = [(r.versions, v) for r in K.overlap_ranges for v in releases_of(r.versions)]
OVERLAP_EDGE_CASES = [(r.versions, v, side) for r in K.overlap_ranges for side, v in neighbours(r.versions)]


def _overlap_range(versions: str):
    return next(r for r in K.overlap_ranges if r.versions == versions)


@pytest.mark.parametrize("versions,version", OVERLAP_CASES, ids=ids(OVERLAP_CASES))
def test_overlap_switch(versions, version):
    sw = _overlap_range(versions).switch
    env = env_default(version, "SGLANG_ENABLE_SPEC_V2")
    beta = has_flag(version, "--enable-beta-spec")
    if sw.kind == "env":
        assert env is sw.default, f"{sw.name} default in {version}: {env}"
        assert not beta
    elif sw.kind == "flag":
        assert has_flag(version, sw.name) and env is None
        assert sw.default is False  # a store_true flag
    elif sw.kind == "removed":
        assert env is None and not beta
        assert where(version, sw.name), f"{sw.name}: nothing in {version} reads it any more (kind should be 'ignored')"
    elif sw.kind == "ignored":
        assert mentions_anywhere(version, sw.name.encode()) == []
    else:  # none
        assert env is None and not beta and not where(version, "SGLANG_ENABLE_SPEC_V2")


@pytest.mark.parametrize("versions,version,side", OVERLAP_EDGE_CASES, ids=ids(OVERLAP_EDGE_CASES))
def test_overlap_range_changes_at_boundary(versions, version, side):
    """The release just outside belongs to another range, whose switch or rules differ."""
    mine, theirs = _overlap_range(versions), K.overlap_range(version)
    assert theirs is not None and theirs is not mine
    assert (theirs.switch, theirs.rules) != (mine.switch, mine.rules), f"{versions} and {theirs.versions} could be one range"


@pytest.mark.parametrize("versions,version", OVERLAP_CASES, ids=ids(OVERLAP_CASES))
def test_overlap_errors_and_reasons_in_source(versions, version):
    lits = [s for rel in ("sglang/srt/server_args.py", "sglang/srt/arg_groups/speculative_hook.py")
            for s in strings(version, rel)]
    for rule in _overlap_range(versions).rules:
        if rule.error:
            assert any(template_matches(s, rule.error) for s in lits), f"{rule.error!r} is not raised by {version}"
        if rule.reason:
            assert where(version, rule.reason), f"reason {rule.reason!r} is not in {version}"


# --- max_running_requests_reset ---------------------------------------------------------------
HANDLER_ALGOS = {  # 0.5.13+: speculative_hook.py has one handler per algorithm family
    "_handle_eagle_family": {"EAGLE", "EAGLE3", "STANDALONE"}, "_handle_ngram": {"NGRAM"},
    "_handle_dflash": {"DFLASH"}, "_handle_frozen_kv_mtp": {"FROZEN_KV_MTP"},
    "_handle_dspark": {"DSPARK"}, "_handle_uno": {"UNO"},
}


def _algos_tested(test: ast.AST) -> set[str]:
    """Algorithm names an `if` compares speculative_algorithm with (`== "X"`, `in (...)`)."""
    out = set()
    for n in ast.walk(test):
        if isinstance(n, ast.Compare) and "speculative_algorithm" in ast.unparse(n.left):
            for op, comp in zip(n.ops, n.comparators):
                if isinstance(op, ast.Eq) and isinstance(comp, ast.Constant):
                    out.add(comp.value)
                elif isinstance(op, ast.In) and isinstance(comp, (ast.Tuple, ast.List, ast.Set)):
                    out |= {e.value for e in comp.elts if isinstance(e, ast.Constant)}
    return out


def reset_sites(version: str, value: int) -> list[tuple[str, int, frozenset]]:
    """(file, line, algorithms) of every `max_running_requests = value` (or `=value` keyword)
    in argument resolution, with the algorithms the enclosing branch or handler is for."""
    out = []
    for rel in ("sglang/srt/server_args.py", "sglang/srt/arg_groups/speculative_hook.py"):
        t = tree(version, rel)

        def visit(node, algos):
            for child in ast.iter_child_nodes(node):
                a = algos
                if isinstance(child, ast.FunctionDef):
                    a = set(HANDLER_ALGOS.get(child.name, set()))
                if isinstance(node, ast.If) and child in node.body and _algos_tested(node.test):
                    a = _algos_tested(node.test)
                if isinstance(child, ast.Assign):
                    hit = any(ast.unparse(x).endswith("max_running_requests") for x in child.targets)
                else:
                    hit = isinstance(child, ast.keyword) and child.arg == "max_running_requests"
                if hit and isinstance(child.value, ast.Constant) and child.value.value == value:
                    out.append((rel, child.value.lineno, frozenset(a)))
                visit(child, a)

        if t is not None:
            visit(t, set())
    return out


def _algorithms_of(version: str) -> set[str]:
    r = K.dispatch_rules(version)
    return {a for rule in r.rules for a in rule.algorithms} if r else set()


@pytest.mark.parametrize("version", RELEASES)
def test_max_running_requests_reset(version):
    mrr = K.max_running_reset
    sites = reset_sites(version, mrr.value)
    assert all(s[2] for s in sites), f"a reset in {version} for no known algorithm: {sites}"
    reset = set().union(*(s[2] for s in sites))
    if K.mask(mrr.versions) & K.mask_of(version):
        assert reset == set(mrr.algorithms) & _algorithms_of(version), f"{version} resets for {sorted(reset)}: {sites}"
    else:
        assert not reset, f"{version}, outside {mrr.versions}, resets for {sorted(reset)}: {sites}"


# =============================================================================================
# log_lines.toml
# =============================================================================================
def test_log_line_classes_name_real_rows():
    rows = {x.id for x in K.log_lines}
    assert set(FOREIGN_LINES) <= rows and set(OWN_CHECK_LINES) <= rows


LOG_GAPS = {  # row -> (releases whose source has no literal for the line, why)
    **{row: ("<0.5.11", "adaptive speculation (adaptive_spec_params.py) arrives in 0.5.11")
       for row in ("adaptive-init", "adaptive-update", "adaptive-switch")},
    "kv-cache": (">=0.5.17", "the message is assembled at run time: f\"{cache_name} is allocated. ...\" "
                             "(memory_pool.py), checked by test_kv_cache_line_is_assembled"),
}


@pytest.mark.parametrize("lid", [x.id for x in SGLANG_LINES])
def test_log_line_in_sglang_source(lid):
    """A literal in the server's source holds the row's `literal` and renders to a message its
    `pattern` matches, in every release (but the declared gaps)."""
    present = [v for v in RELEASES if scan(v)["logs"][lid]]
    assert present, f"{lid}: no release writes it"
    gap = releases_of(LOG_GAPS[lid][0]) if lid in LOG_GAPS else []
    expected = [v for v in RELEASES if v not in gap]
    assert present == expected, f"{lid}: written by {span(present)}"


def test_kv_cache_line_is_assembled():
    pattern = next(x for x in K.log_lines if x.id == "kv-cache").pattern
    for v in releases_of(LOG_GAPS["kv-cache"][0]):
        t = tree(v, "sglang/srt/mem_cache/memory_pool.py")
        msgs = [m for n in ast.walk(t) if isinstance(n, ast.JoinedStr) and "is allocated" in ast.unparse(n)
                for m in variants(n)]
        assert any(re.search(pattern, m) for m in msgs), f"{v}: {msgs}"


@pytest.mark.parametrize("version", RELEASES)
def test_checkpoint_shards_line(version):
    """Each weight loader's tqdm description, put through sglang's bar format, gives a line the
    checkpoint-shards pattern matches (with its groups)."""
    pattern = next(x for x in K.log_lines if x.id == "checkpoint-shards").pattern
    lits = {s for rel in where(version, " checkpoint shards") + where(version, BAR) for s in strings(version, rel)}
    descs = [s for s in lits if re.fullmatch(r"[\w -]+ checkpoint shards", s)]
    bars = [s for s in lits if BAR in s and s.startswith("{desc}")]
    assert descs and bars, (descs, bars)
    for desc in descs:
        for bar in bars:
            line = bar.format(desc=desc, percentage=50.0, n_fmt="1", total_fmt="2", elapsed="00:01",
                              remaining="00:01", rate_fmt="1.00it/s").rstrip("\n")
            m = re.search(pattern, line)
            assert m and m["percent"] == "50" and m["total"] == "2", line


def dump_form(version: str) -> set[str]:
    """Forms of the `server_args=...` start-up dump in entrypoints/engine.py."""
    forms = set()
    for n in ast.walk(tree(version, "sglang/srt/entrypoints/engine.py")):
        if isinstance(n, ast.JoinedStr) and len(n.values) == 2 and render(n.values[0]) == "server_args=":
            fv = n.values[1].value
            if isinstance(fv, ast.Name):  # f"{server_args=}": repr of the ServerArgs object
                forms.add("ServerArgs(")
            elif isinstance(fv, ast.Call):  # resolved_dict() / _server_args_for_logging(...)
                forms.add("{")
    return forms


DUMP = next(x for x in K.log_lines if x.id == "server-args-dump")
DUMP_CASES = [(form, v) for form, spec in DUMP.versions_by_form.items() for v in releases_of(spec)]


@pytest.mark.parametrize("form,version", DUMP_CASES, ids=ids(DUMP_CASES))
def test_server_args_dump_form(form, version):
    assert dump_form(version) == {form}
    assert re.search(DUMP.pattern, f"server_args={form}model_path='m')")


def test_server_args_dump_forms_cover_all_releases():
    assert sorted(v for _, v in DUMP_CASES) == sorted(RELEASES)


@pytest.mark.parametrize("version", RELEASES)
def test_capture_lines_match_their_pattern(version):
    """Every CUDA-graph capture begin/end line of the release, rendered from its format string,
    is matched by draft-cuda-graph when it is about the draft model and by cuda-graph otherwise."""
    draft = re.compile(next(x for x in K.log_lines if x.id == "draft-cuda-graph").pattern)
    target = re.compile(next(x for x in K.log_lines if x.id == "cuda-graph").pattern)
    msgs = [(rel, m) for rel, m in scan(version)["captures"]
            if "/npu/" not in rel and not re.match(r"Capture (?:cpu|CPU) graph", m)]  # other devices
    assert msgs
    for rel, msg in msgs:
        head = re.split(r"\b(?:begin|end)\b", msg)[0]
        if "draft" in head:
            assert draft.search(msg) and not target.search(msg), f"{rel}: {msg!r} is a draft capture"
        else:
            assert target.search(msg) and not draft.search(msg), f"{rel}: {msg!r} is a target capture"
