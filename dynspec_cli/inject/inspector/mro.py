"""Static MRO of a worker class, resolved across sglang modules by AST."""
import ast

from .common import _dotted
from .modules import _find_class


def static_mro(pkg_dir, modname, clsname):
    cache = {}
    nodes = {}

    def resolve(mod, expr):
        name = _dotted(expr)
        if not name:
            return ("?", mod.src.segment(expr))
        if "." not in name:
            if name in mod.classes:
                return (mod.modname, name)
            if name in mod.imports and mod.imports[name][1] is not None:
                m, c = _find_class(pkg_dir, mod.imports[name][0], mod.imports[name][1], cache)
                if c is not None:
                    return (m.modname, c.name)
                return (mod.imports[name][0], mod.imports[name][1])
            return ("?", name)
        head, rest = name.split(".", 1)
        if head in mod.imports and mod.imports[head][1] is None and "." not in rest:
            m, c = _find_class(pkg_dir, mod.imports[head][0], rest, cache)
            if c is not None:
                return (m.modname, c.name)
        return ("?", name)

    def load(key):
        if key in nodes:
            return nodes[key]
        modname_, name = key
        m, c = (_find_class(pkg_dir, modname_, name, cache) if modname_ != "?" else (None, None))
        rec = {"name": name, "module": modname_ if c is not None else (modname_ if modname_ != "?" else None),
               "file": m.src.path if (m is not None and c is not None) else None,
               "line": c.lineno if c is not None else None,
               "bases_as_written": [m.src.segment(b) for b in c.bases] if c is not None else None,
               "methods": [n.name for n in c.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
               if c is not None else None,
               "resolved": c is not None, "_bases": []}
        if c is not None:
            rec["module"] = m.modname
        nodes[key] = rec
        if c is not None:
            rec["_bases"] = [resolve(m, b) for b in c.bases
                             if _dotted(b) not in ("object", "Generic") and not isinstance(b, ast.Subscript)]
            for b in rec["_bases"]:
                load(b)
        return rec

    root = (modname, clsname)
    load(root)

    def c3(key, stack=()):
        if key in stack:
            raise ValueError("cycle")
        bases = nodes[key]["_bases"]
        seqs = [c3(b, stack + (key,)) for b in bases] + [list(bases)]
        out = [key]
        while True:
            seqs = [s for s in seqs if s]
            if not seqs:
                return out
            for s in seqs:
                head = s[0]
                if not any(head in t[1:] for t in seqs):
                    break
            else:
                raise ValueError("inconsistent MRO")
            out.append(head)
            for t in seqs:
                if t and t[0] == head:
                    t.pop(0)

    try:
        order = c3(root)
        method = "c3"
    except ValueError:
        order, todo = [], [root]
        while todo:
            k = todo.pop(0)
            if k not in order:
                order.append(k)
                todo.extend(nodes[k]["_bases"])
        method = "breadth-first (C3 failed)"
    out = []
    for k in order:
        rec = dict(nodes[k])
        rec["bases"] = ["%s.%s" % b if b[0] != "?" else b[1] for b in rec.pop("_bases")]
        out.append(rec)
    return {"classes": out, "method": method}
