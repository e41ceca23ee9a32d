"""The user's unified diff, mapped onto the installed files: is each hunk applied, and in which scope."""
import ast
import os

from .common import Source, _read_bytes, shared


parse_diff = shared.parse_diff


def _strip_ab(p, prefix):
    return p[2:] if p.startswith(prefix) else p


def map_diff_path(path, pkg_dir):
    """Installed file for a diff path such as a/python/sglang/srt/x.py, sglang/srt/x.py or srt/x.py."""
    parts = [x for x in path.replace("\\", "/").split("/") if x and x != "."]
    idxs = [k for k, x in enumerate(parts[:-1]) if x == "sglang"]
    for k in idxs:
        cand = os.path.join(pkg_dir, *parts[k + 1:])
        if os.path.exists(cand):
            return cand
    # a path without the package's name (srt/x.py, a checkout's subfolder): a tail of two parts at
    # least, so a plugin's own dsd_plugin/__init__.py is not taken for sglang/__init__.py
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


def analyse_diff(text, pkg_dir):
    files, errors = parse_diff(text)
    out_files, missing = [], []
    for f in files:
        old, new = f["old"], f["new"]
        deleted = new == "/dev/null"
        new_file = old == "/dev/null"
        path = _strip_ab(old, "a/") if deleted else _strip_ab(new or "", "b/")
        if not path and f.get("git_header"):
            path = f["git_header"].split(" b/", 1)[-1]
        installed = map_diff_path(path, pkg_dir) if path else None
        present = bool(installed and os.path.isfile(installed))
        rec = {"diff_path": path, "installed_path": installed, "present": present, "new_file": new_file,
               "deleted": deleted, "hunks": []}
        src = None
        lines = None
        if present:
            try:
                lines = [x.rstrip() for x in _read_bytes(installed).decode("utf-8", "replace").splitlines()]
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
