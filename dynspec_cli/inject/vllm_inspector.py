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
    dynamic         bool   also run vLLM's own config resolution (imports vllm and torch: ~8 s on a CPU)
    serve_flags     [str]  the `vllm serve` flags (dynamic route; must include --model)

Output (``schema`` = "dynspec-vllm-inspector/1")::

    ok, error, python {executable, version}, env {NAME: value|null},
    dynamic null | {ok, seconds, use_v2_model_runner, unsupported_v2[], method, num_spec_tokens,
            data_parallel_size, warnings[] (vLLM's own log records), error {type, message}},
    vllm {found, package_dir, version, version_source, reason},
    triton {found, origin}, marker {literal, files_scanned, hits[] {file, line, class, function, pattern_matches}},
    classes {"module:Class": {present, file, line, mro[] {class, module}}}
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


def scan_marker(pkg_dir, literal, pattern):
    site = os.path.dirname(pkg_dir)
    rx = None
    if pattern:
        try:
            rx = re.compile(pattern)
        except re.error:
            rx = None
    hits, scanned = [], 0
    for root, dirs, files in os.walk(pkg_dir):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        for f in files:
            if not f.endswith(".py"):
                continue
            path = os.path.join(root, f)
            text = _read(path)
            scanned += 1
            if not text or literal not in text:
                continue
            try:
                tree = ast.parse(text)
            except SyntaxError:
                hits.append({"file": os.path.relpath(path, site), "line": None, "class": None, "function": None,
                             "syntax_error": True})
                continue
            sc = _Scopes()
            sc.visit(tree)
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
                hits.append({"file": os.path.relpath(path, site), "line": node.lineno, "class": cls, "function": fn,
                             "pattern_matches": bool(rx.search(sample)) if rx else None})
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
