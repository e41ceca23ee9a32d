"""What every engine's preflight inspector does alike, shipped inside each of them.

An inspector runs in the server's interpreter (engines/<name>/inspector/): stdlib only, Python 3.8+,
nothing of dynspec's but this module, which `inject.program()` bundles beside the inspector's own
modules (so `from . import inspector_common` finds it there; run in place from dynspec's tree, the
inspector imports it from here). Each inspector keeps its own document's shape; what it finds is
found here, one way for every engine:

- `Source`: one Python file read and parsed once, with the scopes of its lines;
- the marker scan (`scan_marker`, `marker_hits_in`): every string constant and f-string holding
  the marker literal, with the call it is passed to and its scope, also where the literal is split
  over several lines by implicit concatenation or the log call spans lines;
- module resolution inside an installed package without importing it (`module_file`,
  `find_class`), `static_mro` of a class across the package's modules (C3, imports and re-exports
  followed), `resolve_target` of a dotted path (what a plugin's hook or a patch names);
- `find_module` of a dotted module on sys.path (editable installs' finders included), `top_level`
  names of a module;
- the user's unified diff (`parse_diff`), mapped onto the installed package (`analyse_diff`: is
  each hunk applied, in which class and function) and its scopes' roles (`mark_roles`: marker,
  behaviour), the same for every engine: only the package's name differs.
"""
import ast
import os
import re
import sys


def read_bytes(path):
    # os.open/os.read: no buffered file object per file (the marker scan reads ~2000 files)
    fd = os.open(path, os.O_RDONLY)
    try:
        chunks = []
        while True:
            b = os.read(fd, 1 << 20)
            if not b:
                break
            chunks.append(b)
            if len(b) < (1 << 20):
                break
        return b"".join(chunks) if len(chunks) != 1 else chunks[0]
    finally:
        os.close(fd)


def dotted(node):
    """Name/Attribute chain as text (``logger.info``), else None."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


class Source(object):
    """One Python file read once: bytes, text, AST (or the SyntaxError), and scope intervals."""

    _cache = {}

    def __init__(self, path):
        self.path = path
        self.data = read_bytes(path)
        self.text = self.data.decode("utf-8", "replace")
        # bytes.splitlines splits where the tokenizer does (str.splitlines also splits on \f, \x1c, ...)
        self.blines = self.data.splitlines()
        self.lines = [b.decode("utf-8", "replace") for b in self.blines]
        self.tree = None
        self.syntax_error = None
        self._scopes = None
        try:
            self.tree = ast.parse(self.data, filename=path)
        except SyntaxError as e:
            self.syntax_error = e
        except ValueError as e:  # null bytes
            self.syntax_error = SyntaxError(str(e))

    @classmethod
    def get(cls, path):
        path = os.path.abspath(path)
        src = cls._cache.get(path)
        if src is None:
            src = cls._cache[path] = Source(path)
        return src

    def segment(self, node):
        """Source text of a node (ast.get_source_segment re-splits the whole file on every call)."""
        try:
            l0, l1 = node.lineno - 1, node.end_lineno - 1
            c0, c1 = node.col_offset, node.end_col_offset  # UTF-8 byte offsets
            if l0 == l1:
                seg = self.blines[l0][c0:c1]
            else:
                seg = b"\n".join([self.blines[l0][c0:]] + self.blines[l0 + 1:l1] + [self.blines[l1][:c1]])
            return seg.decode("utf-8", "replace")
        except Exception:
            return dotted(node) or "?"

    def scopes(self):
        """[(start, end, kind, name, qualname, node)] for every class and function, outer first."""
        if self._scopes is None:
            out = []

            def walk(body, prefix):
                for node in body:
                    if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                        start = min([node.lineno] + [d.lineno for d in node.decorator_list])
                        qual = prefix + node.name
                        kind = "class" if isinstance(node, ast.ClassDef) else "function"
                        out.append((start, node.end_lineno, kind, node.name, qual, node))
                        walk(node.body, qual + (".<locals>." if kind == "function" else "."))
                    else:
                        for field in ("body", "orelse", "finalbody", "handlers"):
                            sub = getattr(node, field, None)
                            if isinstance(sub, list):
                                walk(sub, prefix)

            if self.tree is not None:
                walk(self.tree.body, "")
            self._scopes = out
        return self._scopes

    def scope_at(self, line):
        """Innermost enclosing class and function of a 1-based line."""
        cls = fn = None
        qual = None
        for start, end, kind, name, q, node in self.scopes():
            if start <= line <= end:
                qual = q
                if kind == "class":
                    cls, fn = node, None
                else:
                    fn = node
        return self._scope_dict(cls, fn, qual)

    def _scope_dict(self, cls, fn, qual):
        return {
            "class": cls.name if cls is not None else None,
            "class_line": cls.lineno if cls is not None else None,
            "bases": [self.segment(b) for b in cls.bases] if cls is not None else None,
            "function": fn.name if fn is not None else None,
            "function_line": fn.lineno if fn is not None else None,
            "qualname": qual,
        }


def clip(s, n):
    if s is None:
        return None
    s = str(s)
    return s if len(s) <= n else s[:n] + "...[%d more chars]" % (len(s) - n)


# --- the marker scan ------------------------------------------------------------------------------
def iter_py(root):
    stack = [root]
    while stack:
        d = stack.pop()
        try:
            it = os.scandir(d)
        except OSError:
            continue
        with it:
            for e in it:
                name = e.name
                if e.is_dir(follow_symlinks=False):
                    if name != "__pycache__" and not name.startswith("."):
                        stack.append(e.path)
                elif name.endswith(".py"):
                    yield e.path


_PERCENT_RE = re.compile(r"%(?:\([^)]*\))?[-#0 +]*(?:\d+|\*)?(?:\.\d+)?[diouxXeEfFgGcrsa]")


class _StringFinder(ast.NodeVisitor):
    """Every str constant / f-string (JoinedStr) containing the marker, with the call it is passed to."""

    def __init__(self, src, literal, lines=None):
        self.src = src
        self.literal = literal
        self.lines = sorted(lines) if lines else None  # only descend into nodes spanning one of these
        self.calls = []
        self.hits = []

    def visit(self, node):
        if self.lines is not None:
            start = getattr(node, "lineno", None)
            if start is not None:
                end = getattr(node, "end_lineno", None) or start
                if not any(start <= ln <= end for ln in self.lines):
                    return None
        return ast.NodeVisitor.visit(self, node)

    def visit_Call(self, node):
        self.visit(node.func)
        self.calls.append(node)
        for a in node.args:
            self.visit(a)
        for k in node.keywords:
            self.visit(k.value)
        self.calls.pop()

    def visit_Constant(self, node):
        if isinstance(node.value, str) and self.literal in node.value:
            self.hits.append((node, "str", node.value, _PERCENT_RE.sub("0", node.value), self._call()))

    def visit_JoinedStr(self, node):
        template, sample = [], []
        for v in node.values:
            if isinstance(v, ast.Constant) and isinstance(v.value, str):
                template.append(v.value.replace("{", "{{").replace("}", "}}"))
                sample.append(v.value)
            elif isinstance(v, ast.FormattedValue):
                template.append("{%s}" % (dotted(v.value) or "..."))
                sample.append("0")
                self.visit(v.value)  # strings nested in the expression
        if self.literal in "".join(sample):
            self.hits.append((node, "fstring", "".join(template), "".join(sample), self._call()))

    def _call(self):
        if not self.calls:
            return None
        return dotted(self.calls[-1].func) or self.src.segment(self.calls[-1].func)


def _line_of_literal(src, node, literal):
    end = getattr(node, "end_lineno", None) or node.lineno
    for ln in range(node.lineno, end + 1):
        if ln - 1 < len(src.lines) and literal in src.lines[ln - 1]:
            return ln
    return node.lineno


def _byte_hit_lines(data, lit):
    lines, i = [], data.find(lit)
    while i != -1:
        lines.append(data.count(b"\n", 0, i) + 1)
        i = data.find(lit, i + 1)
    return lines


def marker_hits_in(src, literal, pattern):
    """Hits of the marker in one file: string constants (with scope) and other occurrences (comments)."""
    hits = []
    covered = set()
    if src.tree is not None:
        # the literal's own lines bound the search, unless it is split (implicit concatenation)
        direct = _byte_hit_lines(src.data, literal.encode("utf-8"))
        finder = _StringFinder(src, literal, direct or None)
        finder.visit(src.tree)
        for node, kind, template, sample, call in finder.hits:
            line = _line_of_literal(src, node, literal)
            for ln in range(node.lineno, (getattr(node, "end_lineno", None) or node.lineno) + 1):
                covered.add(ln)
            hit = {"file": src.path, "line": line, "kind": kind, "call": call, "template": clip(template, 1000),
                   "text": clip(src.lines[line - 1].strip(), 300) if line - 1 < len(src.lines) else None}
            hit.update(src.scope_at(line))
            hit["pattern_matches"] = bool(pattern.search(sample)) if pattern is not None else None
            hits.append(hit)
    lit = literal.encode("utf-8")
    for ln in _byte_hit_lines(src.data, lit):
        if ln not in covered:
            hit = {"file": src.path, "line": ln, "kind": "syntax-error-file" if src.tree is None else "non-string",
                   "call": None, "template": None,
                   "text": clip(src.lines[ln - 1].strip(), 300) if ln - 1 < len(src.lines) else None,
                   "pattern_matches": None}
            hit.update(src.scope_at(ln) if src.tree is not None else
                       {"class": None, "class_line": None, "bases": None, "function": None,
                        "function_line": None, "qualname": None})
            covered.add(ln)
            hits.append(hit)
    hits.sort(key=lambda h: h["line"])
    return hits


def scan_marker(root, literal, pattern, extra_files=()):
    """Bytes scan of every .py under `root` (and extra_files); AST only for files that hold the literal.
    If no file holds it verbatim (implicit string concatenation), files holding every word of it are
    AST-checked instead. Returns (the scan, {file: size} of every file read)."""
    lit = literal.encode("utf-8")
    words = sorted(set(w.encode("utf-8") for w in re.findall(r"\w{3,}", literal)), key=len, reverse=True)
    files = list(iter_py(root))
    seen = set(files)
    files.extend(f for f in extra_files if f not in seen and f.endswith(".py") and os.path.isfile(f))
    direct, wordy = [], []
    sizes = {}
    for f in files:
        try:
            data = read_bytes(f)
        except OSError:
            continue
        sizes[f] = len(data)
        if lit in data:
            direct.append(f)
    if not direct and words:  # a second pass only when needed: it costs as much as the first
        for f in sizes:
            try:
                data = read_bytes(f)
            except OSError:
                continue
            if words[0] in data and all(w in data for w in words[1:]):
                wordy.append(f)
    hits = []
    for f in direct + (wordy if not direct else []):
        hits.extend(marker_hits_in(Source.get(f), literal, pattern))
    return {"scan_root": root, "files_scanned": len(files), "files_with_literal": direct,
            "files_with_words": wordy if not direct else [], "hits": hits}, sizes


# --- modules and classes of an installed package, read without importing it ---------------------
class Module(object):
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


def module_file(package_dir, modname):
    """The file of module `modname` inside the package at `package_dir` (its name: the folder's)."""
    parts = modname.split(".")
    if not parts or parts[0] != os.path.basename(package_dir.rstrip(os.sep)):
        return None
    base = os.path.join(os.path.dirname(package_dir.rstrip(os.sep)), *parts)
    for cand in (base + ".py", os.path.join(base, "__init__.py")):
        if os.path.isfile(cand):
            return cand
    return None


def load_module(package_dir, modname, cache):
    if modname in cache:
        return cache[modname]
    path = module_file(package_dir, modname)
    mod = Module(Source.get(path), modname) if path else None
    cache[modname] = mod
    return mod


def find_class(package_dir, modname, name, cache, depth=0):
    """(module, ClassDef) for a class named in modname, following `from x import` re-exports."""
    mod = load_module(package_dir, modname, cache)
    if mod is None or depth > 5:
        return None, None
    if name in mod.classes:
        return mod, mod.classes[name]
    if name in mod.imports:
        src_mod, src_name = mod.imports[name]
        if src_name is not None and src_mod:
            return find_class(package_dir, src_mod, src_name, cache, depth + 1)
    return mod, None


def static_mro(pkg_dir, modname, clsname):
    """The MRO of class `clsname` of module `modname`, resolved across the package's modules by AST:
    {"classes": [{name, module, file, line, bases_as_written, methods, resolved, bases}], "method":
    "c3" | "breadth-first (C3 failed)"}; a base outside the package is named, unresolved."""
    cache = {}
    nodes = {}

    def resolve(mod, expr):
        name = dotted(expr)
        if not name:
            return ("?", mod.src.segment(expr))
        if "." not in name:
            if name in mod.classes:
                return (mod.modname, name)
            if name in mod.imports and mod.imports[name][1] is not None:
                m, c = find_class(pkg_dir, mod.imports[name][0], mod.imports[name][1], cache)
                if c is not None:
                    return (m.modname, c.name)
                return (mod.imports[name][0], mod.imports[name][1])
            return ("?", name)
        head, rest = name.split(".", 1)
        if head in mod.imports and mod.imports[head][1] is None and "." not in rest:
            m, c = find_class(pkg_dir, mod.imports[head][0], rest, cache)
            if c is not None:
                return (m.modname, c.name)
        return ("?", name)

    def load(key):
        if key in nodes:
            return nodes[key]
        modname_, name = key
        m, c = (find_class(pkg_dir, modname_, name, cache) if modname_ != "?" else (None, None))
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
                             if dotted(b) not in ("object", "Generic") and not isinstance(b, ast.Subscript)]
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


def top_level(path):
    """{name: node} of a module file's top level: classes, functions, assignments, imports."""
    src = Source.get(path)
    names = {}
    for node in src.tree.body if src.tree is not None else []:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names[node.name] = node
        elif isinstance(node, ast.Assign):
            names.update((t.id, node) for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update(((a.asname or a.name).split(".")[0], node) for a in node.names)
    return names


def members(cls):
    """{name: node} a class body defines: methods, nested classes, assigned attributes."""
    out = {}
    for n in cls.body:
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.setdefault(n.name, n)
        elif isinstance(n, ast.Assign):
            for t in n.targets:
                if isinstance(t, ast.Name):
                    out.setdefault(t.id, n)
    return out


def resolve_target(package_dir, target):
    """A dotted path inside the package at `package_dir`, as pkgutil.resolve_name reads it: the longest
    prefix that is a module of the package, then a class (followed through re-exports) or a top-level
    name, then a class's attribute, looked up along its static MRO. Each inspector words the answer
    in its own document:

        {target, module, module_file, rest (the names after the module), top (the top-level node when
         rest[0] is no class), class, class_module, class_line, attr, member (the node defining
         attr), defined_in (the class defining it), missing (why nothing further was found)}"""
    parts = target.split(".")
    i = len(parts)
    while i > 0 and module_file(package_dir, ".".join(parts[:i])) is None:
        i -= 1
    out = {"target": target, "module": ".".join(parts[:i]) or None, "module_file": None, "rest": parts[i:],
           "top": None, "class": None, "class_module": None, "class_line": None, "attr": None, "member": None,
           "defined_in": None, "missing": None}
    if i == 0:
        out["missing"] = "no module"
        return out
    out["module_file"] = module_file(package_dir, out["module"])
    rest = out["rest"]
    if not rest:
        return out
    cache = {}
    m, cls = find_class(package_dir, out["module"], rest[0], cache)
    if cls is None:
        out["top"] = top_level(out["module_file"]).get(rest[0])
        if out["top"] is None:
            out["missing"] = "no name"
        return out
    out.update({"class": cls.name, "class_module": m.modname, "class_line": cls.lineno})
    if len(rest) < 2:
        return out
    out["attr"] = rest[1]
    for c in static_mro(package_dir, m.modname, cls.name)["classes"]:
        if not c["resolved"]:
            continue
        _m, node = find_class(package_dir, c["module"], c["name"], cache)
        member = members(node).get(rest[1]) if node is not None else None
        if member is not None:
            out.update({"member": member, "defined_in": c["name"]})
            return out
    out["missing"] = "no attribute"
    return out


def find_spec(name):
    """importlib.util.find_spec without raising (a broken package on the way is 'not found')."""
    import importlib.util

    try:
        return importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None


def find_module(name):
    """(file, is package) of a dotted module on sys.path, found without importing anything: the
    top-level package through the interpreter's own finders (an editable install's finder too),
    its submodules through their package's path; a namespace package on the way (no __init__.py)
    by walking the files."""
    import importlib.machinery

    parts = name.split(".")
    try:
        spec = None
        for finder in sys.meta_path:
            if getattr(finder, "__module__", "").startswith("_dynspec_"):  # (this program's own finder)
                continue
            try:
                spec = finder.find_spec(parts[0], None)
            except Exception:
                spec = None
            if spec is not None:
                break
        for i in range(1, len(parts)):
            if spec is None or not spec.submodule_search_locations:
                return None, False
            spec = importlib.machinery.PathFinder.find_spec(".".join(parts[:i + 1]), list(spec.submodule_search_locations))
    except Exception:  # a namespace package on the way needs its parent imported: walk the files
        for entry in sys.path:
            base = os.path.join(entry or os.getcwd(), *parts)
            for path, pkg in ((base + ".py", False), (os.path.join(base, "__init__.py"), True)):
                if os.path.isfile(path):
                    return os.path.abspath(path), pkg
        return None, False
    if spec is None or not spec.origin or not os.path.isfile(spec.origin):
        return None, False
    return os.path.abspath(spec.origin), bool(spec.submodule_search_locations)


def read_text(path):
    """A text file's contents, or None when it cannot be read as UTF-8."""
    try:
        with open(path, encoding="utf-8") as fh:
            return fh.read()
    except (OSError, UnicodeDecodeError):
        return None


# --- a unified diff ---------------------------------------------------------------------------------
_HUNK_RE = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@(.*)$")


def _diff_path(raw):
    p = raw.rstrip("\n").split("\t", 1)[0].strip()
    if len(p) >= 2 and p[0] == p[-1] == '"':
        p = p[1:-1]
    return p


def parse_diff(text):
    """(files [{old, new, hunks [{header, old_start, old_count, new_start, new_count, added_lines
    [(line, text)], new_side, old_side}]}], errors) of a unified diff (git's or diff -u's)."""
    files, errors = [], []
    cur = None
    lines = text.splitlines()
    i, n = 0, len(lines)
    while i < n:
        line = lines[i]
        if line.startswith("diff --git "):
            cur = {"old": None, "new": None, "hunks": [], "git_header": line}
            files.append(cur)
            i += 1
            continue
        if line.startswith("--- ") and i + 1 < n and lines[i + 1].startswith("+++ "):
            old, new = _diff_path(line[4:]), _diff_path(lines[i + 1][4:])
            if cur is None or cur["hunks"] or cur["old"] is not None:
                cur = {"old": None, "new": None, "hunks": []}
                files.append(cur)
            cur["old"], cur["new"] = old, new
            i += 2
            continue
        m = _HUNK_RE.match(line)
        if m and cur is not None:
            old_start, old_count = int(m.group(1)), int(m.group(2) if m.group(2) is not None else 1)
            new_start, new_count = int(m.group(3)), int(m.group(4) if m.group(4) is not None else 1)
            hunk = {"header": line, "old_start": old_start, "old_count": old_count, "new_start": new_start,
                    "new_count": new_count, "added_lines": [], "new_side": [], "old_side": []}
            o, nn = old_count, new_count
            ln = new_start
            i += 1
            while i < n and (o > 0 or nn > 0):
                body = lines[i]
                tag = body[:1]
                if tag == "\\":
                    i += 1
                    continue
                if tag == "+":
                    hunk["added_lines"].append((ln, body[1:]))
                    hunk["new_side"].append(body[1:])
                    ln += 1
                    nn -= 1
                elif tag == "-":
                    hunk["old_side"].append(body[1:])
                    o -= 1
                elif tag == " " or body == "":
                    hunk["new_side"].append(body[1:])
                    hunk["old_side"].append(body[1:])
                    ln += 1
                    o -= 1
                    nn -= 1
                else:
                    errors.append("hunk %r ends early at diff line %d" % (hunk["header"], i + 1))
                    break
                i += 1
            cur["hunks"].append(hunk)
            continue
        i += 1
    return files, errors


# --- the diff, mapped onto the installed package -------------------------------------------------
def _strip_ab(p, prefix):
    return p[2:] if p.startswith(prefix) else p


def map_diff_path(path, pkg_dir, package=None):
    """Installed file for a diff path such as a/python/PKG/srt/x.py, PKG/srt/x.py or srt/x.py, where
    PKG is `package` (default: the name of the folder `pkg_dir`, e.g. .../site-packages/vllm)."""
    package = package or os.path.basename(os.path.normpath(pkg_dir))
    parts = [x for x in path.replace("\\", "/").split("/") if x and x != "."]
    idxs = [k for k, x in enumerate(parts[:-1]) if x == package]
    for k in idxs:
        cand = os.path.join(pkg_dir, *parts[k + 1:])
        if os.path.exists(cand):
            return cand
    # a path without the package's name (srt/x.py, a checkout's subfolder): a tail of two parts at
    # least, so a plugin's own dsd_plugin/__init__.py is not taken for the package's __init__.py
    for k in range(len(parts) - 1):
        cand = os.path.join(pkg_dir, *parts[k:])
        if os.path.exists(cand):
            return cand
    if idxs:
        return os.path.join(pkg_dir, *parts[idxs[-1] + 1:])
    return None


def _find_block(lines, block, start):
    """1-based line where `block` (list of str) sits in lines, trying `start` first; else None."""
    if not block:
        return start
    norm = [b.rstrip() for b in block]
    k = len(norm)
    s = start - 1
    if 0 <= s and lines[s:s + k] == norm:
        return start
    first = norm[0]
    for j in range(0, len(lines) - k + 1):
        if lines[j] == first and lines[j:j + k] == norm:
            return j + 1
    return None


def analyse_diff(text, pkg_dir, package=None):
    """The diff's files mapped onto the package at `pkg_dir` (`package`: its import name, default the
    folder's name): {given, files [{diff_path, installed_path, present, new_file, deleted, hunks
    [{header, new_start, new_count, added, applied (exact | offset | not-applied | differs |
    file-missing | unknown), offset, mismatch?, scopes [{lines, code_lines, class, function,
    qualname, ...}]}]}], missing_files, parse_errors}. `mark_roles` then adds each scope's roles."""
    files, errors = parse_diff(text)
    out_files, missing = [], []
    for f in files:
        old, new = f["old"], f["new"]
        deleted = new == "/dev/null"
        new_file = old == "/dev/null"
        path = _strip_ab(old, "a/") if deleted else _strip_ab(new or "", "b/")
        if not path and f.get("git_header"):
            path = f["git_header"].split(" b/", 1)[-1]
        installed = map_diff_path(path, pkg_dir, package) if path else None
        present = bool(installed and os.path.isfile(installed))
        rec = {"diff_path": path, "installed_path": installed, "present": present, "new_file": new_file,
               "deleted": deleted, "hunks": []}
        src = None
        lines = None
        if present:
            try:
                lines = [x.rstrip() for x in read_bytes(installed).decode("utf-8", "replace").splitlines()]
            except OSError:
                lines = None
            if installed.endswith(".py"):
                src = Source.get(installed)
        for h in f["hunks"]:
            hr = {"header": h["header"], "new_start": h["new_start"], "new_count": h["new_count"],
                  "added": _ranges([ln for ln, _ in h["added_lines"]]), "applied": "unknown", "offset": None,
                  "scopes": []}
            if lines is not None:
                at = _find_block(lines, h["new_side"], h["new_start"])
                if at is not None:
                    hr["applied"] = "exact" if at == h["new_start"] else "offset"
                    hr["offset"] = at - h["new_start"]
                elif h["old_side"] and _find_block(lines, h["old_side"], h["old_start"]) is not None:
                    hr["applied"] = "not-applied"  # the installed file still has the pre-patch text
                else:
                    hr["applied"] = "differs"
                    hr["mismatch"] = _first_mismatch(lines, h["new_side"], h["new_start"])
            elif not present:
                hr["applied"] = "file-missing"
            if src is not None and src.tree is not None and h["added_lines"]:
                shift = hr["offset"] or 0
                groups = []
                for ln, body in h["added_lines"]:
                    sc = src.scope_at(ln + shift)
                    key = (sc["class"], sc["function"], sc["qualname"])
                    if groups and groups[-1][0] == key and groups[-1][2] == ln + shift - 1:
                        groups[-1][2] = ln + shift
                    else:
                        groups.append([key, ln + shift, ln + shift, sc, []])
                    if body.strip() and not body.strip().startswith("#"):
                        groups[-1][4].append(ln + shift)  # code, not a blank or a comment line
                for key, a, b, sc, code in groups:
                    d = {"lines": [a, b], "code_lines": code}
                    d.update(sc)
                    hr["scopes"].append(d)
            rec["hunks"].append(hr)
        if not present and not deleted:
            missing.append(path)
        out_files.append(rec)
    return {"given": True, "files": out_files, "missing_files": missing, "parse_errors": errors}


def _first_mismatch(lines, block, start):
    """Where the hunk's text first differs from the installed file at the hunk's own line numbers."""
    for k, want in enumerate(block):
        have = lines[start - 1 + k] if 0 <= start - 1 + k < len(lines) else None
        if have is None or have != want.rstrip():
            return {"line": start + k, "diff": want[:200], "installed": None if have is None else have[:200]}
    return None


def mark_roles(diff, hits):
    """Each scope of each hunk: does it hold the marker (`marker`), and does it add code besides
    the statement that logs the marker (`behaviour`)? The statement is the innermost one around the
    marker's line (a multi-line logger.info(...) call counts as the marker, not as behaviour)."""
    by_file = {}
    for h in hits or []:
        by_file.setdefault(os.path.abspath(h["file"]), []).append(h["line"])
    for f in diff.get("files", []):
        path = f.get("installed_path")
        lines = by_file.get(os.path.abspath(path)) if path else None
        stmts = _statement_spans(path, lines) if lines else []
        for h in f.get("hunks", []):
            for sc in h.get("scopes", []):
                a, b = sc["lines"]
                sc["marker"] = bool(lines) and any(a <= ln <= b for ln in lines)
                sc["behaviour"] = any(not any(s <= ln <= e for s, e in stmts) for ln in sc.pop("code_lines", []))
    return diff


def _statement_spans(path, lines):
    src = Source.get(path)
    if src.tree is None:
        return [(ln, ln) for ln in lines]
    best = dict((ln, (ln, ln)) for ln in lines)
    for node in ast.walk(src.tree):
        if not isinstance(node, ast.stmt) or isinstance(node, _COMPOUND):
            continue
        s, e = node.lineno, getattr(node, "end_lineno", None) or node.lineno
        for ln in lines:
            cur = best[ln]
            if s <= ln <= e and (cur == (ln, ln) or e - s < cur[1] - cur[0]):
                best[ln] = (s, e)
    return list(best.values())


_COMPOUND = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.If, ast.For, ast.AsyncFor, ast.While, ast.With,
             ast.AsyncWith, ast.Try)


def _ranges(nums):
    out = []
    for x in nums:
        if out and out[-1][1] == x - 1:
            out[-1][1] = x
        else:
            out.append([x, x])
    return out
