"""Which values each option accepts, read statically as argparse will see them: `type=` (as written),
`choices=` (when they are literals or names bound to literals) and `nargs=`. For dataclass fields
this mirrors arg_utils.add_cli_args_from_dataclass (sglang >= 0.5.23): Optional[X] is X, Literal[...]
gives choices, list[X] gives nargs "+", bool is store_true, int/float/str map to themselves."""
import ast

from .common import _dotted, _subscript_slice
from .common import shared

_load_module = shared.load_module

_UNKNOWN = object()
_MAX_CHOICES = 300


class Context(object):
    """What resolving a name needs: the sglang dir and the parsed-module cache."""

    def __init__(self, sglang_dir, cache):
        self.sglang_dir = sglang_dir
        self.cache = cache


def static_value(ctx, mod, node, depth=0):
    """The value of a literal expression (lists of constants, names bound to them in this or an
    imported module, list(...)/sorted(...)/tuple(...) of them, a + b); _UNKNOWN otherwise."""
    if node is None or depth > 6:
        return _UNKNOWN
    if isinstance(node, ast.Constant) and isinstance(node.value, (str, int, float, bool)):
        return node.value
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        out = []
        for e in node.elts:
            if isinstance(e, ast.Starred):
                v = static_value(ctx, mod, e.value, depth + 1)
                if not isinstance(v, list):
                    return _UNKNOWN
                out.extend(v)
                continue
            v = static_value(ctx, mod, e, depth + 1)
            if v is _UNKNOWN or isinstance(v, list):
                return _UNKNOWN
            out.append(v)
        return out
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        a, b = static_value(ctx, mod, node.left, depth + 1), static_value(ctx, mod, node.right, depth + 1)
        return a + b if isinstance(a, list) and isinstance(b, list) else _UNKNOWN
    if isinstance(node, ast.Call) and (_dotted(node.func) or "") in ("list", "sorted", "tuple") \
            and len(node.args) == 1 and not node.keywords:
        v = static_value(ctx, mod, node.args[0], depth + 1)
        return (sorted(v) if _dotted(node.func) == "sorted" else v) if isinstance(v, list) else _UNKNOWN
    if isinstance(node, ast.Name) and mod is not None:
        if node.id in mod.assigns:
            return static_value(ctx, mod, mod.assigns[node.id], depth + 1)
        if node.id in mod.imports:
            src_mod, src_name = mod.imports[node.id]
            other = _load_module(ctx.sglang_dir, src_mod, ctx.cache) if src_name else None
            if other is not None and src_name in other.assigns:
                return static_value(ctx, other, other.assigns[src_name], depth + 1)
            if other is not None and src_name in other.imports:
                return static_value(ctx, other, ast.Name(id=src_name, ctx=ast.Load()), depth + 1)
    return _UNKNOWN


def _choices(ctx, mod, node):
    if node is None or isinstance(node, ast.Constant) and node.value is None:
        return {"choices": None}
    v = static_value(ctx, mod, node)
    if not isinstance(v, list):
        return {"choices": None, "choices_unknown": mod.src.segment(node)}
    return {"choices": v[:_MAX_CHOICES]} if len(v) <= _MAX_CHOICES else {"choices": None, "choices_unknown": "too many"}


def _nargs(node):
    if isinstance(node, ast.Constant) and isinstance(node.value, (str, int)) and not isinstance(node.value, bool):
        return node.value
    return None if node is None else "?unknown"


def argument_spec(ctx, mod, call):
    """type/choices/nargs of a parser.add_argument(...) call."""
    kw = dict((k.arg, k.value) for k in call.keywords if k.arg)
    spec = {"type": (_dotted(kw["type"]) or mod.src.segment(kw["type"])) if "type" in kw else None,
            "nargs": _nargs(kw.get("nargs"))}
    if "action" in kw:
        spec["action"] = _dotted(kw["action"]) or mod.src.segment(kw["action"])
    spec.update(_choices(ctx, mod, kw.get("choices")))
    return spec


def _unwrap_optional(node):
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):  # X | None
        sides = [s for s in (node.left, node.right) if not (isinstance(s, ast.Constant) and s.value is None)]
        return sides[0] if len(sides) == 1 else node
    if isinstance(node, ast.Subscript):
        head = (_dotted(node.value) or "").split(".")[-1]
        sl = _subscript_slice(node)
        if head == "Optional":
            return sl
        if head == "Union" and isinstance(sl, ast.Tuple):
            rest = [e for e in sl.elts if not (isinstance(e, ast.Constant) and e.value is None)
                    and (_dotted(e) or "") not in ("None", "type(None)")]
            if len(rest) == 1:
                return rest[0]
    return node


def _scalar_type(node):
    name = (_dotted(node) or "").split(".")[-1]
    return name if name in ("int", "float") else "str"  # _infer_type_func: anything else is str


def field_spec(ctx, mod, type_node, kw):
    """type/choices/nargs/action argparse gets for one A[T, Arg(...)] field (kw: Arg's keywords)."""
    if kw.get("action") is not None:
        return {"type": None, "choices": None, "nargs": None}
    parser = kw.get("type_parser")
    parser_text = (_dotted(parser) or mod.src.segment(parser)) if parser is not None else None
    inner = _unwrap_optional(type_node)
    head = (_dotted(inner.value) or "").split(".")[-1] if isinstance(inner, ast.Subscript) else None
    if head == "Literal":
        sl = _subscript_slice(inner)
        lits = static_value(ctx, mod, sl if isinstance(sl, ast.Tuple) else ast.Tuple(elts=[sl], ctx=ast.Load()))
        spec = {"type": parser_text or ("int" if isinstance(lits, list) and lits and type(lits[0]) is int else
                                        "float" if isinstance(lits, list) and lits and type(lits[0]) is float
                                        else "str"), "nargs": None}
        if "choices" in kw:
            spec.update(_choices(ctx, mod, kw["choices"]))
        elif isinstance(lits, list):
            spec["choices"] = lits
        else:
            spec.update({"choices": None, "choices_unknown": mod.src.segment(inner)})
        return spec
    if head in ("list", "List") and parser is None:
        elem = _subscript_slice(inner)
        spec = {"type": _scalar_type(elem), "nargs": _nargs(kw.get("nargs")) or "+"}
        spec.update(_choices(ctx, mod, kw.get("choices")))
        return spec
    if (_dotted(inner) or "") == "bool":
        return {"type": None, "choices": None, "nargs": None, "action": "store_true"}
    spec = {"type": parser_text or _scalar_type(inner), "nargs": _nargs(kw.get("nargs"))}
    spec.update(_choices(ctx, mod, kw.get("choices")))
    return spec
