"""Where the patch is: every string constant holding the marker literal, with its enclosing scope."""
import ast
import os
import re

from .common import Source, _clip, _dotted, _read_bytes


def _iter_py(root):
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
                template.append("{%s}" % (_dotted(v.value) or "..."))
                sample.append("0")
                self.visit(v.value)  # strings nested in the expression
        if self.literal in "".join(sample):
            self.hits.append((node, "fstring", "".join(template), "".join(sample), self._call()))

    def _call(self):
        if not self.calls:
            return None
        return _dotted(self.calls[-1].func) or self.src.segment(self.calls[-1].func)


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
            hit = {"file": src.path, "line": line, "kind": kind, "call": call, "template": _clip(template, 1000),
                   "text": _clip(src.lines[line - 1].strip(), 300) if line - 1 < len(src.lines) else None}
            hit.update(src.scope_at(line))
            hit["pattern_matches"] = bool(pattern.search(sample)) if pattern is not None else None
            hits.append(hit)
    lit = literal.encode("utf-8")
    for ln in _byte_hit_lines(src.data, lit):
        if ln not in covered:
            hit = {"file": src.path, "line": ln, "kind": "syntax-error-file" if src.tree is None else "non-string",
                   "call": None, "template": None,
                   "text": _clip(src.lines[ln - 1].strip(), 300) if ln - 1 < len(src.lines) else None,
                   "pattern_matches": None}
            hit.update(src.scope_at(ln) if src.tree is not None else
                       {"class": None, "class_line": None, "bases": None, "function": None,
                        "function_line": None, "qualname": None})
            covered.add(ln)
            hits.append(hit)
    hits.sort(key=lambda h: h["line"])
    return hits


def scan_marker(pkg_dir, literal, pattern, extra_files=()):
    """Bytes scan of every .py under sglang/srt (and extra_files); AST only for files that hold the literal.
    If no file holds it verbatim (implicit string concatenation), files holding every word of it are
    AST-checked instead."""
    lit = literal.encode("utf-8")
    words = sorted(set(w.encode("utf-8") for w in re.findall(r"\w{3,}", literal)), key=len, reverse=True)
    root = os.path.join(pkg_dir, "srt")
    files = list(_iter_py(root))
    seen = set(files)
    files.extend(f for f in extra_files if f not in seen and f.endswith(".py") and os.path.isfile(f))
    direct, wordy = [], []
    sizes = {}
    for f in files:
        try:
            data = _read_bytes(f)
        except OSError:
            continue
        sizes[f] = len(data)
        if lit in data:
            direct.append(f)
    if not direct and words:  # a second pass only when needed: it costs as much as the first
        for f in sizes:
            try:
                data = _read_bytes(f)
            except OSError:
                continue
            if words[0] in data and all(w in data for w in words[1:]):
                wordy.append(f)
    hits = []
    for f in direct + (wordy if not direct else []):
        hits.extend(marker_hits_in(Source.get(f), literal, pattern))
    return {"scan_root": root, "files_scanned": len(files), "files_with_literal": direct,
            "files_with_words": wordy if not direct else [], "hits": hits}, sizes
