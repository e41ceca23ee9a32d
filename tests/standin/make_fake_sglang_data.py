"""Regenerate fake_sglang_data.json, the data the GPU stand-in (fake_sglang_server.py) reads when it
runs under an interpreter that cannot import dynspec (stdlib only, e.g. a bare python3 over SSH).

    python3 -m tests.standin.make_fake_sglang_data                # needs dynspec and the cached wheels
    python3 -m tests.standin.make_fake_sglang_data --tables-only  # after editing configs/sglang/*.toml

Two parts:
  tables       dynspec's knowledge tables (configs/sglang/*.toml) with every version specifier
               expanded to the list of releases it covers, so no PEP 440 code is needed to use them.
  server_args  sglang's ServerArgs fields in declaration order with their default values, and its
               command-line options, read from the real published wheels: 0.5.9 (the dataclass whose
               repr is the `server_args=ServerArgs(...)` dump) and 0.5.23 (the msgspec record whose
               resolved dict is the `server_args={...}` dump).

tests/standin/test_fake_server.py checks that the tables part equals what dynspec loads now.
"""
from __future__ import annotations

import ast
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
OUT = HERE / "fake_sglang_data.json"
DUMP_RELEASES = {"0.5.9": "dataclass", "0.5.23": "dict"}


# --- default values ---------------------------------------------------------------------------
def _module_consts(tree: ast.Module) -> dict:
    consts = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            try:
                consts[node.targets[0].id] = ast.literal_eval(node.value)
            except (ValueError, SyntaxError, TypeError):
                pass
    return consts


def _default(node: ast.AST | None, consts: dict):
    """The value of a field's default expression, when it is a constant one (else None)."""
    if node is None:
        return None
    try:
        return ast.literal_eval(node)
    except (ValueError, SyntaxError, TypeError):
        pass
    if isinstance(node, ast.Call):  # dataclasses.field(default_factory=...) / msgspec.field(...)
        for kw in node.keywords:
            if kw.arg == "default":
                return _default(kw.value, consts)
            if kw.arg == "default_factory":
                f = kw.value
                if isinstance(f, ast.Name) and f.id in ("list", "dict", "tuple"):
                    return {"list": [], "dict": {}, "tuple": ()}[f.id]
                if isinstance(f, ast.Lambda):
                    body = f.body
                    if isinstance(body, ast.Call) and isinstance(body.func, ast.Name) and body.args:
                        inner = _default(body.args[0], consts)
                        return list(inner) if inner is not None else []
                    return _default(body, consts)
        return None
    if isinstance(node, ast.Name):
        return consts.get(node.id)
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name):
        seq = consts.get(node.value.id)
        try:
            return seq[ast.literal_eval(node.slice)]
        except Exception:
            return None
    if isinstance(node, ast.BinOp):
        try:
            return eval(compile(ast.Expression(node), "<default>", "eval"), {"__builtins__": {}}, {})
        except Exception:
            return None
    return None


# --- argparse options -----------------------------------------------------------------------------
def _option_from_call(call: ast.Call) -> dict | None:
    flags = [a.value for a in call.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
    if not flags or not flags[0].startswith("--"):
        return None
    kw = {k.arg: k.value for k in call.keywords if k.arg}
    opt = {"flags": flags, "dest": None, "action": "store", "type": "str", "nargs": None, "required": False,
           "choices": None}
    if "dest" in kw and isinstance(kw["dest"], ast.Constant):
        opt["dest"] = kw["dest"].value
    else:
        opt["dest"] = flags[0][2:].replace("-", "_")
    action = kw.get("action")
    if isinstance(action, ast.Constant):
        opt["action"] = action.value
    elif action is not None:
        opt["action"] = "store"  # custom actions (LoRAPathAction, DeprecatedAction): keep the nargs
    t = kw.get("type")
    tname = ast.unparse(t) if t is not None else "str"
    opt["type"] = tname if tname in ("int", "float") else ("json" if tname == "json.loads" else "str")
    n = kw.get("nargs")
    if n is not None:
        opt["nargs"] = ast.literal_eval(n)
        if opt["nargs"] == 0:
            opt["action"], opt["nargs"] = "store_true", None
    r = kw.get("required")
    opt["required"] = bool(r is not None and isinstance(r, ast.Constant) and r.value)
    c = kw.get("choices")
    if c is not None:
        try:
            opt["choices"] = sorted(ast.literal_eval(c), key=str)
        except Exception:
            pass
    return opt


def dataclass_release(root: Path) -> dict:
    """0.5.3 – 0.5.18: ServerArgs is a dataclass in srt/server_args.py; options from add_cli_args."""
    tree = ast.parse((root / "srt" / "server_args.py").read_text())
    consts = _module_consts(tree)
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "ServerArgs")
    fields = [[s.target.id, repr(_default(s.value, consts))] for s in cls.body
              if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)]
    fn = next(n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "add_cli_args")
    calls = sorted((c for c in ast.walk(fn) if isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute)
                    and c.func.attr == "add_argument"), key=lambda c: c.lineno)
    options = [o for o in map(_option_from_call, calls) if o]
    return {"form": "dataclass", "fields": fields, "options": options}


def _annotation_option(name: str, ann: ast.AST, default, required: bool) -> dict | None:
    """An option derived from `name: A[T, "help" | Arg(...)]` like add_cli_args_from_dataclass does."""
    if not (isinstance(ann, ast.Subscript) and isinstance(ann.slice, ast.Tuple) and len(ann.slice.elts) >= 2):
        return None
    t, meta = ann.slice.elts[0], ann.slice.elts[1]
    arg: dict = {}
    if isinstance(meta, ast.Call) and ast.unparse(meta.func) == "Arg":
        for kw in meta.keywords:
            try:
                arg[kw.arg] = ast.literal_eval(kw.value)
            except Exception:
                arg[kw.arg] = ast.unparse(kw.value)
    elif not (isinstance(meta, ast.Constant) and isinstance(meta.value, str)):
        return None
    if arg.get("no_cli") is True:
        return None
    cli = arg.get("cli_name") or "--" + name.replace("_", "-")
    flags = [cli] + list(arg.get("aliases") or [])
    opt = {"flags": flags, "dest": name, "action": "store", "type": "str", "nargs": arg.get("nargs"),
           "required": bool(arg.get("required") is True), "choices": None}
    if "action" in arg:
        action = arg["action"]
        if action in ("store_true", "store_false"):
            opt["action"] = action
        elif "BooleanOptional" in str(action):
            opt["action"] = "boolean_optional"
        return opt
    text = ast.unparse(t)
    inner = text
    for wrap in ("Optional[", "Union["):
        if inner.startswith(wrap):
            inner = inner[len(wrap):-1].split(", None")[0]
    if inner.startswith("Literal["):
        try:
            vals = ast.literal_eval("[" + inner[len("Literal["):-1] + "]")
        except Exception:
            vals = []
        opt["choices"] = arg.get("choices") if isinstance(arg.get("choices"), list) else vals
        opt["type"] = "int" if vals and isinstance(vals[0], int) else "float" if vals and isinstance(vals[0], float) else "str"
        return opt
    if (inner.startswith("list[") or inner.startswith("List[")) and "type_parser" not in arg:
        elem = inner[5:-1]
        opt["type"] = elem if elem in ("int", "float") else "str"
        opt["nargs"] = opt["nargs"] or "+"
        return opt
    if inner == "bool":
        opt["action"] = "store_true"
        return opt
    opt["type"] = inner if inner in ("int", "float") else "str"
    if isinstance(arg.get("choices"), list):
        opt["choices"] = arg["choices"]
    return opt


def record_release(root: Path) -> dict:
    """0.5.19+: ServerArgs is assembled from the namespaces in srt/arg_groups/fields/*.py."""
    order = ast.literal_eval(next(
        n.value for n in ast.parse((root / "srt" / "arg_groups" / "field_order.py").read_text()).body
        if isinstance(n, ast.Assign) and n.targets[0].id == "POSITIONAL_FIELD_ORDER"))
    found: dict[str, tuple] = {}
    options = []
    for path in sorted((root / "srt" / "arg_groups" / "fields").glob("*.py")):
        tree = ast.parse(path.read_text())
        consts = _module_consts(tree)
        for cls in (n for n in tree.body if isinstance(n, ast.ClassDef)):
            for s in cls.body:
                if not (isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)):
                    continue
                name = s.target.id
                if name.startswith("_"):
                    continue
                default = _default(s.value, consts)
                found.setdefault(name, (default, s.value is None))
                opt = _annotation_option(name, s.annotation, default, s.value is None)
                if opt:
                    options.append(opt)
    names = [n for n in order if n in found] + [n for n in found if n not in order]
    fields = [[n, repr(found[n][0])] for n in names]
    tree = ast.parse((root / "srt" / "server_args.py").read_text())
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "ServerArgs")
    fn = next(n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "add_cli_args")
    have = {f for o in options for f in o["flags"]}
    calls = sorted((c for c in ast.walk(fn) if isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute)
                    and c.func.attr == "add_argument"), key=lambda c: c.lineno)
    for o in map(_option_from_call, calls):
        if o and not set(o["flags"]) & have:
            options.append(o)
    return {"form": "dict", "fields": fields, "options": options}


def server_args_part() -> dict:
    from tests.support import wheels

    out = {}
    for version, form in DUMP_RELEASES.items():
        root = wheels.unpacked(version) / "sglang"
        out[version] = dataclass_release(root) if form == "dataclass" else record_release(root)
    return out


def main(argv=None) -> int:
    """--tables-only refreshes the tables part (after an edit of configs/sglang) without the wheels."""
    argv = sys.argv[1:] if argv is None else argv
    sys.path.insert(0, str(HERE.parent.parent))
    from dynspec_cli.engines.sglang.knowledge import knowledge
    from tests.standin import fake_sglang_server as standin

    data = {"tables": standin.tables_from_knowledge(knowledge())}
    if "--tables-only" in argv:
        data["server_args"] = json.loads(OUT.read_text())["server_args"]
    else:
        data["server_args"] = server_args_part()
    OUT.write_text(json.dumps(data, indent=None, separators=(",", ":"), sort_keys=False) + "\n")
    n = {v: (len(d["fields"]), len(d["options"])) for v, d in data["server_args"].items()}
    print(f"wrote {OUT} ({OUT.stat().st_size} bytes); fields/options per release: {n}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
