"""Mine, per sglang release, which worker classes override a method of one of their speculative
base classes, and whether the override runs the base's method.

    python -m tests.tools.mine_overrides            # the [[override]] rows for configs/sglang/modules.toml
    python -m tests.tools.mine_overrides --release 0.5.9

A patch in `EAGLEWorkerV2.__init__` is dead for a `StandaloneWorkerV2` whose `__init__` never
calls `super().__init__` (or `EAGLEWorkerV2.__init__(self, ...)`), although EAGLEWorkerV2 is in
its MRO; so is a patch in EAGLEWorkerV2.__init__ when the override calls
`BaseSpecWorker.__init__(self)` directly (0.5.17+), skipping it. Each override row says which
class's method it calls (`super()` = the next class in the MRO; "" = none: it replaces the
method) and whether only conditionally (inside an `if`/loop/except).
Only overrides of concrete methods (not abstract, not a bare `...`/`pass`/`raise
NotImplementedError`) of classes with a row in modules.toml count. Read with `ast` from the
wheels of tests/support/wheels.py; sglang is never imported.
"""
from __future__ import annotations

import argparse
import ast
import functools
import sys
from pathlib import Path
from typing import Optional

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.support import wheels  # noqa: E402

@functools.lru_cache(maxsize=256)
def class_def(version: str, module: str, name: str) -> Optional[ast.ClassDef]:
    p = wheels.unpacked(version) / ("sglang/srt/speculative/" + module.replace(".", "/") + ".py")
    if not p.is_file():
        return None
    t = ast.parse(p.read_bytes())
    return next((n for n in t.body if isinstance(n, ast.ClassDef) and n.name == name), None)


def methods(cd: ast.ClassDef) -> dict[str, ast.FunctionDef]:
    return {n.name: n for n in cd.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}


def is_concrete(fn: ast.FunctionDef) -> bool:
    if any(ast.unparse(d).endswith("abstractmethod") for d in fn.decorator_list):
        return False
    body = [s for s in fn.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
    if not body:
        return False
    if len(body) == 1 and (isinstance(body[0], ast.Pass) or (isinstance(body[0], ast.Raise)
                                                             and "NotImplementedError" in ast.unparse(body[0]))):
        return False
    return not any(isinstance(d, ast.Name) and d.id == "property" for d in fn.decorator_list)


def _called(node: ast.AST, method: str, after: list[str]) -> Optional[str]:
    """The class whose `method` node calls: `super().method(...)` (or `super(C, self)`) is the
    next class in the MRO, `Base.method(self, ...)` is Base; None when it calls neither."""
    for n in ast.walk(node):
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == method:
            v = n.func.value
            if isinstance(v, ast.Call) and isinstance(v.func, ast.Name) and v.func.id == "super" and after:
                return after[0]
            if isinstance(v, ast.Name) and v.id in after:
                return v.id
    return None


def override_kind(fn: ast.FunctionDef, after: list[str]) -> tuple[Optional[str], bool]:
    """(class whose method the override calls, only conditionally?). A call at the top level of
    the override (or in a `with`/`try` body, which always runs) is unconditional; one only
    inside an if/loop/except is conditional; (None, False): the override replaces it."""
    def walk(stmts) -> Optional[tuple[str, bool]]:
        found = None
        for s in stmts:
            if isinstance(s, (ast.With, ast.AsyncWith)):
                r = walk(s.body)
            elif isinstance(s, ast.Try):
                r = walk(s.body)
                if r is None:
                    c = next((c for h in s.handlers + s.orelse + s.finalbody if (c := _called(h, fn.name, after))), None)
                    r = (c, True) if c else None
            elif isinstance(s, (ast.If, ast.For, ast.AsyncFor, ast.While, ast.Match)):
                c = _called(s, fn.name, after)
                r = (c, True) if c else None
            else:
                c = _called(s, fn.name, after)
                r = (c, False) if c else None
            if r is not None and not r[1]:
                return r
            found = found or r
        return found
    return walk(fn.body) or (None, False)


def overrides(version: str, k=None) -> dict[tuple[str, str], tuple[Optional[str], bool]]:
    """(class, method) -> (the class whose method it calls, conditionally?) for every class of
    modules.toml that exists in `version`."""
    from dynspec_cli.engines.sglang.knowledge import knowledge

    k = k or knowledge()
    out: dict[tuple[str, str], Kind] = {}
    for row in k.classes:
        if not k.mask(row.versions) & k.mask_of(version):
            continue
        cd = class_def(version, row.module, row.name)
        if cd is None:
            continue
        ancestors = [a for a in k.mro(version, row.name)[1:] if k.class_row(version, a)]
        inherited: set[str] = set()
        for a in ancestors:
            ad = class_def(version, k.class_row(version, a).module, a)
            if ad is not None:
                inherited |= {m for m, fn in methods(ad).items() if is_concrete(fn)}
        after = k.mro(version, row.name)[1:]
        for name, fn in methods(cd).items():
            if name in inherited:
                out[(row.name, name)] = override_kind(fn, after)
    return out


def rows(k=None) -> list[dict]:
    """[[override]] rows: one per (class, method, kind) and contiguous run of releases."""
    from dynspec_cli.engines.sglang.knowledge import knowledge

    k = k or knowledge()
    per = {v: overrides(v, k) for v in k.releases}
    keys = sorted({key for o in per.values() for key in o})
    out = []
    for cls, meth in keys:
        run: list[str] = []
        kind = None
        for v in k.releases + [None]:
            now = per[v].get((cls, meth)) if v else None
            if now != kind or v is None:
                if kind is not None:
                    out.append({"class": cls, "method": meth, "versions": _spec(k, run),
                                "calls": kind[0] or "", "conditional": kind[1]})
                run, kind = [], now
            if now is not None:
                run.append(v)
    return out


def _spec(k, run: list[str]) -> str:
    first, last = run[0], run[-1]
    i = k.releases.index(last)
    upper = f"<{k.releases[i + 1]}" if i + 1 < len(k.releases) else f"<={last}"
    return f">={first},{upper}"


def main(argv: Optional[list[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--release", help="print the overrides of one release instead of the rows")
    a = ap.parse_args(argv)
    if a.release:
        for (c, m), (called, cond) in sorted(overrides(a.release).items()):
            print(f"{c}.{m}: " + (f"calls {called}.{m}" + (" (conditionally)" if cond else "") if called else "replaces"))
        return 0
    for r in rows():
        cond = "\nconditional = true" if r["conditional"] else ""
        print(f'[[override]]\nclass = "{r["class"]}"\nmethod = "{r["method"]}"\nversions = "{r["versions"]}"\n'
              f'calls = "{r["calls"]}"{cond}\n')
    return 0


if __name__ == "__main__":
    sys.exit(main())
