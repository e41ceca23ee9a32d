"""Small helpers every concern uses, and `Source`: one Python file read and parsed once."""
import ast
import os
import time


SCHEMA = "dynspec-inspector/1"
_T0 = time.perf_counter()
_MAX_LIST = 500
_MAX_TEXT = 4000


def _rel_time():
    return round(time.perf_counter() - _T0, 4)


def _clip(s, n=_MAX_TEXT):
    if s is None:
        return None
    s = str(s)
    return s if len(s) <= n else s[:n] + "...[%d more chars]" % (len(s) - n)


def _jsonable(v):
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    if isinstance(v, (list, tuple, set, frozenset)):
        return [_jsonable(x) for x in v]
    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in v.items()}
    name = getattr(v, "name", None)  # enums
    if isinstance(name, str) and type(v).__module__ != "builtins":
        return name
    return repr(v)


def _realpath(p):
    try:
        return os.path.realpath(p)
    except Exception:
        return p


def _read_bytes(path):
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


def _dotted(node):
    """Name/Attribute chain as text (``logger.info``), else None."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


def _subscript_slice(node):
    s = node.slice
    if s.__class__.__name__ == "Index":  # Python 3.8
        s = s.value
    return s


class Source(object):
    """One Python file read once: bytes, text, AST (or the SyntaxError), and scope intervals."""

    _cache = {}

    def __init__(self, path):
        self.path = path
        self.data = _read_bytes(path)
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
            return _dotted(node) or "?"

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
