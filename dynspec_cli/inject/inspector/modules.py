"""Static module resolution inside an sglang tree: classes, assignments and imports per file."""
import ast
import os

from .common import Source


class _Module(object):
    """Module-level facts of one parsed file, for resolving names used in annotations."""

    def __init__(self, src, modname):
        self.src = src
        self.modname = modname
        self.classes = {}
        self.assigns = {}
        self.imports = {}  # local name -> (module, name or None)
        for node in src.tree.body if src.tree is not None else []:
            if isinstance(node, ast.ClassDef):
                self.classes[node.name] = node
            elif isinstance(node, ast.Assign):
                for t in node.targets:
                    if isinstance(t, ast.Name):
                        self.assigns[t.id] = node.value
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
                self.assigns[node.target.id] = node.value
            elif isinstance(node, ast.ImportFrom):
                mod = _absolute_module(modname, node.module, node.level)
                for a in node.names:
                    self.imports[a.asname or a.name] = (mod, a.name)
            elif isinstance(node, ast.Import):
                for a in node.names:
                    if a.asname:
                        self.imports[a.asname] = (a.name, None)
                    else:
                        self.imports[a.name.split(".")[0]] = (a.name.split(".")[0], None)


def _absolute_module(current, module, level):
    if not level:
        return module
    base = current.split(".")
    base = base[:len(base) - level] if level <= len(base) else []
    return ".".join(base + ([module] if module else []))


def _module_file(sglang_dir, modname):
    parts = modname.split(".")
    if not parts or parts[0] != "sglang":
        return None
    base = os.path.join(os.path.dirname(sglang_dir), *parts)
    for cand in (base + ".py", os.path.join(base, "__init__.py")):
        if os.path.isfile(cand):
            return cand
    return None


def _load_module(sglang_dir, modname, cache):
    if modname in cache:
        return cache[modname]
    path = _module_file(sglang_dir, modname)
    mod = _Module(Source.get(path), modname) if path else None
    cache[modname] = mod
    return mod


def _find_class(sglang_dir, modname, name, cache, depth=0):
    """(module, ClassDef) for a class named in modname, following `from x import` re-exports."""
    mod = _load_module(sglang_dir, modname, cache)
    if mod is None or depth > 5:
        return None, None
    if name in mod.classes:
        return mod, mod.classes[name]
    if name in mod.imports:
        src_mod, src_name = mod.imports[name]
        if src_name is not None and src_mod:
            return _find_class(sglang_dir, src_mod, src_name, cache, depth + 1)
    return mod, None
