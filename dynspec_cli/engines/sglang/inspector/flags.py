"""The options the installed ServerArgs parser registers, read from its source by AST."""
import ast
import os

from .common import Source, _dotted, _subscript_slice
from .common import shared

_Module, _find_class = shared.Module, shared.find_class
from .values import Context, argument_spec, field_spec


def _is_true(node):
    return isinstance(node, ast.Constant) and node.value is True


def _str_value(mod, node):
    """A str the expression evaluates to statically, else None."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return ""
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Mod)):
        left = _str_value(mod, node.left)
        return left if left is not None else None
    if isinstance(node, ast.Name) and mod is not None and node.id in mod.assigns:
        return _str_value(None, mod.assigns[node.id])
    return None


def _boolean_optional(node):
    d = _dotted(node) if node is not None else None
    return bool(d) and d.split(".")[-1] == "BooleanOptionalAction"


def _option_strings(names, action_node):
    out = list(names)
    if _boolean_optional(action_node):  # argparse adds --no-X for every --X
        out += ["--no-" + n[2:] for n in names if n.startswith("--")]
    return out


def _field_cli(mod, ann_node, field, cache_depth=0):
    """Mirror of arg_utils.add_cli_args_from_dataclass for one field: its option strings, or None when
    the field gets no flag (no A[...] / no Arg or str metadata / no_cli=True).
    Returns (names, reason, action_text, (type node, Arg keywords)) for value_spec."""
    ann = ann_node
    if isinstance(ann, ast.Constant) and isinstance(ann.value, str):  # quoted annotation
        try:
            ann = ast.parse(ann.value, mode="eval").body
        except SyntaxError:
            return None, "unparseable string annotation", None, None
    if isinstance(ann, ast.Name) and mod is not None and ann.id in mod.assigns and cache_depth < 3:
        return _field_cli(mod, mod.assigns[ann.id], field, cache_depth + 1)  # type alias
    if not isinstance(ann, ast.Subscript):
        return None, "not Annotated", None, None
    head = _dotted(ann.value) or ""
    if head.split(".")[-1] not in ("A", "Annotated"):
        return None, "not Annotated", None, None
    sl = _subscript_slice(ann)
    elts = sl.elts if isinstance(sl, ast.Tuple) else [sl]
    for meta in elts[1:]:
        resolved = meta
        if isinstance(meta, ast.Name) and mod is not None and meta.id in mod.assigns:
            resolved = mod.assigns[meta.id]
        if isinstance(resolved, ast.Call) and (_dotted(resolved.func) or "").split(".")[-1] == "Arg":
            kw = {k.arg: k.value for k in resolved.keywords if k.arg}
            if "no_cli" in kw and _is_true(kw["no_cli"]):
                return None, "no_cli=True", None, None
            cli_name = "--" + field.replace("_", "-")
            if "cli_name" in kw:
                v = _str_value(mod, kw["cli_name"])
                if v:
                    cli_name = v
            names = [cli_name]
            if "aliases" in kw and isinstance(kw["aliases"], (ast.List, ast.Tuple)):
                names += [x for x in (_str_value(mod, e) for e in kw["aliases"].elts) if x]
            action = kw.get("action")
            return (_option_strings(names, action), None, (mod.src.segment(action) if action is not None else None),
                    (elts[0], kw))
        if _str_value(mod, resolved) is not None:
            return ["--" + field.replace("_", "-")], None, None, (elts[0], {})
    return None, "no Arg/str metadata", None, None


def _is_classvar(ann):
    d = _dotted(ann.value) if isinstance(ann, ast.Subscript) else _dotted(ann)
    return bool(d) and d.split(".")[-1] == "ClassVar"


def _class_fields(sglang_dir, mod, cls, cache, seen=None):
    """AnnAssign fields of a class, base classes' first (dataclass / msgspec order)."""
    seen = seen if seen is not None else set()
    key = (mod.modname, cls.name)
    if key in seen:
        return []
    seen.add(key)
    out = []
    for b in cls.bases:
        name = _dotted(b)
        if not name or "." in name:
            continue
        if name in mod.classes:
            out += _class_fields(sglang_dir, mod, mod.classes[name], cache, seen)
        elif name in mod.imports and mod.imports[name][1] is not None:
            bmod, bcls = _find_class(sglang_dir, mod.imports[name][0], mod.imports[name][1], cache)
            if bcls is not None:
                out += _class_fields(sglang_dir, bmod, bcls, cache, seen)
    for node in cls.body:
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and not _is_classvar(node.annotation):
            out.append((mod, cls, node))
    return out


def _statement_calls(body):
    """Calls that are whole statements or assigned/returned values, in every nested block: where
    parser.add_argument(...) and friends live. Much cheaper than ast.walk over every expression."""
    stack = list(reversed(body))
    while stack:
        node = stack.pop()
        value = getattr(node, "value", None) if isinstance(
            node, (ast.Expr, ast.Assign, ast.AnnAssign, ast.AugAssign, ast.Return)) else None
        if isinstance(value, ast.Call):
            yield value
        elif isinstance(value, ast.Await) and isinstance(value.value, ast.Call):
            yield value.value
        for field in ("body", "orelse", "finalbody", "handlers"):
            sub = getattr(node, field, None)
            if isinstance(sub, list):
                stack.extend(reversed(sub))


def collect_flags(pkg_dir, warnings):
    """Every option string the installed ServerArgs parser registers, found statically:
    explicit add_argument(...) calls in srt/server_args.py, plus (when that file calls
    add_cli_args_from_dataclass) the A[...]-annotated fields of ServerArgs and of the namespace
    classes it collects (srt/arg_groups/fields/*.py), mirroring arg_utils.add_cli_args_from_dataclass."""
    res = {"options": {}, "sources": [], "errors": [], "skipped_fields": {}, "_value_sources": {}}
    sa_path = os.path.join(pkg_dir, "srt", "server_args.py")
    if not os.path.isfile(sa_path):
        res["errors"].append("no srt/server_args.py in %s" % pkg_dir)
        return res
    src = Source.get(sa_path)
    if src.tree is None:
        e = src.syntax_error
        res["errors"].append("%s:%s: %s (flags cannot be read)" % (sa_path, e.lineno, e.msg))
        return res
    cache = {}
    sa_mod = _Module(src, "sglang.srt.server_args")
    cache["sglang.srt.server_args"] = sa_mod

    def add(opt, file, line, style, cls=None, action=None, values=None):
        if opt not in res["options"]:
            res["options"][opt] = {"file": file, "line": line, "style": style, "class": cls, "action": action}
            res["_value_sources"][opt] = values

    # explicit add_argument("--x", ...) anywhere in server_args.py
    n_explicit = 0
    uses_dataclass_helper = False
    helper_calls = []
    for node in _statement_calls(src.tree.body):
        fname = _dotted(node.func) or ""
        if fname.split(".")[-1] == "add_argument":
            names = [a.value for a in node.args
                     if isinstance(a, ast.Constant) and isinstance(a.value, str) and a.value.startswith("-")]
            action = next((k.value for k in node.keywords if k.arg == "action"), None)
            for opt in _option_strings(names, action):
                add(opt, sa_path, node.lineno, "add_argument",
                    action=src.segment(action) if action is not None else None, values=(sa_mod, node, None))
                n_explicit += 1
        elif fname.split(".")[-1] == "add_cli_args_from_dataclass":
            uses_dataclass_helper = True
            helper_calls.append(node)
    res["sources"].append({"file": sa_path, "style": "add_argument", "count": n_explicit})
    res["_context"] = Context(pkg_dir, cache)
    if not uses_dataclass_helper:
        return res

    # which classes the helper sees: ServerArgs itself, plus every namespace collect_input_fields gets
    classes = []
    if "ServerArgs" in sa_mod.classes:
        classes.append((sa_mod, sa_mod.classes["ServerArgs"]))
    only_fields = None
    for call in helper_calls:
        for k in call.keywords:
            if k.arg == "fields" and isinstance(k.value, (ast.List, ast.Tuple)):
                only_fields = set(x for x in (_str_value(sa_mod, e) for e in k.value.elts) if x)
    ns_names = []
    for node in _statement_calls(src.tree.body):
        if (_dotted(node.func) or "").split(".")[-1] == "collect_input_fields" and node.args:
            arg = node.args[0]
            if isinstance(arg, ast.Name) and arg.id in sa_mod.assigns:
                arg = sa_mod.assigns[arg.id]
            if isinstance(arg, (ast.List, ast.Tuple)):
                ns_names += [_dotted(e) for e in arg.elts if _dotted(e)]
    for name in ns_names:
        if name in sa_mod.classes:
            classes.append((sa_mod, sa_mod.classes[name]))
        elif name in sa_mod.imports and sa_mod.imports[name][1]:
            m, c = _find_class(pkg_dir, sa_mod.imports[name][0], sa_mod.imports[name][1], cache)
            if c is not None:
                classes.append((m, c))
            else:
                res["errors"].append("namespace %s (from %s) not found" % (name, sa_mod.imports[name][0]))
        else:
            res["errors"].append("namespace %s not resolvable in server_args.py" % name)
    per_file = {}
    for mod, cls in classes:
        if mod.src.tree is None:
            e = mod.src.syntax_error
            res["errors"].append("%s:%s: %s (flags cannot be read)" % (mod.src.path, e.lineno, e.msg))
            continue
        for fmod, fcls, node in _class_fields(pkg_dir, mod, cls, cache):
            field = node.target.id
            if only_fields is not None and field not in only_fields:
                continue
            names, reason, action, meta = _field_cli(fmod, node.annotation, field)
            if names is None:
                if reason == "no_cli=True":
                    res["skipped_fields"][field] = {"file": fmod.src.path, "line": node.lineno, "reason": reason}
                continue
            for opt in names:
                add(opt, fmod.src.path, node.lineno, "annotated-field", cls=fcls.name, action=action,
                    values=(fmod, meta[0], meta[1]))
            per_file[fmod.src.path] = per_file.get(fmod.src.path, 0) + 1
    for f in sorted(per_file):
        res["sources"].append({"file": f, "style": "annotated-field", "count": per_file[f]})
    return res


def value_spec(res, opt):
    """What argparse will accept as `opt`'s value(s): {type, choices, nargs[, action]} (see values.py);
    None when `opt` is not registered. Computed on demand: only the flags a user passes need it."""
    src = res.get("_value_sources", {}).get(opt)
    if src is None:
        return None
    mod, node, kw = src
    try:
        if kw is None:
            return argument_spec(res["_context"], mod, node)
        return field_spec(res["_context"], mod, node, kw)
    except Exception as e:  # a construct this mirror does not know: say so, judge nothing
        return {"type": None, "choices": None, "nargs": None, "error": "%s: %s" % (type(e).__name__, e)}


def flag_status(flag, options):
    """defined: the exact option string is registered; accepted: argparse would take it (exact, or an
    unambiguous prefix, since sglang's parser keeps allow_abbrev)."""
    name = flag.split("=", 1)[0] if flag.startswith("--") else flag
    rec = {"flag": flag, "option": name, "defined": name in options, "accepted": False, "abbreviation_of": None,
           "defined_at": options.get(name)}
    if rec["defined"]:
        rec["accepted"] = True
    elif name.startswith("--"):
        cands = [o for o in options if o.startswith(name)]
        if len(cands) == 1:
            rec["accepted"] = True
            rec["abbreviation_of"] = cands[0]
        elif len(cands) > 1:
            rec["ambiguous"] = sorted(cands)[:20]
    return rec
