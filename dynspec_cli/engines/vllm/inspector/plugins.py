"""A patch shipped as a vLLM general plugin, and a custom proposer class: found as vLLM will load
them (entry points, the allow-list, the dotted target; the class --speculative-config names)."""
import ast
import os
import re

from .common import marker_hits_in, shared


def _norm(name):
    return re.sub(r"[-_.]+", "-", name or "").lower()


def inspect_plugin(req, literal, rx, pkg):
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
            path, _pkg = shared.find_module(module)
            top = shared.top_level(path) if path else {}
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
            "target": resolve_target(pkg, req.get("target") or "")}


def resolve_target(pkg, dotted):
    """A dotted path inside vllm (the shared resolution), in this document's words: the module, then
    a class or another top-level name, then a class's attribute (what the plugin will patch must
    exist in this release)."""
    r = shared.resolve_target(pkg, dotted)
    if r["module"] is None:
        return {"missing": "no module %s on the server's sys.path" % dotted.split(".")[0]}
    rest = r["rest"]
    out = {"module": r["module"], "module_file": r["module_file"], "kind": "module"}
    if not rest:
        return out
    if r["class"] is None:
        if r["top"] is None:
            out["missing"] = "%s defines no %s" % (out["module"], rest[0])
            return out
        out["kind"], out["line"] = "attribute", getattr(r["top"], "lineno", None)
        return out
    out.update(kind="class", line=r["class_line"], **{"class": r["class"]})
    if len(rest) > 1:
        out["attr"] = rest[1]
        if r["member"] is not None:  # inherited: the class still has it
            out.update(kind="method", line=r["member"].lineno, defined_in=r["defined_in"])
        else:
            out["missing"] = "class %s (%s:%s) and its bases in vllm define no %s" % (
                r["class"], r["module_file"], r["class_line"], rest[1])
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
    path, _pkg = shared.find_module(module)
    out.update(module=module, cls=cls, module_file=path)
    if not path:
        out["missing"] = "no module %s on the server's sys.path" % module
        return out
    top = shared.top_level(path)
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
