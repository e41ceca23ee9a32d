"""Whether each patched file compiles, and whether stale cached bytecode is what runs."""
import os
import sys

from .common import Source, _clip, _read_bytes


def pyc_report(py_path):
    import importlib.util

    out = []
    d = os.path.join(os.path.dirname(py_path), "__pycache__")
    stem = os.path.basename(py_path)[:-3]
    try:
        names = sorted(os.listdir(d))
        st = os.stat(py_path)
    except OSError:
        return out
    src_bytes = None
    tag_now = getattr(sys.implementation, "cache_tag", None)
    for n in names:
        if not (n.startswith(stem + ".") and n.endswith(".pyc")):
            continue
        tag = n[len(stem) + 1:-4]
        opt = None
        if ".opt-" in tag:
            tag, opt = tag.split(".opt-", 1)
        if "." in tag:
            continue  # another module whose name starts with stem + "."
        path = os.path.join(d, n)
        rec = {"path": path, "tag": tag, "opt": opt}
        try:
            with open(path, "rb") as fh:
                head = fh.read(16)
            pst = os.stat(path)
        except OSError as e:
            rec["error"] = str(e)
            out.append(rec)
            continue
        rec["pyc_mtime"] = pst.st_mtime
        current = tag == tag_now and head[:4] == importlib.util.MAGIC_NUMBER
        rec["used_by_this_interpreter"] = bool(current and opt is None)
        if len(head) < 16:
            rec["error"] = "truncated header"
            out.append(rec)
            continue
        flags = int.from_bytes(head[4:8], "little")
        if flags & 1:
            checked = bool(flags & 2)
            rec["validation"] = "checked-hash" if checked else "unchecked-hash"
            if current:
                if src_bytes is None:
                    src_bytes = _read_bytes(py_path)
                rec["stale"] = head[8:16] != importlib.util.source_hash(src_bytes)
            else:
                rec["stale"] = None  # the hash is keyed by that interpreter's magic number
            # an unchecked pyc is used as-is: a stale one runs the old code
            rec["stale_code_runs"] = bool(rec["stale"]) and not checked and rec["used_by_this_interpreter"]
        else:
            rec["validation"] = "timestamp"
            rec["recorded_mtime"] = int.from_bytes(head[8:12], "little")
            rec["recorded_size"] = int.from_bytes(head[12:16], "little")
            rec["source_mtime"] = int(st.st_mtime) & 0xFFFFFFFF
            rec["source_size"] = st.st_size & 0xFFFFFFFF
            rec["stale"] = (rec["recorded_mtime"], rec["recorded_size"]) != (rec["source_mtime"], rec["source_size"])
            rec["stale_code_runs"] = False  # the import system recompiles a mismatched timestamp pyc
        out.append(rec)
    return out




def compile_report(path):
    rec = {"file": path, "exists": os.path.isfile(path), "compiles": None, "syntax_error": None}
    if not rec["exists"]:
        return rec
    src = Source.get(path)
    err = src.syntax_error
    if err is None:
        try:
            compile(src.tree, path, "exec", dont_inherit=True)
        except SyntaxError as e:  # errors only the compiler sees ('return' outside function, ...)
            err = e
        except Exception as e:
            rec["compile_error"] = "%s: %s" % (type(e).__name__, e)
    rec["compiles"] = err is None
    if err is not None:
        rec["syntax_error"] = {"line": err.lineno, "col": err.offset, "message": err.msg,
                               "text": _clip((err.text or "").strip(), 300),
                               "where": "%s:%s: %s" % (path, err.lineno, err.msg)}
    rec["pyc"] = pyc_report(path)
    rec["stale_pyc"] = any(p.get("stale") for p in rec["pyc"])
    rec["stale_code_runs"] = any(p.get("stale_code_runs") for p in rec["pyc"])
    return rec
