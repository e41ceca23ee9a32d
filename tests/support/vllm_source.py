"""Reading vllm's source (from the published wheels, tests/support/vllm_wheels.py) with `ast`.

The proposer a runner builds is decided by an if/elif chain over `speculative_config`
predicates (`method == "mtp"`, `use_eagle()`, ...). `dispatch` walks that chain for one method
the way Python would, resolving each predicate from SpeculativeConfig's own source
(`def use_eagle(self): return self.method in (...)`). Predicates that look at anything but
the method (the draft model's architecture, ...) are unknown and taken as False: they are the
model-specific speculators (Gemma4, multi-module MTP), which a plain method never selects."""
from __future__ import annotations

import ast
import functools
from pathlib import Path
from typing import Optional

from tests.support import vllm_wheels

UNKNOWN = object()


@functools.lru_cache(maxsize=None)
def tree(version: str, member: str) -> Optional[ast.Module]:
    text = vllm_wheels.read(version, member)
    return ast.parse(text) if text is not None else None


def classes(version: str, member: str) -> dict[str, ast.ClassDef]:
    t = tree(version, member)
    return {n.name: n for n in ast.walk(t) if isinstance(n, ast.ClassDef)} if t else {}


def function(version: str, member: str, cls: Optional[str], name: str) -> Optional[ast.FunctionDef]:
    t = tree(version, member)
    if t is None:
        return None
    scope = t.body if cls is None else (classes(version, member).get(cls).body if cls in classes(version, member) else [])
    return next((n for n in scope if isinstance(n, ast.FunctionDef) and n.name == name), None)


def strings(version: str, member: str) -> list[str]:
    """Every string constant of a module; f-strings as their literal parts with %s for fields."""
    t = tree(version, member)
    if t is None:
        return []
    out = []
    for n in ast.walk(t):
        if isinstance(n, ast.Constant) and isinstance(n.value, str):
            out.append(n.value)
        elif isinstance(n, ast.JoinedStr):
            out.append("".join(v.value if isinstance(v, ast.Constant) else "%s" for v in n.values))
    return out


class _Spec:
    """Evaluates SpeculativeConfig predicates of one release for a given method."""

    def __init__(self, version: str, method: str) -> None:
        self.version, self.method = version, method
        self.unknown: list[str] = []

    def predicate(self, name: str):
        f = function(self.version, "vllm/config/speculative.py", "SpeculativeConfig", name)
        body = [s for s in (f.body if f else []) if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
        if len(body) != 1 or not isinstance(body[0], ast.Return):
            self.unknown.append(name)
            return UNKNOWN
        v = self.eval(body[0].value)
        if v is UNKNOWN:
            self.unknown.append(name)
        return v

    def eval(self, e: ast.expr):
        if isinstance(e, ast.Constant):
            return e.value
        if isinstance(e, (ast.Tuple, ast.List, ast.Set)):
            items = [self.eval(x) for x in e.elts]
            return UNKNOWN if UNKNOWN in items else tuple(items)
        if isinstance(e, ast.Attribute) and e.attr == "method":
            return self.method
        if isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) and not e.args:
            return self.predicate(e.func.attr)
        if isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.Not):
            v = self.eval(e.operand)
            return UNKNOWN if v is UNKNOWN else not v
        if isinstance(e, ast.BoolOp):
            vals = [self.eval(x) for x in e.values]
            if isinstance(e.op, ast.And):
                return False if False in vals else UNKNOWN if UNKNOWN in vals else all(vals)
            return True if True in vals else UNKNOWN if UNKNOWN in vals else any(vals)
        if isinstance(e, ast.Compare) and len(e.ops) == 1:
            a, b = self.eval(e.left), self.eval(e.comparators[0])
            if a is UNKNOWN or b is UNKNOWN:
                return UNKNOWN
            op = e.ops[0]
            if isinstance(op, ast.Eq):
                return a == b
            if isinstance(op, ast.NotEq):
                return a != b
            if isinstance(op, ast.In):
                return a in b
            if isinstance(op, ast.NotIn):
                return a not in b
        return UNKNOWN


def _built_class(stmts: list[ast.stmt]) -> Optional[str]:
    for s in stmts:
        for n in ast.walk(s):
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and (
                    n.func.id.endswith(("Proposer", "Speculator")) or n.func.id == "create_custom_proposer"):
                return n.func.id
    return None


def _chain_of(fn: ast.FunctionDef) -> Optional[ast.If]:
    """The first if/elif chain of `fn` whose branches build proposers or speculators."""
    for n in ast.walk(fn):
        test = ast.unparse(n.test) if isinstance(n, ast.If) else ""
        if test and _built_class(n.body) and ("speculative_config.method" in test or "speculative_config.use" in test):
            return n
    return None


def dispatch(version: str, fn: ast.FunctionDef, method: str) -> tuple[Optional[str], list[str]]:
    """(class built for `method`, predicates that could not be read and were taken as False)."""
    spec = _Spec(version, method)
    node: Optional[ast.If] = _chain_of(fn)
    while node is not None:
        v = spec.eval(node.test)
        if v is True:
            return _built_class(node.body), spec.unknown
        nxt = node.orelse
        if len(nxt) == 1 and isinstance(nxt[0], ast.If):
            node = nxt[0]
        else:
            return _built_class(nxt) if nxt else None, spec.unknown
    return None, spec.unknown


def v1_proposer(version: str, method: str) -> tuple[Optional[str], list[str]]:
    fn = function(version, "vllm/v1/worker/gpu_model_runner.py", "GPUModelRunner", "__init__")
    return dispatch(version, fn, method) if fn else (None, [])


def v2_speculator(version: str, method: str) -> tuple[Optional[str], list[str]]:
    fn = function(version, "vllm/v1/worker/gpu/spec_decode/__init__.py", None, "init_speculator")
    if fn is not None and "speculator_class" in ast.unparse(fn):
        return registered_speculator(version, method), []
    return dispatch(version, fn, method) if fn else (None, [])


_PKG = "vllm/v1/worker/gpu/spec_decode/"


def registered_speculator(version: str, method: str) -> Optional[str]:
    """0.34+: method -> config class (`_CONFIG_BY_METHOD`) -> its `speculator_class`, inherited
    along the config's bases within its module."""
    t = tree(version, _PKG + "speculator_config.py")
    table = next((n.value for n in ast.walk(t) if isinstance(n, ast.AnnAssign)
                  and getattr(n.target, "id", "") == "_CONFIG_BY_METHOD"), None) if t else None
    if not isinstance(table, ast.Dict):
        return None
    for k, v in zip(table.keys, table.values):
        if isinstance(k, ast.Constant) and k.value == method and isinstance(v, ast.Call):
            mod, cls = (a.value for a in v.args)
            member = _PKG + mod.replace(".", "/") + ".py"
            return _speculator_class(version, member, cls)
    return None


def _speculator_class(version: str, member: str, cls: str) -> Optional[str]:
    node = classes(version, member).get(cls)
    while node is not None:
        for s in node.body:
            if isinstance(s, (ast.Assign, ast.AnnAssign)) and "speculator_class" in ast.unparse(s).split("=")[0] \
                    and s.value is not None:
                val = ast.literal_eval(s.value)
                return val.rsplit(".", 1)[-1] if isinstance(val, str) else None
        base = next((b.id for b in node.bases if isinstance(b, ast.Name)), None)
        node = classes(version, member).get(base) if base else None
    return None


def module_defining(version: str, cls: str, under: str) -> list[str]:
    """Members under `under` (a package path) whose source defines class `cls`."""
    root = vllm_wheels.members(version)
    out = []
    for p in sorted((root / under).rglob("*.py")):
        member = str(p.relative_to(root))
        if cls in classes(version, member):
            out.append(member)
    return out


def root(version: str) -> Path:
    return vllm_wheels.members(version)
