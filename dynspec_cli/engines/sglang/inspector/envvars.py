"""Declared defaults of sglang's environment variables (srt/environ.py), without importing it."""
import ast
import os
import re

from .common import _clip, _dotted, _read_bytes


def env_defaults(pkg_dir, names):
    """Raw declaration of each env var in srt/environ.py (``NAME = EnvBool(False)`` in class Envs):
    found by a line regex and parsed as one expression, so the 2000-line file is never AST-parsed."""
    path = os.path.join(pkg_dir, "srt", "environ.py")
    out = {}
    try:
        data = _read_bytes(path)
    except OSError:
        for n in names:
            out[n] = {"present": False, "file": None, "reason": "no srt/environ.py"}
        return out
    text = data.decode("utf-8", "replace")
    for n in names:
        rec = {"present": False, "file": path}
        m = re.search(r"^[ \t]*%s[ \t]*(?::[^=\n]+)?=[ \t]*(.+)$" % re.escape(n), text, re.M)
        if m:
            line = text.count("\n", 0, m.start()) + 1
            end_pos, tree = m.end(), None
            for _ in range(20):  # a call spread over several lines: extend until it parses
                expr = text[m.start(1):end_pos].strip()
                try:
                    tree = ast.parse(expr, mode="eval").body
                    break
                except SyntaxError:
                    nxt = text.find("\n", end_pos + 1)
                    if nxt == -1 or end_pos >= len(text):
                        break
                    end_pos = nxt
            rec.update(present=True, line=line, raw=_clip(expr, 300), kind=None, default=None)
            if isinstance(tree, ast.Call):
                rec["kind"] = (_dotted(tree.func) or "").split(".")[-1] or None
                if tree.args:
                    try:
                        rec["default"] = ast.literal_eval(tree.args[0])
                    except Exception:
                        rec["default_expr"] = _clip(expr, 300)
        out[n] = rec
    return out
