"""dynspec preflight inspector for vLLM: facts about the vllm on THIS interpreter, read without importing it.

Runs inside someone else's interpreter (sent as ``python - '<json>'``), so: stdlib only, Python 3.8+,
nothing from dynspec, no `import vllm` (importing it pulls torch and CUDA probing: seconds, and it may
fail on a machine without a GPU). Prints exactly one JSON document on stdout, also when it fails
(then ``"ok": false`` with ``error``). Conclusions (which runner, which proposer, dead knobs) are
drawn by dynspec from configs/vllm/ (dynspec_cli/verdict/vllm_preflight.py): this script only reads.

Input: one JSON object as argv[1] (``@PATH`` reads it from a file)::

    marker_literal  str    substring of the log line the patch emits (required)
    marker_pattern  str    its regex (reported per hit: does the source template match it)
    classes         [{module, class}]  classes whose static MRO to report (module: path under site-packages)
    env_names       [str]  environment variables to report (default ["VLLM_USE_V2_MODEL_RUNNER"])
    vllm_path       str    directory put first on sys.path (tests: an unpacked wheel)
    plugin          {entry_point, group, allow_env, allow_strips, target}  a patch shipped as a general plugin
    custom_class    {path, framework_module}  the user's proposer class (--speculative-config method custom_class)
    dynamic         bool   also run vLLM's own config resolution (imports vllm and torch: ~8 s on a CPU)
    serve_flags     [str]  the `vllm serve` flags (dynamic route; must include --model)

Output (``schema`` = "dynspec-vllm-inspector/1")::

    ok, error, python {executable, version}, env {NAME: value|null},
    dynamic null | {ok, seconds, use_v2_model_runner, unsupported_v2[], method, num_spec_tokens,
            data_parallel_size, warnings[] (vLLM's own log records), error {type, message}},
    vllm {found, package_dir, version, version_source, reason},
    triton {found, origin}, marker {literal, files_scanned, hits[] {file, line, class, function, pattern_matches}},
    classes {"module:Class": {present, file, line, mro[] {class, module}}},
    plugin {group, candidates[] {distribution, version, metadata, value, module, attr, module_file, attr_found,
            marker_hits[]}, loaded (index: the last one vLLM keeps), shadowed[], other_names[],
            allow {env, value, names, allowed}, target {module, module_file, kind, class, attr, line, missing}},
    custom_class {path, framework, module, cls, module_file, line, bases[], bases_outside, methods {name: {class,
            line, args, varargs}}, marker_hits[], missing}
"""
import ast
import json
import os
import re
import sys

SCHEMA = "dynspec-vllm-inspector/1"


def _find_spec(name):
    import importlib.util

    try:
        return importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None


def _read(path):
    try:
        with open(path, encoding="utf-8") as fh:
            return fh.read()
    except (OSError, UnicodeDecodeError):
        return None


def locate_vllm():
    spec = _find_spec("vllm")
    if spec is None or not spec.submodule_search_locations:
        return None
    return list(spec.submodule_search_locations)[0]


def version_of(pkg_dir):
    """vllm's version from its files: _version.py (setuptools-scm), then the dist-info METADATA."""
    text = _read(os.path.join(pkg_dir, "_version.py"))
    if text:
        m = re.search(r"""^__version__\s*=\s*(?:version\s*=\s*)?['"]([^'"]+)['"]""", text, re.M)
        if m:
            return m.group(1), "vllm/_version.py"
    site = os.path.dirname(pkg_dir)
    try:
        names = sorted(os.listdir(site))
    except OSError:
        names = []
    for n in names:
        if n.startswith("vllm-") and n.endswith(".dist-info"):
            meta = _read(os.path.join(site, n, "METADATA")) or ""
            m = re.search(r"^Version:\s*(\S+)", meta, re.M)
            if m:
                return m.group(1), n + "/METADATA"
    return None, None


class _Scopes(ast.NodeVisitor):
    """(class, function) enclosing each line."""

    def __init__(self):
        self.stack = []
        self.spans = []

    def _visit(self, node, kind):
        self.stack.append((kind, node.name))
        self.spans.append((node.lineno, getattr(node, "end_lineno", node.lineno) or node.lineno, list(self.stack)))
        self.generic_visit(node)
        self.stack.pop()

    def visit_ClassDef(self, node):
        self._visit(node, "class")

    def visit_FunctionDef(self, node):
        self._visit(node, "def")

    visit_AsyncFunctionDef = visit_FunctionDef


def _scope_at(spans, line):
    best = None
    for a, b, stack in spans:
        if a <= line <= b and (best is None or a >= best[0]):
            best = (a, stack)
    cls = fn = None
    for kind, name in (best[1] if best else []):
        if kind == "class":
            cls = name
        elif kind == "def" and fn is None:
            fn = name
    return cls, fn


def _pattern(pattern):
    try:
        return re.compile(pattern) if pattern else None
    except re.error:
        return None


def marker_hits_in(path, site, literal, rx):
    """The marker's string constants in one file: [{file (relative to site), line, class, function}]."""
    text = _read(path)
    if not text or literal not in text:
        return []
    rel = os.path.relpath(path, site)
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return [{"file": rel, "line": None, "class": None, "function": None, "syntax_error": True}]
    sc = _Scopes()
    sc.visit(tree)
    hits = []
    for node in ast.walk(tree):
        s = None
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            s = node.value
        elif isinstance(node, ast.JoinedStr):
            s = "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.values)
        if s is None or literal not in s:
            continue
        cls, fn = _scope_at(sc.spans, node.lineno)
        sample = s.replace("%s", "0").replace("%d", "0").replace("{}", "0")
        hits.append({"file": rel, "line": node.lineno, "class": cls, "function": fn,
                     "pattern_matches": bool(rx.search(sample)) if rx else None})
    return hits


def scan_marker(pkg_dir, literal, pattern):
    site = os.path.dirname(pkg_dir)
    rx = _pattern(pattern)
    hits, scanned = [], 0
    for root, dirs, files in os.walk(pkg_dir):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        for f in files:
            if f.endswith(".py"):
                scanned += 1
                hits.extend(marker_hits_in(os.path.join(root, f), site, literal, rx))
    return {"literal": literal, "files_scanned": scanned, "hits": hits}


def _classes_of(path):
    text = _read(path)
    if text is None:
        return None, {}
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return None, {}
    imports = {}
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for a in node.names:
                imports[a.asname or a.name] = node.module
    return tree, imports


def static_mro(site, module, cls, limit=12):
    """Bases followed through `from vllm.x import Y` imports, as far as they stay inside vllm."""
    out, seen = [], set()
    todo = [(module, cls)]
    while todo and len(out) < limit:
        mod, name = todo.pop(0)
        if (mod, name) in seen:
            continue
        seen.add((mod, name))
        path = os.path.join(site, mod)
        tree, imports = _classes_of(path)
        node = next((n for n in (tree.body if tree else []) if isinstance(n, ast.ClassDef) and n.name == name), None)
        if node is None:
            if not out:
                return None, None, []
            continue
        out.append({"class": name, "module": mod})
        for b in node.bases:
            if isinstance(b, ast.Name):
                if b.id in imports and imports[b.id].startswith("vllm."):
                    todo.append((imports[b.id].replace(".", "/") + ".py", b.id))
                elif b.id not in imports:
                    todo.append((mod, b.id))
    return os.path.join(site, module), node_line(site, module, cls), out


def node_line(site, module, cls):
    tree, _ = _classes_of(os.path.join(site, module))
    n = next((n for n in (tree.body if tree else []) if isinstance(n, ast.ClassDef) and n.name == cls), None)
    return n.lineno if n else None


def _norm(name):
    return re.sub(r"[-_.]+", "-", name or "").lower()


def find_module(name):
    """(file, is package) of a dotted module on sys.path, found without importing anything."""
    import importlib.machinery

    parts = name.split(".")
    try:
        spec = importlib.machinery.PathFinder.find_spec(parts[0], sys.path)
        for i in range(1, len(parts)):
            if spec is None or not spec.submodule_search_locations:
                return None, False
            spec = importlib.machinery.PathFinder.find_spec(".".join(parts[:i + 1]), list(spec.submodule_search_locations))
    except Exception:  # a namespace package on the way (no __init__.py) needs its parent imported: walk the files
        for entry in sys.path:
            base = os.path.join(entry or os.getcwd(), *parts)
            for path, pkg in ((base + ".py", False), (os.path.join(base, "__init__.py"), True)):
                if os.path.isfile(path):
                    return os.path.abspath(path), pkg
        return None, False
    if spec is None or not spec.origin or not os.path.isfile(spec.origin):
        return None, False
    return os.path.abspath(spec.origin), bool(spec.submodule_search_locations)


def _top_level(path):
    """{name: ast node} of a module's top level (classes, functions, assignments, imports)."""
    tree, _ = _classes_of(path)
    names = {}
    for node in tree.body if tree is not None else []:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names[node.name] = node
        elif isinstance(node, ast.Assign):
            names.update((t.id, node) for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update(((a.asname or a.name).split(".")[0], node) for a in node.names)
    return names


def inspect_plugin(req, literal, rx):
    """Which distribution's entry point vLLM's load_plugins_by_group will call, as it reads them: every
    entry point of the group in entry_points() order (one distribution per normalized name, the first on
    sys.path), plugins[name] = ep.load(), so the last of one name wins; the allow-list as vllm/envs.py
    reads it; whether the target exists in the installed vllm."""
    import importlib.metadata as md

    name, group = req["entry_point"], req["group"]
    seen, candidates, shadowed, others = set(), [], [], set()
    for dist in md.distributions():
        try:
            dname = dist.metadata["Name"]
            eps = [ep for ep in dist.entry_points if ep.group == group]
        except Exception as e:  # unreadable metadata: entry_points() itself raises in vLLM too
            return {"group": group, "error": "%s: %s" % (type(e).__name__, e)}
        where = str(getattr(dist, "_path", "") or "")
        if _norm(dname) in seen:
            if any(ep.name == name for ep in eps):
                shadowed.append({"distribution": dname, "version": dist.version, "metadata": where})
            continue
        seen.add(_norm(dname))
        for ep in eps:
            if ep.name != name:
                others.add(ep.name)
                continue
            module, _, attr = ep.value.partition(":")
            module, attr = module.strip(), re.sub(r"\[.*\]$", "", attr).strip()
            path, _pkg = find_module(module)
            top = _top_level(path) if path else {}
            hits = []
            if path:
                hits = marker_hits_in(path, os.path.dirname(path), literal, rx)
                for h in hits:
                    h["file"] = path
            candidates.append({"distribution": dname, "version": dist.version, "metadata": where, "value": ep.value,
                               "module": module, "attr": attr, "module_file": path,
                               "attr_found": bool(attr) and attr.split(".")[0] in top, "marker_hits": hits})
    raw = os.environ.get(req["allow_env"])
    names = None if raw is None else raw.split(",")
    if names is not None and req.get("allow_strips"):
        names = [n.strip() for n in names]
    return {"group": group, "candidates": candidates, "loaded": len(candidates) - 1 if candidates else None,
            "shadowed": shadowed, "other_names": sorted(others),
            "allow": {"env": req["allow_env"], "value": raw, "names": names,
                      "allowed": names is None or name in names},
            "target": resolve_target(req.get("target") or "")}


def resolve_target(dotted):
    """A dotted path inside vllm: the longest module prefix that is a file, then classes and
    attributes by AST (what the plugin will patch must exist in this release)."""
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        path, _pkg = find_module(".".join(parts[:i]))
        if path:
            break
    else:
        return {"missing": "no module %s on the server's sys.path" % parts[0]}
    rest = parts[i:]
    out = {"module": ".".join(parts[:i]), "module_file": path, "kind": "module"}
    if not rest:
        return out
    node = _top_level(path).get(rest[0])
    if node is None:
        out["missing"] = "%s defines no %s" % (out["module"], rest[0])
        return out
    out["kind"] = "class" if isinstance(node, ast.ClassDef) else "attribute"
    out["line"] = getattr(node, "lineno", None)
    if isinstance(node, ast.ClassDef):
        out["class"] = node.name
        if len(rest) > 1:
            out["attr"] = rest[1]
            rel = out["module"].replace(".", "/") + (".py" if not path.endswith("__init__.py") else "/__init__.py")
            site = path[:-len(rel)].rstrip(os.sep) if path.endswith(rel) else os.path.dirname(path)
            _file, _line, mro = static_mro(site, rel, node.name)
            for entry in mro or [{"class": node.name, "module": rel}]:  # inherited: the class still has it
                tree, _ = _classes_of(os.path.join(site, entry["module"]))
                c = next((n for n in (tree.body if tree else []) if isinstance(n, ast.ClassDef) and n.name == entry["class"]), None)
                members = {n.name: n.lineno for n in (c.body if c else [])
                           if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}
                members.update((t.id, n.lineno) for n in (c.body if c else []) if isinstance(n, ast.Assign)
                               for t in n.targets if isinstance(t, ast.Name))
                if rest[1] in members:
                    out.update(kind="method", line=members[rest[1]], defined_in=entry["class"])
                    break
            else:
                out["missing"] = "class %s (%s:%s) and its bases in vllm define no %s" % (node.name, path, node.lineno, rest[1])
    return out


def inspect_custom_class(req, literal, rx, site):
    """The user's proposer class for method custom_class, as create_custom_proposer will load it:
    the module (found without importing it), the class, its __init__ arguments, the required
    methods defined on it or on a base in the same module, and the marker in the class."""
    dotted = req["path"]
    out = {"path": dotted, "framework": os.path.isfile(os.path.join(site, req["framework_module"]))}
    if "." not in dotted:
        out["missing"] = "not a full module path (module.Class)"
        return out
    module, cls = dotted.rsplit(".", 1)
    path, _pkg = find_module(module)
    out.update(module=module, cls=cls, module_file=path)
    if not path:
        out["missing"] = "no module %s on the server's sys.path" % module
        return out
    top = _top_level(path)
    node = top.get(cls)
    if not isinstance(node, ast.ClassDef):
        out["missing"] = "%s defines no class %s" % (path, cls)
        return out
    out["line"] = node.lineno
    chain, methods = [node], {}
    while chain:
        c = chain.pop(0)
        for n in c.body:
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name not in methods:
                positional = len(n.args.args) + len(getattr(n.args, "posonlyargs", []))
                methods[n.name] = {"class": c.name, "line": n.lineno, "args": positional, "varargs": bool(n.args.vararg)}
        for b in c.bases:  # bases defined in the same module are followed; others are unknown
            if isinstance(b, ast.Name) and isinstance(top.get(b.id), ast.ClassDef):
                chain.append(top[b.id])
    out["bases"] = [ast.unparse(b) if hasattr(ast, "unparse") else getattr(b, "id", "?") for b in node.bases]
    out["methods"] = methods
    out["bases_outside"] = [b for b in node.bases if not (isinstance(b, ast.Name) and isinstance(top.get(b.id), ast.ClassDef))] != []
    hits = marker_hits_in(path, os.path.dirname(path), literal, rx)
    for h in hits:
        h["file"] = path
    out["marker_hits"] = hits
    return out


def inspect(args):
    out = {"schema": SCHEMA, "ok": True, "error": None,
           "python": {"executable": sys.executable, "version": ".".join(map(str, sys.version_info[:3]))}}
    literal = args.get("marker_literal")
    if not isinstance(literal, str) or not literal:
        raise ValueError("marker_literal (a non-empty string) is required")
    if args.get("vllm_path"):
        sys.path.insert(0, args["vllm_path"])
    names = args.get("env_names") or ["VLLM_USE_V2_MODEL_RUNNER"]
    out["env"] = {n: os.environ.get(n) for n in names}
    pkg = locate_vllm()
    if pkg is None:
        out["vllm"] = {"found": False, "reason": "no module named vllm on this interpreter's sys.path"}
        return out
    version, source = version_of(pkg)
    out["vllm"] = {"found": True, "package_dir": pkg, "version": version, "version_source": source}
    t = _find_spec("triton")
    out["triton"] = {"found": t is not None, "origin": getattr(t, "origin", None) if t else None}
    out["marker"] = scan_marker(pkg, literal, args.get("marker_pattern"))
    site = os.path.dirname(pkg)
    classes = {}
    for c in args.get("classes") or []:
        mod, name = c.get("module"), c.get("class")
        if not mod or not name:
            continue
        path, line, mro = static_mro(site, mod, name)
        classes[f"{mod}:{name}"] = {"present": bool(mro), "file": path if mro else None, "line": line, "mro": mro}
    out["classes"] = classes
    rx = _pattern(args.get("marker_pattern"))
    if args.get("plugin"):
        out["plugin"] = inspect_plugin(args["plugin"], literal, rx)
    if args.get("custom_class"):
        out["custom_class"] = inspect_custom_class(args["custom_class"], literal, rx, site)
    out["dynamic"] = resolve(args.get("serve_flags") or []) if args.get("dynamic") else None
    return out


def resolve(flags):
    """vLLM's own argument and config resolution (what `vllm serve` runs before any model loads):
    EngineArgs from its CLI parser, then create_engine_config(). On a host without a GPU vLLM needs
    VLLM_TARGET_DEVICE=cpu to pick a platform. Everything it prints goes to stderr."""
    import io
    import logging
    import time

    t0 = time.time()
    records = []

    class _Keep(logging.Handler):
        def emit(self, record):
            if record.levelno >= logging.WARNING:
                records.append(record.getMessage()[:500])

    real_stdout = sys.stdout
    sys.stdout = sys.stderr
    handler = _Keep()
    try:
        try:
            from vllm.utils.argparse_utils import FlexibleArgumentParser
        except ImportError:  # older releases
            from vllm.utils import FlexibleArgumentParser
        from vllm.engine.arg_utils import EngineArgs

        # after the import: vllm configures its loggers (dictConfig) when imported
        logging.getLogger("vllm").addHandler(handler)
        flags = list(flags)
        if flags and not flags[0].startswith("-"):  # `vllm serve MODEL ...`
            flags = ["--model"] + flags

        parser = EngineArgs.add_cli_args(FlexibleArgumentParser())
        ns = parser.parse_args(flags)
        cfg = EngineArgs.from_cli_args(ns).create_engine_config()
        spec = cfg.speculative_config
        unsupported = None
        getter = getattr(cfg, "_get_v2_model_runner_unsupported_features", None)
        if getter is not None:
            unsupported = list(getter())
        v2 = getattr(cfg, "use_v2_model_runner", None)
        return {"ok": True, "seconds": round(time.time() - t0, 2), "use_v2_model_runner": v2,
                "unsupported_v2": unsupported, "method": getattr(spec, "method", None) if spec else None,
                "num_spec_tokens": getattr(spec, "num_speculative_tokens", None) if spec else None,
                "data_parallel_size": cfg.parallel_config.data_parallel_size, "warnings": records}
    except BaseException as e:  # SystemExit from argparse included: the caller gets JSON
        return {"ok": False, "seconds": round(time.time() - t0, 2), "warnings": records,
                "error": {"type": type(e).__name__, "message": str(e)[:2000]}}
    finally:
        logging.getLogger("vllm").removeHandler(handler)
        sys.stdout = real_stdout


def main(argv):
    try:
        raw = argv[1] if len(argv) > 1 else None
        if raw is None:
            raise ValueError("usage: python vllm_inspector.py '<json>' (or @file.json)")
        if raw.startswith("@"):
            raw = _read(raw[1:]) or ""
        args = json.loads(raw)
        if not isinstance(args, dict):
            raise ValueError("the input must be a JSON object")
        doc = inspect(args)
    except Exception as e:  # the caller always gets JSON
        doc = {"schema": SCHEMA, "ok": False, "error": f"{type(e).__name__}: {e}"}
    sys.stdout.write(json.dumps(doc) + "\n")
    return 0 if doc.get("ok") else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
