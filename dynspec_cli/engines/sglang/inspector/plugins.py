"""A patch shipped as an engine plugin: which distribution's entry point the engine will load, whether
its allow-list lets it through, whether the hook's target exists, and which processes load plugins.

Everything is read the way the engine reads it, without running the plugin: importlib.metadata on
this interpreter's sys.path (the engine calls entry_points(group=...)), the environment the server
gets, and the installed sources by AST."""
import ast
import os
import re


from .common import Source, _clip, _read_bytes, shared

_module_file = shared.module_file

try:
    import importlib.metadata as _md
except ImportError:  # Python < 3.8
    _md = None


def _norm(name):
    return re.sub(r"[-_.]+", "-", name or "").lower()


def _dist_path(dist):
    p = getattr(dist, "_path", None)
    return os.path.abspath(str(p)) if p is not None else None


def _group_eps(group):
    """The entry points of `group` in the order the engine sees them (entry_points(group=...):
    one distribution per normalized name, the first on sys.path)."""
    eps = _md.entry_points()
    if hasattr(eps, "select"):
        return list(eps.select(group=group))
    return list(eps.get(group, ()))  # Python 3.8/3.9: a dict of groups


def _candidate(dist, ep, literal, pattern):
    value = ep.value
    module, _, attr = value.partition(":")
    module, attr = module.strip(), re.sub(r"\[.*\]$", "", attr).strip()
    path = _dist_path(dist)
    rec = {"distribution": dist.metadata["Name"], "version": dist.version, "metadata": path,
           "kind": "egg-info" if path and path.endswith(".egg-info") else "dist-info", "value": value,
           "module": module, "attr": attr or None, "module_file": None, "attr_found": None, "files": [],
           "marker_hits": []}
    # the metadata that decides what sglang loads (which entry point, which version): pinned with the code
    rec["metadata_files"] = [os.path.join(path, f) for f in ("entry_points.txt", "METADATA", "PKG-INFO", "RECORD")
                             if path and os.path.isfile(os.path.join(path, f))]
    origin, is_pkg = shared.find_module(module)
    rec["module_file"] = origin
    if origin is None:
        return rec
    rec["attr_found"] = not attr or attr.split(".")[0] in shared.top_level(origin)
    root = os.path.dirname(origin) if is_pkg else origin
    files = [origin] if not is_pkg else sorted(
        os.path.join(d, f) for d, _, fs in os.walk(root) for f in fs if f.endswith(".py"))[:500]
    rec["files"] = files
    lit = literal.encode("utf-8")
    for f in files:
        try:
            if lit in _read_bytes(f):
                rec["marker_hits"].extend(shared.marker_hits_in(Source.get(f), literal, pattern))
        except OSError:
            pass
    return rec


def discover(spec, literal, pattern):
    """Every distribution on sys.path that declares the entry point, and which one the engine loads."""
    name, group = spec["entry_point"], spec["group"]
    out = {"candidates": [], "loaded": None, "visible": 0}
    if _md is None:
        out["error"] = "importlib.metadata is not available on this interpreter"
        return out
    seen = set()
    out["unreadable"] = []
    for dist in _md.distributions():
        path = _dist_path(dist)
        if path in seen:
            continue
        seen.add(path)
        try:  # (broken metadata of one distribution must not hide the others)
            for ep in dist.entry_points:
                if ep.group == group and ep.name == name:
                    out["candidates"].append(_candidate(dist, ep, literal, pattern))
        except Exception as e:
            out["unreadable"].append({"metadata": path, "error": "%s: %s" % (type(e).__name__, _clip(e, 300))})
    # what the engine's loop sees; each candidate ep.load()-ed in turn and the last one loaded kept
    # (plugins[ep.name] = ...): a later distribution with the same name replaces an earlier one
    try:
        visible = [ep for ep in _group_eps(group) if ep.name == name]
    except Exception as e:  # the engine's own entry_points() call raises the same: load_plugins() fails
        out["engine_error"] = "%s: %s" % (type(e).__name__, _clip(e, 300))
        return out
    out["visible"] = len(visible)
    paths = [_dist_path(ep.dist) if getattr(ep, "dist", None) is not None else None for ep in visible]
    for c in out["candidates"]:
        c["seen_by_engine"] = c["metadata"] in paths or (None in paths and len(out["candidates"]) == 1)
    loadable = [c for c in out["candidates"] if c["seen_by_engine"] and c["module_file"] and c["attr_found"]]
    seen_ = [c for c in out["candidates"] if c["seen_by_engine"]]
    winner = (loadable or seen_ or [None])[-1]
    out["loaded"] = out["candidates"].index(winner) if winner is not None else None
    others = [ep.name for ep in _group_eps(group) if ep.name != name]  # (it did not raise above)
    out["other_names"] = sorted(set(others))[:20]
    return out


def allow_list(spec, winner):
    """Whether the environment lets the entry point through (the allow-list, platform exclusion)."""
    name = spec["entry_point"]
    raw = os.environ.get(spec["allow_env"])
    names = sorted(set(x.strip() for x in raw.split(",") if x.strip())) if raw else None
    out = {"env": spec["allow_env"], "value": _clip(raw, 300), "names": names,
           "allowed": names is None or name in names, "platform": None}
    penv = spec.get("platform_env")
    selected = os.environ.get(penv) if penv else None
    if selected and winner is not None and _md is not None:
        excluded = set(ep.dist.metadata["Name"] for ep in _group_eps(spec["platform_group"])
                       if getattr(ep, "dist", None) is not None and ep.name != selected)
        out["platform"] = {"env": penv, "value": selected, "excluded": winner["distribution"] in excluded}
    return out


def resolve_target(pkg_dir, target):
    """The hook's target as pkgutil.resolve_name reads a dotted path (the shared resolution), worded
    for this document: only what a hook on it can reach is reported (a method: a function of the
    class or of a base sglang defines)."""
    r = shared.resolve_target(pkg_dir, target)
    out = {"target": target, "module": r["module"], "module_file": r["module_file"], "kind": "missing",
           "class": None, "class_module": None, "attr": None, "defined_in": None, "line": None, "missing": None}
    rest = r["rest"]
    if r["module"] is None:
        out["missing"] = "no module of %s exists under %s" % (target, pkg_dir)
        return out
    if not rest:
        out["kind"] = "module"
        return out
    if r["class"] is None:
        if r["top"] is None:
            out["missing"] = "%s has no %s" % (out["module"], rest[0])
        elif len(rest) == 1:
            out["kind"] = "function"
            out["line"] = r["top"].lineno if getattr(r["top"], "name", None) == rest[0] else None
        else:
            out["kind"], out["missing"] = "unknown", "%s.%s is not a class dynspec can follow" % (out["module"], rest[0])
        return out
    out.update({"class": r["class"], "class_module": r["class_module"], "line": r["class_line"]})
    if len(rest) == 1:
        out["kind"] = "class"
        return out
    if len(rest) > 2:
        out["kind"], out["missing"] = "unknown", "%s: attributes below a class attribute are not followed" % target
        return out
    out["attr"] = rest[1]
    if isinstance(r["member"], (ast.FunctionDef, ast.AsyncFunctionDef)):
        out.update({"kind": "method", "defined_in": r["defined_in"], "line": None})
        return out
    out["missing"] = "%s.%s has no method %s (nor any of its bases sglang defines)" % (r["class_module"], r["class"], rest[1])
    return out


def _calls_load_plugins(nodes):
    for top in nodes:
        for node in ast.walk(top):
            if isinstance(node, ast.Call):
                f = node.func
                if (isinstance(f, ast.Name) and f.id == "load_plugins") or \
                        (isinstance(f, ast.Attribute) and f.attr == "load_plugins"):
                    return node.lineno
    return None


def process_loads(pkg_dir, processes):
    """For each process, whether the function it starts in calls load_plugins() (and on which line)."""
    out = []
    for p in processes:
        rec = {"name": p["name"], "module": p["module"], "function": p["function"], "file": None,
               "found": False, "loads": None, "line": None}
        path = _module_file(pkg_dir, p["module"])
        src = Source.get(path) if path else None
        if src is not None and src.tree is not None:
            rec["file"] = path
            if not p["function"]:  # the module's top level, not its functions
                body = [n for n in src.tree.body if not isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]
                rec["found"] = True
            else:
                body = [n for n in src.tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
                        and n.name == p["function"]]
                rec["found"] = bool(body)
            if rec["found"]:
                rec["line"] = _calls_load_plugins(body)
                rec["loads"] = rec["line"] is not None
                if not rec["loads"] and body and p["function"]:
                    rec["line"] = body[0].lineno
        out.append(rec)
    return out


def plugin_report(spec, pkg_dir, literal, pattern):
    framework_file = _module_file(pkg_dir, spec["framework_module"])
    found = discover(spec, literal, pattern)
    winner = found["candidates"][found["loaded"]] if found["loaded"] is not None else None
    return {"entry_point": spec["entry_point"], "group": spec["group"],
            "framework": {"module": spec["framework_module"], "file": framework_file},
            "discovery": found, "allow": allow_list(spec, winner),
            "target": resolve_target(pkg_dir, spec["target"]),
            "processes": process_loads(pkg_dir, spec["processes"])}
