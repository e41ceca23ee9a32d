"""dynspec preflight inspector: what the sglang on THIS interpreter will run, read without running it.

Runs inside someone else's interpreter (the one that will start the sglang server, possibly on a
remote GPU host, sent as ``python - '<json>'``), so: stdlib only, Python 3.8+, nothing from dynspec.
Prints exactly one JSON document on stdout, also when it fails (then ``"ok": false`` with ``error``
and ``exception_traceback``). Exit status 0 when ``ok``, 1 otherwise; callers parse stdout either way.
Everything sglang or a C extension writes to fd 1 while we work is sent to stderr.

Input: one JSON object as argv[1] (``@PATH`` reads it from a file; a long ``patch_diff`` may not fit
on a command line)::

    marker_literal   str   substring of the log line the patch emits          (required)
    marker_pattern   str   Python regex of that line; checked against the source template
    flag             str   the server flag the patch adds, e.g. --speculative-disable-batch-threshold
    flags            [str] sglang server flags the user will pass (checked statically; dynamic route input)
    patch_diff       str   unified diff the user applied
    env              {str: str|null}  environment overrides for the dynamic route (null unsets)
    dynamic          bool  also import sglang and run its real argument resolution (default false)
    sglang_path      str   directory put first on sys.path (tests; a site-style dir holding sglang/)
    env_vars         [str] names looked up in srt/environ.py (default ["SGLANG_ENABLE_SPEC_V2"])
    list_flags       bool  include every accepted option string in the output (default false)
    hide_accelerators bool dynamic route: CUDA_VISIBLE_DEVICES etc. set to "" so no GPU is touched (default true)
    default_device   str|null  dynamic route: --device added when flags have none (default "cuda")

Output (``schema`` = "dynspec-inspector/1"); paths are absolute, lines 1-based::

    ok, error, exception_traceback, warnings[]         failure is data: ok=false + error (+ traceback)
    python     executable, version, cache_tag, prefix, in_venv, cwd, sys_path[]
    input      the arguments as understood (patch_diff replaced by patch_diff_chars)
    sglang     found, package_dir, origin, version (+ version_source), dist_version, version_py,
               metadata_version, dist_info, direct_url, in_site_packages, editable, editable_evidence[]
               {kind: direct_url.json|editable-finder|import-hook|path|egg-link|source-checkout, file},
               source_root, build_copies[] {path, version_py, on_sys_path},
               installs[] {package_dir, sys_path_entry, via, version_py, dist_version, active},
               multiple_installs, modified_since_install {checked, changed[], added[], missing[]}
               (sizes vs the wheel's RECORD, under sglang/srt); when not found: reason
    marker     literal, pattern, files_scanned, files_with_literal[], files_with_words[],
               hits[] {file, line, kind: str|fstring|non-string|syntax-error-file, call, template, text,
                       class, class_line, bases[] (as written), function, function_line, qualname,
                       pattern_matches}, hits_in_other_installs[] (only when the active one has none)
    diff       given, parse_errors[], missing_files[], files[] {diff_path, installed_path, present, new_file,
               deleted, hunks[] {header, new_start, new_count, added[[a,b]], applied: exact|offset|
               not-applied|differs|file-missing, offset, scopes[] {lines[a,b], class, function, qualname, ...}}}
    files[]    every patched file (marker, diff, modified since install, flag's home): file, roles[],
               compiles, syntax_error {line, col, message, text, where="file:line: message"},
               pyc[] {path, tag, validation, stale, used_by_this_interpreter, stale_code_runs, ...},
               stale_pyc, stale_code_runs
    flags      count, sources[] {file, style: add_argument|annotated-field, count}, errors[],
               no_cli_fields{}, feature_flag and user_flags[]: {flag, option, defined, accepted,
               abbreviation_of, ambiguous[], defined_at {file, line, style, class, action}}, options[]
    env_defaults  {NAME: {present, file, line, raw, kind (e.g. EnvBool), default}}
    dynamic    null, or {ok, stage, flags[] (as run), env_applied, resolution_api, imported_from,
               resolved {speculative_algorithm, disable_overlap_schedule, speculative_eagle_topk,
               speculative_num_steps, speculative_num_draft_tokens, max_running_requests,
               enable_multi_layer_eagle, device, <flag's field>}, missing_fields[],
               worker {module, class, placeholder, requested[], file, exists, mro {classes[] {name,
               module, file, line, bases_as_written[], bases[], methods[], resolved}, method}},
               log[] {logger, level, message, file, line}, python_warnings[], stderr, notes[],
               error {stage: import|resolve|worker, type, message, traceback, exit_code}}
    timings    seconds since start, per stage
"""
import ast
import json
import os
import re
import sys
import time
import traceback

SCHEMA = "dynspec-inspector/1"
_T0 = time.perf_counter()
_MAX_LIST = 500
_MAX_TEXT = 4000

# --------------------------------------------------------------------------------------------------
# small helpers


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


# --------------------------------------------------------------------------------------------------
# 1. which sglang


def _site_dirs():
    dirs = []
    try:
        import site

        dirs.extend(site.getsitepackages())
        dirs.append(site.getusersitepackages())
    except Exception:
        pass
    for p in sys.path:
        if p and os.path.basename(p.rstrip(os.sep)) in ("site-packages", "dist-packages"):
            dirs.append(p)
    seen, out = set(), []
    for d in dirs:
        r = _realpath(d)
        if r not in seen and os.path.isdir(d):
            seen.add(r)
            out.append(d)
    return out


_VERSION_RE = re.compile(r"""^__version__\s*(?::[^=\n]+)?=\s*(?:\w+\s*=\s*)*['"]([^'"]+)['"]""", re.M)


def _version_py(pkg_dir):
    """__version__ as written in sglang/version.py, or in the setuptools-scm sglang/_version.py it imports."""
    for name in ("version.py", "_version.py"):
        try:
            m = _VERSION_RE.search(_read_bytes(os.path.join(pkg_dir, name)).decode("utf-8", "replace"))
        except OSError:
            continue
        if m:
            return m.group(1)
    return None


def _dist_infos(entry):
    """sglang-*.dist-info / .egg-info directories directly inside a sys.path entry."""
    out = []
    try:
        names = os.listdir(entry)
    except OSError:
        return out
    for n in names:
        low = n.lower()
        if (low.startswith("sglang-") and (low.endswith(".dist-info") or low.endswith(".egg-info"))) \
                and os.path.isdir(os.path.join(entry, n)):
            out.append(os.path.join(entry, n))
    return sorted(out)


def _dist_meta(dist_dir):
    meta = {"path": dist_dir, "version": None, "direct_url": None, "editable": False, "editable_url": None}
    for fname in ("METADATA", "PKG-INFO"):
        try:
            with open(os.path.join(dist_dir, fname), encoding="utf-8", errors="replace") as fh:
                for line in fh:
                    if line.startswith("Version:"):
                        meta["version"] = line.split(":", 1)[1].strip()
                        break
                    if not line.strip():
                        break
            break
        except OSError:
            continue
    try:
        with open(os.path.join(dist_dir, "direct_url.json"), encoding="utf-8") as fh:
            du = json.load(fh)
        meta["direct_url"] = du
        if (du.get("dir_info") or {}).get("editable"):
            meta["editable"] = True
            url = du.get("url") or ""
            meta["editable_url"] = url[7:] if url.startswith("file://") else url
    except (OSError, ValueError):
        pass
    return meta


def _editable_finder_mappings(site_dirs):
    """setuptools' PEP 660 strict mode: __editable___*_finder.py with MAPPING = {'sglang': path}."""
    out = []
    for d in site_dirs:
        try:
            names = os.listdir(d)
        except OSError:
            continue
        for n in names:
            if n.startswith("__editable__") and n.endswith("_finder.py") and "sglang" in n.lower():
                path = os.path.join(d, n)
                try:
                    tree = ast.parse(_read_bytes(path))
                except (OSError, SyntaxError, ValueError):
                    continue
                for node in tree.body:
                    target = value = None
                    if isinstance(node, ast.Assign) and len(node.targets) == 1:
                        target, value = node.targets[0], node.value
                    elif isinstance(node, ast.AnnAssign):
                        target, value = node.target, node.value
                    if isinstance(target, ast.Name) and target.id == "MAPPING" and value is not None:
                        try:
                            mapping = ast.literal_eval(value)
                        except ValueError:
                            continue
                        if isinstance(mapping, dict) and "sglang" in mapping:
                            out.append((mapping["sglang"], path))
    return out


def _pth_evidence(site_dirs, pkg_dir):
    """.pth / .egg-link files that put the directory holding pkg_dir on sys.path, or name sglang."""
    out = []
    parent = _realpath(os.path.dirname(pkg_dir))
    for d in site_dirs:
        try:
            names = os.listdir(d)
        except OSError:
            continue
        for n in names:
            if not (n.endswith(".pth") or n.endswith(".egg-link")):
                continue
            path = os.path.join(d, n)
            try:
                with open(path, encoding="utf-8", errors="replace") as fh:
                    content = fh.read(65536)
            except OSError:
                continue
            for line in content.splitlines():
                line = line.strip()
                if not line or line.startswith("#"):
                    continue
                if line.startswith("import "):
                    if "sglang" in line.lower():
                        out.append({"file": path, "line": _clip(line, 300), "kind": "import-hook"})
                    continue
                cand = line if os.path.isabs(line) else os.path.join(d, line)
                if _realpath(cand) == parent:
                    out.append({"file": path, "line": line, "kind": "egg-link" if n.endswith(".egg-link") else "path"})
    return out


def locate_sglang(warnings):
    import importlib.util

    info = {"found": False}
    try:
        spec = importlib.util.find_spec("sglang")
    except Exception as e:  # a broken finder on sys.path
        info["find_spec_error"] = "%s: %s" % (type(e).__name__, e)
        spec = None
    site_dirs = _site_dirs()
    installs = []
    seen = {}

    def add(pkg_dir, entry, via, extra=None):
        r = _realpath(pkg_dir)
        if r in seen:
            return
        rec = {"package_dir": os.path.abspath(pkg_dir), "realpath": r, "sys_path_entry": entry, "via": via,
               "version_py": _version_py(pkg_dir), "dist_info": None, "dist_version": None, "active": False}
        if extra:
            rec.update(extra)
        if entry is not None:
            d = _dist_infos(entry)
            if d:
                rec["dist_info"] = d[0]
                rec["dist_version"] = _dist_meta(d[0])["version"]
        seen[r] = rec
        installs.append(rec)

    for entry in sys.path:
        e = entry or os.getcwd()
        if os.path.isfile(os.path.join(e, "sglang", "__init__.py")):
            add(os.path.join(e, "sglang"), e, "sys.path")
    for pkg_dir, finder in _editable_finder_mappings(site_dirs):
        if os.path.isdir(pkg_dir):
            add(pkg_dir, None, "editable-finder", {"finder": finder})

    if spec is None or (spec.origin in (None, "namespace") and spec.submodule_search_locations):
        if spec is not None:
            info["namespace_package"] = list(spec.submodule_search_locations or [])
            info["reason"] = "only a namespace package named sglang (a directory without __init__.py) is on sys.path"
        else:
            info["reason"] = "importlib.util.find_spec('sglang') found nothing on this interpreter's sys.path"
        info["installs"] = installs
        return info

    pkg_dir = os.path.dirname(os.path.abspath(spec.origin))
    info.update(found=True, origin=spec.origin, package_dir=pkg_dir, loader=type(spec.loader).__name__)
    add(pkg_dir, None, "find_spec")
    active = seen[_realpath(pkg_dir)]
    active["active"] = True
    entry = active["sys_path_entry"] or os.path.dirname(pkg_dir)

    # the dist that owns the active package: same directory, else an editable dist pointing at it
    owner = None
    for d in _dist_infos(entry):
        owner = _dist_meta(d)
        break
    editable_evidence = []
    all_dists = []
    for d in site_dirs + [p for p in sys.path if p]:
        for dd in _dist_infos(d):
            if all(x["path"] != dd for x in all_dists):
                all_dists.append(_dist_meta(dd))
    for m in all_dists:
        if m["editable"] and m["editable_url"]:
            root = _realpath(m["editable_url"])
            if _realpath(pkg_dir).startswith(root.rstrip(os.sep) + os.sep) or _realpath(pkg_dir) == root:
                editable_evidence.append({"kind": "direct_url.json", "file": os.path.join(m["path"], "direct_url.json"),
                                          "url": m["editable_url"]})
                if owner is None or not owner.get("editable"):
                    owner = m
    if owner is not None and owner["editable"] and not editable_evidence:
        editable_evidence.append({"kind": "direct_url.json", "file": os.path.join(owner["path"], "direct_url.json"),
                                  "url": owner["editable_url"]})
    if active.get("finder"):
        editable_evidence.append({"kind": "editable-finder", "file": active["finder"]})
    for ev in _pth_evidence(site_dirs, pkg_dir):
        editable_evidence.append(ev)
    in_site = any(_realpath(pkg_dir).startswith(_realpath(s).rstrip(os.sep) + os.sep) for s in site_dirs)
    src_root = os.path.dirname(pkg_dir)
    if not in_site and any(os.path.isfile(os.path.join(src_root, f)) for f in ("pyproject.toml", "setup.py")):
        editable_evidence.append({"kind": "source-checkout", "file": src_root})

    info["in_site_packages"] = in_site
    info["dist_info"] = owner["path"] if owner else None
    info["dist_version"] = owner["version"] if owner else None
    info["direct_url"] = owner["direct_url"] if owner else None
    info["editable"] = bool(editable_evidence)
    info["editable_evidence"] = editable_evidence
    info["source_root"] = src_root if editable_evidence else None
    info["version_py"] = active["version_py"]
    # what importlib.metadata.version("sglang") reports: the first sglang dist on sys.path (found
    # here directly: importing importlib.metadata costs ~40 ms, a tenth of preflight's budget)
    info["metadata_version"] = None
    for entry in sys.path:
        first = _dist_infos(entry or os.getcwd())
        if first:
            info["metadata_version"] = _dist_meta(first[0])["version"]
            break
    if info["dist_version"]:
        info["version"], info["version_source"] = info["dist_version"], "dist-info of the imported package"
    elif info["version_py"]:
        info["version"], info["version_source"] = info["version_py"], "sglang/version.py"
    else:
        info["version"], info["version_source"] = info["metadata_version"], "the first sglang dist-info on sys.path (as importlib.metadata)"
    versions = set(v for v in (info["dist_version"], info["version_py"]) if v)
    if len(versions) > 1:
        warnings.append("sglang version disagreement: dist-info says %s, sglang/version.py says %s"
                        % (info["dist_version"], info["version_py"]))
    if info["metadata_version"] and info["version"] and info["metadata_version"] != info["version"]:
        warnings.append("importlib.metadata reports sglang %s but the imported package is %s"
                        % (info["metadata_version"], info["version"]))

    # build/lib*/sglang beside a checkout: a stale copy a later `pip install .` or sys.path tweak may pick up
    builds = []
    if not in_site or editable_evidence:
        bdir = os.path.join(src_root, "build")
        try:
            for n in sorted(os.listdir(bdir)):
                cand = os.path.join(bdir, n, "sglang")
                if n.startswith("lib") and os.path.isdir(cand):
                    builds.append({"path": cand, "version_py": _version_py(cand),
                                   "on_sys_path": _realpath(cand) in seen})
        except OSError:
            pass
    info["build_copies"] = builds
    info["installs"] = installs
    info["multiple_installs"] = len(installs) > 1
    return info


def record_sizes(dist_dir, pkg_dir, sizes):
    """Files under sglang/srt whose size differs from the wheel's RECORD, or that RECORD does not list:
    a cheap 'what was edited since install' (same-size edits are not seen). `sizes` comes from the
    marker scan, which read every file anyway."""
    out = {"checked": False, "scope": "sglang/srt", "changed": [], "added": [], "missing": []}
    if not dist_dir or not os.path.isfile(os.path.join(dist_dir, "RECORD")):
        return out
    entry = os.path.dirname(dist_dir)
    if _realpath(os.path.join(entry, "sglang")) != _realpath(pkg_dir):
        return out
    recorded = {}
    prefix = entry.rstrip(os.sep) + os.sep
    try:
        text = _read_bytes(os.path.join(dist_dir, "RECORD")).decode("utf-8", "replace")
    except OSError:
        return out
    for line in text.splitlines():
        if line.startswith("sglang/srt/"):  # path,hash,size (a quoted path would start with '"')
            parts = line.rsplit(",", 2)
        elif line.startswith('"sglang/srt/'):
            import csv

            parts = next(csv.reader([line]))
        else:
            continue
        if len(parts) == 3 and parts[0].endswith(".py") and parts[2].isdigit():
            recorded[prefix + (parts[0] if os.sep == "/" else parts[0].replace("/", os.sep))] = int(parts[2])
    if not recorded:
        return out
    out["checked"] = True
    for path in sorted(sizes):
        size = recorded.pop(path, None)
        if size is None:
            out["added"].append(path)
        elif size != sizes[path]:
            out["changed"].append(path)
    out["missing"] = sorted(recorded)
    return out


# --------------------------------------------------------------------------------------------------
# stale bytecode


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


# --------------------------------------------------------------------------------------------------
# 2. where the patch is


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


# --------------------------------------------------------------------------------------------------
# unified diff


_HUNK_RE = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@(.*)$")


def _diff_path(raw):
    p = raw.rstrip("\n").split("\t", 1)[0].strip()
    if len(p) >= 2 and p[0] == p[-1] == '"':
        p = p[1:-1]
    return p


def parse_diff(text):
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
    for k in range(len(parts)):
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
            elif not present:
                hr["applied"] = "file-missing"
            if src is not None and src.tree is not None and h["added_lines"]:
                shift = hr["offset"] or 0
                groups = []
                for ln, _ in h["added_lines"]:
                    sc = src.scope_at(ln + shift)
                    key = (sc["class"], sc["function"], sc["qualname"])
                    if groups and groups[-1][0] == key and groups[-1][2] == ln + shift - 1:
                        groups[-1][2] = ln + shift
                    else:
                        groups.append([key, ln + shift, ln + shift, sc])
                for key, a, b, sc in groups:
                    d = {"lines": [a, b]}
                    d.update(sc)
                    hr["scopes"].append(d)
            rec["hunks"].append(hr)
        if not present and not deleted:
            missing.append(path)
        out_files.append(rec)
    return {"given": True, "files": out_files, "missing_files": missing, "parse_errors": errors}


def _ranges(nums):
    out = []
    for x in nums:
        if out and out[-1][1] == x - 1:
            out[-1][1] = x
        else:
            out.append([x, x])
    return out


# --------------------------------------------------------------------------------------------------
# compile check


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


# --------------------------------------------------------------------------------------------------
# 3. flags the installed sglang accepts


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


def _is_true(node):
    return isinstance(node, ast.Constant) and node.value is True


def _str_value(mod, node):
    """A str the expression evaluates to statically, else None."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return ""
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Mod)):
        left = _str_value(mod, node.left)
        return left if left is not None else None
    if isinstance(node, ast.Name) and mod is not None and node.id in mod.assigns:
        return _str_value(None, mod.assigns[node.id])
    return None


def _boolean_optional(node):
    d = _dotted(node) if node is not None else None
    return bool(d) and d.split(".")[-1] == "BooleanOptionalAction"


def _option_strings(names, action_node):
    out = list(names)
    if _boolean_optional(action_node):  # argparse adds --no-X for every --X
        out += ["--no-" + n[2:] for n in names if n.startswith("--")]
    return out


def _field_cli(mod, ann_node, field, cache_depth=0):
    """Mirror of arg_utils.add_cli_args_from_dataclass for one field: its option strings, or None when
    the field gets no flag (no A[...] / no Arg or str metadata / no_cli=True).
    Returns (names, reason, action_text)."""
    ann = ann_node
    if isinstance(ann, ast.Constant) and isinstance(ann.value, str):  # quoted annotation
        try:
            ann = ast.parse(ann.value, mode="eval").body
        except SyntaxError:
            return None, "unparseable string annotation", None
    if isinstance(ann, ast.Name) and mod is not None and ann.id in mod.assigns and cache_depth < 3:
        return _field_cli(mod, mod.assigns[ann.id], field, cache_depth + 1)  # type alias
    if not isinstance(ann, ast.Subscript):
        return None, "not Annotated", None
    head = _dotted(ann.value) or ""
    if head.split(".")[-1] not in ("A", "Annotated"):
        return None, "not Annotated", None
    sl = _subscript_slice(ann)
    elts = sl.elts if isinstance(sl, ast.Tuple) else [sl]
    for meta in elts[1:]:
        resolved = meta
        if isinstance(meta, ast.Name) and mod is not None and meta.id in mod.assigns:
            resolved = mod.assigns[meta.id]
        if isinstance(resolved, ast.Call) and (_dotted(resolved.func) or "").split(".")[-1] == "Arg":
            kw = {k.arg: k.value for k in resolved.keywords if k.arg}
            if "no_cli" in kw and _is_true(kw["no_cli"]):
                return None, "no_cli=True", None
            cli_name = "--" + field.replace("_", "-")
            if "cli_name" in kw:
                v = _str_value(mod, kw["cli_name"])
                if v:
                    cli_name = v
            names = [cli_name]
            if "aliases" in kw and isinstance(kw["aliases"], (ast.List, ast.Tuple)):
                names += [x for x in (_str_value(mod, e) for e in kw["aliases"].elts) if x]
            action = kw.get("action")
            return _option_strings(names, action), None, (mod.src.segment(action) if action is not None else None)
        if _str_value(mod, resolved) is not None:
            return ["--" + field.replace("_", "-")], None, None
    return None, "no Arg/str metadata", None


def _is_classvar(ann):
    d = _dotted(ann.value) if isinstance(ann, ast.Subscript) else _dotted(ann)
    return bool(d) and d.split(".")[-1] == "ClassVar"


def _class_fields(sglang_dir, mod, cls, cache, seen=None):
    """AnnAssign fields of a class, base classes' first (dataclass / msgspec order)."""
    seen = seen if seen is not None else set()
    key = (mod.modname, cls.name)
    if key in seen:
        return []
    seen.add(key)
    out = []
    for b in cls.bases:
        name = _dotted(b)
        if not name or "." in name:
            continue
        if name in mod.classes:
            out += _class_fields(sglang_dir, mod, mod.classes[name], cache, seen)
        elif name in mod.imports and mod.imports[name][1] is not None:
            bmod, bcls = _find_class(sglang_dir, mod.imports[name][0], mod.imports[name][1], cache)
            if bcls is not None:
                out += _class_fields(sglang_dir, bmod, bcls, cache, seen)
    for node in cls.body:
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and not _is_classvar(node.annotation):
            out.append((mod, cls, node))
    return out


def _statement_calls(body):
    """Calls that are whole statements or assigned/returned values, in every nested block: where
    parser.add_argument(...) and friends live. Much cheaper than ast.walk over every expression."""
    stack = list(reversed(body))
    while stack:
        node = stack.pop()
        value = getattr(node, "value", None) if isinstance(
            node, (ast.Expr, ast.Assign, ast.AnnAssign, ast.AugAssign, ast.Return)) else None
        if isinstance(value, ast.Call):
            yield value
        elif isinstance(value, ast.Await) and isinstance(value.value, ast.Call):
            yield value.value
        for field in ("body", "orelse", "finalbody", "handlers"):
            sub = getattr(node, field, None)
            if isinstance(sub, list):
                stack.extend(reversed(sub))


def collect_flags(pkg_dir, warnings):
    """Every option string the installed ServerArgs parser registers, found statically:
    explicit add_argument(...) calls in srt/server_args.py, plus (when that file calls
    add_cli_args_from_dataclass) the A[...]-annotated fields of ServerArgs and of the namespace
    classes it collects (srt/arg_groups/fields/*.py), mirroring arg_utils.add_cli_args_from_dataclass."""
    res = {"options": {}, "sources": [], "errors": [], "skipped_fields": {}}
    sa_path = os.path.join(pkg_dir, "srt", "server_args.py")
    if not os.path.isfile(sa_path):
        res["errors"].append("no srt/server_args.py in %s" % pkg_dir)
        return res
    src = Source.get(sa_path)
    if src.tree is None:
        e = src.syntax_error
        res["errors"].append("%s:%s: %s (flags cannot be read)" % (sa_path, e.lineno, e.msg))
        return res
    cache = {}
    sa_mod = _Module(src, "sglang.srt.server_args")
    cache["sglang.srt.server_args"] = sa_mod

    def add(opt, file, line, style, cls=None, action=None):
        if opt not in res["options"]:
            res["options"][opt] = {"file": file, "line": line, "style": style, "class": cls, "action": action}

    # explicit add_argument("--x", ...) anywhere in server_args.py
    n_explicit = 0
    uses_dataclass_helper = False
    helper_calls = []
    for node in _statement_calls(src.tree.body):
        fname = _dotted(node.func) or ""
        if fname.split(".")[-1] == "add_argument":
            names = [a.value for a in node.args
                     if isinstance(a, ast.Constant) and isinstance(a.value, str) and a.value.startswith("-")]
            action = next((k.value for k in node.keywords if k.arg == "action"), None)
            for opt in _option_strings(names, action):
                add(opt, sa_path, node.lineno, "add_argument",
                    action=src.segment(action) if action is not None else None)
                n_explicit += 1
        elif fname.split(".")[-1] == "add_cli_args_from_dataclass":
            uses_dataclass_helper = True
            helper_calls.append(node)
    res["sources"].append({"file": sa_path, "style": "add_argument", "count": n_explicit})
    if not uses_dataclass_helper:
        return res

    # which classes the helper sees: ServerArgs itself, plus every namespace collect_input_fields gets
    classes = []
    if "ServerArgs" in sa_mod.classes:
        classes.append((sa_mod, sa_mod.classes["ServerArgs"]))
    only_fields = None
    for call in helper_calls:
        for k in call.keywords:
            if k.arg == "fields" and isinstance(k.value, (ast.List, ast.Tuple)):
                only_fields = set(x for x in (_str_value(sa_mod, e) for e in k.value.elts) if x)
    ns_names = []
    for node in _statement_calls(src.tree.body):
        if (_dotted(node.func) or "").split(".")[-1] == "collect_input_fields" and node.args:
            arg = node.args[0]
            if isinstance(arg, ast.Name) and arg.id in sa_mod.assigns:
                arg = sa_mod.assigns[arg.id]
            if isinstance(arg, (ast.List, ast.Tuple)):
                ns_names += [_dotted(e) for e in arg.elts if _dotted(e)]
    for name in ns_names:
        if name in sa_mod.classes:
            classes.append((sa_mod, sa_mod.classes[name]))
        elif name in sa_mod.imports and sa_mod.imports[name][1]:
            m, c = _find_class(pkg_dir, sa_mod.imports[name][0], sa_mod.imports[name][1], cache)
            if c is not None:
                classes.append((m, c))
            else:
                res["errors"].append("namespace %s (from %s) not found" % (name, sa_mod.imports[name][0]))
        else:
            res["errors"].append("namespace %s not resolvable in server_args.py" % name)
    per_file = {}
    for mod, cls in classes:
        if mod.src.tree is None:
            e = mod.src.syntax_error
            res["errors"].append("%s:%s: %s (flags cannot be read)" % (mod.src.path, e.lineno, e.msg))
            continue
        for fmod, fcls, node in _class_fields(pkg_dir, mod, cls, cache):
            field = node.target.id
            if only_fields is not None and field not in only_fields:
                continue
            names, reason, action = _field_cli(fmod, node.annotation, field)
            if names is None:
                if reason == "no_cli=True":
                    res["skipped_fields"][field] = {"file": fmod.src.path, "line": node.lineno, "reason": reason}
                continue
            for opt in names:
                add(opt, fmod.src.path, node.lineno, "annotated-field", cls=fcls.name, action=action)
            per_file[fmod.src.path] = per_file.get(fmod.src.path, 0) + 1
    for f in sorted(per_file):
        res["sources"].append({"file": f, "style": "annotated-field", "count": per_file[f]})
    return res


def flag_status(flag, options):
    """defined: the exact option string is registered; accepted: argparse would take it (exact, or an
    unambiguous prefix, since sglang's parser keeps allow_abbrev)."""
    name = flag.split("=", 1)[0] if flag.startswith("--") else flag
    rec = {"flag": flag, "option": name, "defined": name in options, "accepted": False, "abbreviation_of": None,
           "defined_at": options.get(name)}
    if rec["defined"]:
        rec["accepted"] = True
    elif name.startswith("--"):
        cands = [o for o in options if o.startswith(name)]
        if len(cands) == 1:
            rec["accepted"] = True
            rec["abbreviation_of"] = cands[0]
        elif len(cands) > 1:
            rec["ambiguous"] = sorted(cands)[:20]
    return rec


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


# --------------------------------------------------------------------------------------------------
# static MRO of a worker class (AST across sglang modules)


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


# --------------------------------------------------------------------------------------------------
# 4. dynamic route


WORKER_MODULE_RE = re.compile(r"^sglang\.srt\.speculative\.(?:[A-Za-z0-9_]+\.)*[A-Za-z0-9_]*worker[A-Za-z0-9_]*$")
_RESOLVED_FIELDS = ("speculative_algorithm", "disable_overlap_schedule", "speculative_eagle_topk",
                    "speculative_num_steps", "speculative_num_draft_tokens", "max_running_requests",
                    "enable_multi_layer_eagle", "device")
_ACCELERATOR_VARS = ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES")


def _placeholder_finder():
    import importlib.abc
    import importlib.machinery
    import types

    class WorkerPlaceholderFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
        """Answers sglang.srt.speculative.*worker* imports with empty modules whose attributes are
        placeholder classes: create_worker's own branch picks the class, no worker code runs."""

        def __init__(self):
            self.requested = []

        def find_spec(self, name, path=None, target=None):
            if WORKER_MODULE_RE.match(name):
                return importlib.machinery.ModuleSpec(name, self, origin="dynspec-placeholder")
            return None

        def create_module(self, spec):
            mod = types.ModuleType(spec.name)
            finder = self

            def __getattr__(attr, _mod=spec.name):
                if attr.startswith("__"):
                    raise AttributeError(attr)
                finder.requested.append([_mod, attr])
                return type(attr, (), {"__module__": _mod, "__qualname__": attr, "_dynspec_placeholder": True})

            mod.__getattr__ = __getattr__
            return mod

        def exec_module(self, module):
            pass

    return WorkerPlaceholderFinder()


def _log_capture(records):
    import logging

    class Capture(logging.Handler):
        def emit(self, r):
            if len(records) >= _MAX_LIST:
                return
            try:
                msg = r.getMessage()
            except Exception as e:
                msg = "%r %% %r (%s)" % (r.msg, r.args, e)
            records.append({"logger": r.name, "level": r.levelname, "message": _clip(msg),
                            "file": r.pathname, "line": r.lineno})

    return Capture(logging.DEBUG)


def dynamic_route(args, pkg_dir, warnings_out):
    import contextlib
    import io
    import logging
    import warnings

    out = {"ok": False, "stage": "setup", "flags": None, "env_applied": {}, "log": [], "python_warnings": [],
           "resolved": {}, "worker": None, "error": None, "notes": []}
    flags = list(args["flags"])
    if args.get("default_device") and not any(f == "--device" or f.startswith("--device=") for f in flags):
        flags += ["--device", args["default_device"]]
        out["notes"].append("added --device %s: argument resolution on a host whose accelerators are hidden "
                            "needs an explicit device" % args["default_device"])
    out["flags"] = flags
    environ_snapshot = dict(os.environ)
    sg = logging.getLogger("sglang")
    cap = _log_capture(out["log"])
    saved_logger = (sg.level, sg.propagate)
    stderr_buf = io.StringIO()
    finder = None
    saved_workers = {}
    try:
        for k, v in (args.get("env") or {}).items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = str(v)
            out["env_applied"][k] = v
        if args.get("hide_accelerators", True):  # after the user's env: it must not un-hide a GPU
            for k in _ACCELERATOR_VARS:
                os.environ[k] = ""
            out["notes"].append("accelerators hidden (%s set to empty): no GPU is touched" % ", ".join(_ACCELERATOR_VARS))
        sg.addHandler(cap)
        sg.setLevel(logging.DEBUG)
        sg.propagate = False
        with warnings.catch_warnings(record=True) as wrec, contextlib.redirect_stderr(stderr_buf):
            warnings.simplefilter("always")
            try:
                out["stage"] = "import"
                import sglang

                out["imported_from"] = os.path.dirname(os.path.abspath(sglang.__file__))
                if pkg_dir and _realpath(out["imported_from"]) != _realpath(pkg_dir):
                    warnings_out.append("dynamic route imported sglang from %s, static route read %s"
                                        % (out["imported_from"], pkg_dir))
                from sglang.srt.server_args import prepare_server_args

                out["stage"] = "resolve"
                sa = prepare_server_args(flags)
                view = sa
                if hasattr(sa, "resolve_once"):  # 0.5.13+: raw record; resolution is a separate pipeline
                    sa.resolve_once()
                    from sglang.srt.arg_groups.overrides import resolving_view

                    view = resolving_view(sa)
                    out["resolution_api"] = "resolve_once + resolving_view"
                else:
                    out["resolution_api"] = "prepare_server_args (__post_init__)"
                fields = list(_RESOLVED_FIELDS)
                if args.get("flag"):
                    fields.append(args["flag"].lstrip("-").split("=", 1)[0].replace("-", "_"))
                missing = []
                for f in fields:
                    try:
                        out["resolved"][f] = _jsonable(getattr(view, f))
                    except AttributeError:
                        missing.append(f)
                    except Exception as e:
                        out["resolved"][f] = None
                        missing.append("%s (%s: %s)" % (f, type(e).__name__, e))
                out["missing_fields"] = missing

                out["stage"] = "worker"
                algo = out["resolved"].get("speculative_algorithm")
                if algo is None:
                    out["worker"] = None
                    out["notes"].append("no speculative algorithm after resolution: no draft worker")
                else:
                    from sglang.srt.speculative.spec_info import SpeculativeAlgorithm

                    alg = SpeculativeAlgorithm.from_string(algo)
                    if not hasattr(alg, "create_worker"):
                        out["worker"] = None
                        out["notes"].append("SpeculativeAlgorithm.create_worker does not exist in this sglang "
                                            "(< 0.5.8): the dispatch lives in the scheduler; use the tables")
                    else:
                        saved_workers = {k: sys.modules.pop(k) for k in list(sys.modules) if WORKER_MODULE_RE.match(k)}
                        finder = _placeholder_finder()
                        sys.meta_path.insert(0, finder)
                        try:
                            cls = alg.create_worker(sa)
                        finally:
                            sys.meta_path.remove(finder)
                            for k in [k for k in sys.modules if WORKER_MODULE_RE.match(k)]:
                                spec = getattr(sys.modules[k], "__spec__", None)
                                if spec is not None and spec.origin == "dynspec-placeholder":
                                    del sys.modules[k]
                            sys.modules.update(saved_workers)
                        out["worker"] = _worker_info(cls, finder, pkg_dir)
                out["stage"] = "done"
                out["ok"] = True
            except BaseException as e:  # ValueError from argument checks, SystemExit from argparse, ImportError
                if isinstance(e, KeyboardInterrupt):
                    raise
                out["error"] = {"stage": out["stage"], "type": type(e).__name__, "message": _clip(str(e)),
                                "traceback": _clip(traceback.format_exc(), 20000)}
                if isinstance(e, SystemExit):  # argparse: the usage text, then "prog: error: ..."
                    lines = stderr_buf.getvalue().strip().splitlines()
                    errs = [ln for ln in lines if ": error: " in ln]
                    out["error"]["exit_code"] = _jsonable(e.code)
                    out["error"]["message"] = _clip(errs[-1] if errs else (lines[-1] if lines else str(e)))
            for w in wrec[:_MAX_LIST]:
                out["python_warnings"].append({"category": w.category.__name__, "message": _clip(str(w.message)),
                                               "file": w.filename, "line": w.lineno})
    finally:
        sg.removeHandler(cap)
        sg.setLevel(saved_logger[0])
        sg.propagate = saved_logger[1]
        os.environ.clear()
        os.environ.update(environ_snapshot)
    out["stderr"] = _clip(stderr_buf.getvalue(), 20000)
    return out


def _worker_info(cls, finder, pkg_dir):
    import importlib.util

    mod, name = cls.__module__, getattr(cls, "__qualname__", cls.__name__)
    info = {"module": mod, "class": name, "placeholder": bool(getattr(cls, "_dynspec_placeholder", False)),
            "requested": finder.requested if finder else [], "file": None, "exists": None, "mro": None}
    try:
        spec = importlib.util.find_spec(mod)
        info["file"] = spec.origin if spec else None
    except Exception as e:
        info["find_spec_error"] = "%s: %s" % (type(e).__name__, e)
    if not info["placeholder"]:
        m = sys.modules.get(mod)
        info["file"] = getattr(m, "__file__", info["file"])
    info["exists"] = bool(info["file"] and os.path.isfile(info["file"]))
    if info["exists"] and mod.startswith("sglang."):
        sg_dir = info["file"][:len(info["file"]) - len(os.path.join(*mod.split(".")[1:])) - 3].rstrip(os.sep)
        if not os.path.isdir(sg_dir) or os.path.basename(sg_dir) != "sglang":
            sg_dir = pkg_dir
        try:
            info["mro"] = static_mro(sg_dir, mod, name)
        except Exception as e:
            info["mro_error"] = "%s: %s" % (type(e).__name__, e)
    return info


# --------------------------------------------------------------------------------------------------
# driver


_INPUT_TYPES = {
    "marker_literal": (str,), "marker_pattern": (str, type(None)), "flag": (str, type(None)),
    "patch_diff": (str, type(None)), "flags": (list,), "env": (dict,), "dynamic": (bool,),
    "sglang_path": (str, type(None)), "env_vars": (list,), "list_flags": (bool,),
    "hide_accelerators": (bool,), "default_device": (str, type(None)),
}


class InputError(ValueError):
    pass


def parse_input(argv):
    if len(argv) < 2:
        raise InputError("usage: python inspector.py '<json>' (or @file.json): no input given")
    raw = argv[1]
    if raw.startswith("@"):
        with open(raw[1:], encoding="utf-8") as fh:
            raw = fh.read()
    try:
        args = json.loads(raw)
    except ValueError as e:
        raise InputError("input is not valid JSON: %s" % e)
    if not isinstance(args, dict):
        raise InputError("input must be a JSON object, got %s" % type(args).__name__)
    full = {"marker_literal": None, "marker_pattern": None, "flag": None, "patch_diff": None, "flags": [],
            "env": {}, "dynamic": False, "sglang_path": None, "env_vars": ["SGLANG_ENABLE_SPEC_V2"],
            "list_flags": False, "hide_accelerators": True, "default_device": "cuda"}
    unknown = sorted(set(args) - set(full))
    full.update(args)
    for k, types_ in _INPUT_TYPES.items():
        if full[k] is None and k == "marker_literal":
            raise InputError("marker_literal is required")
        if not isinstance(full[k], types_):
            raise InputError("%s must be %s, got %s" % (k, "/".join(t.__name__ for t in types_), type(full[k]).__name__))
    if not full["marker_literal"]:
        raise InputError("marker_literal must not be empty")
    if not all(isinstance(x, str) for x in full["flags"]) or not all(isinstance(x, str) for x in full["env_vars"]):
        raise InputError("flags and env_vars must be lists of strings")
    return full, unknown


def inspect(args, result):
    warnings = result["warnings"]
    timings = result["timings"]
    if args["sglang_path"]:
        sys.path.insert(0, os.path.abspath(args["sglang_path"]))
    result["python"]["sys_path"] = list(sys.path)
    pattern = None
    if args["marker_pattern"]:
        try:
            pattern = re.compile(args["marker_pattern"])
        except re.error as e:
            warnings.append("marker_pattern does not compile: %s" % e)

    sg = locate_sglang(warnings)
    result["sglang"] = sg
    timings["locate"] = _rel_time()
    if not sg["found"]:
        result["error"] = "sglang is not importable on this interpreter (%s)" % sg.get("reason")
        if args["dynamic"]:
            result["dynamic"] = {"ok": False, "error": {"stage": "import", "type": "ModuleNotFoundError",
                                                        "message": "No module named 'sglang'"}}
        return False
    pkg_dir = sg["package_dir"]

    diff = {"given": False}
    if args["patch_diff"]:
        diff = analyse_diff(args["patch_diff"], pkg_dir)
    result["diff"] = diff
    timings["diff"] = _rel_time()
    diff_files = [f["installed_path"] for f in diff.get("files", []) if f.get("present")]

    marker, sizes = scan_marker(pkg_dir, args["marker_literal"], pattern, extra_files=diff_files)
    marker["literal"] = args["marker_literal"]
    marker["pattern"] = args["marker_pattern"]
    if not marker["hits"]:
        others = [i for i in sg.get("installs", []) if not i["active"]]
        elsewhere = []
        for inst in others:
            elsewhere += scan_marker(inst["package_dir"], args["marker_literal"], pattern)[0]["hits"]
        marker["hits_in_other_installs"] = elsewhere
    result["marker"] = marker
    timings["marker"] = _rel_time()

    srt_prefix = os.path.join(pkg_dir, "srt") + os.sep
    srt_sizes = dict((f, n) for f, n in sizes.items() if f.startswith(srt_prefix))
    modified = record_sizes(sg.get("dist_info"), pkg_dir, srt_sizes) if not sg.get("editable") else {
        "checked": False, "scope": "sglang/srt", "changed": [], "added": [], "missing": []}
    result["sglang"]["modified_since_install"] = dict(
        (k, v[:_MAX_LIST] if isinstance(v, list) else v) for k, v in modified.items())
    timings["record"] = _rel_time()

    flags = collect_flags(pkg_dir, warnings)
    options = flags["options"]
    fl = {"count": len(options), "sources": flags["sources"], "errors": flags["errors"],
          "no_cli_fields": flags["skipped_fields"], "feature_flag": None, "user_flags": []}
    if args["flag"]:
        fl["feature_flag"] = flag_status(args["flag"], options)
    for f in args["flags"]:
        if f.startswith("-") and not re.match(r"^-\d", f):
            fl["user_flags"].append(flag_status(f, options))
    if args["list_flags"]:
        fl["options"] = sorted(options)
    result["flags"] = fl
    result["env_defaults"] = env_defaults(pkg_dir, args["env_vars"])
    timings["flags"] = _rel_time()

    # every file the patch touched: marker files, diff files, files changed since install, the flag's home
    roles = {}

    def role(path, r):
        if path:
            roles.setdefault(os.path.abspath(path), [])
            if r not in roles[os.path.abspath(path)]:
                roles[os.path.abspath(path)].append(r)

    for h in marker["hits"]:
        role(h["file"], "marker")
    for f in diff_files:
        if f.endswith(".py"):
            role(f, "diff")
    for f in (modified.get("changed", []) + modified.get("added", []))[:50]:
        role(f, "modified-since-install")
    ff = fl["feature_flag"]
    if ff and ff.get("defined_at"):
        role(ff["defined_at"]["file"], "flag")
    files = []
    for path in sorted(roles):
        rec = compile_report(path)
        rec["roles"] = roles[path]
        files.append(rec)
    result["files"] = files
    timings["compile"] = _rel_time()

    if args["dynamic"]:
        result["dynamic"] = dynamic_route(args, pkg_dir, warnings)
        timings["dynamic"] = _rel_time()
    return True


def _emit(doc, fd):
    data = (json.dumps(doc, sort_keys=False, default=repr) + "\n").encode("utf-8")
    if fd is None:
        sys.__stdout__.write(data.decode("utf-8"))
        sys.__stdout__.flush()
        return
    while data:
        n = os.write(fd, data)
        data = data[n:]


def main(argv=None):
    argv = sys.argv if argv is None else argv
    # stdout belongs to our single JSON document: anything else written to fd 1 (sglang prints,
    # C extensions) goes to stderr instead.
    out_fd = None
    try:
        sys.stdout.flush()
        out_fd = os.dup(1)
        os.dup2(2, 1)
    except Exception:
        out_fd = None
    if sys.path and sys.path[0] and os.path.abspath(sys.path[0]) == os.path.dirname(os.path.abspath(__file__)):
        sys.path[0] = ""  # run as a file: look up modules like `python -m sglang...` from the cwd would
    result = {
        "schema": SCHEMA, "ok": False, "error": None, "exception_traceback": None, "warnings": [],
        "python": {"executable": sys.executable, "version": "%d.%d.%d" % sys.version_info[:3],
                   "implementation": sys.implementation.name,
                   "cache_tag": getattr(sys.implementation, "cache_tag", None), "prefix": sys.prefix,
                   "base_prefix": getattr(sys, "base_prefix", sys.prefix),
                   "in_venv": getattr(sys, "base_prefix", sys.prefix) != sys.prefix, "cwd": os.getcwd()},
        "input": None, "sglang": None, "marker": None, "diff": None, "files": [], "flags": None,
        "env_defaults": None, "dynamic": None, "timings": {},
    }
    try:
        args, unknown = parse_input(argv)
        if unknown:
            result["warnings"].append("unknown input keys ignored: %s" % ", ".join(unknown))
        result["input"] = {k: v for k, v in args.items() if k != "patch_diff"}
        result["input"]["patch_diff_chars"] = len(args["patch_diff"] or "")
        result["ok"] = bool(inspect(args, result))
    except BaseException as e:
        if isinstance(e, KeyboardInterrupt):
            result["error"] = "interrupted"
        else:
            result["error"] = "%s: %s" % (type(e).__name__, e) if not isinstance(e, InputError) else str(e)
        result["exception_traceback"] = traceback.format_exc()
        result["ok"] = False
    result["timings"]["total"] = _rel_time()
    try:
        sys.stdout.flush()
    except Exception:
        pass
    _emit(result, out_fd)
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    code = main()
    # The JSON is out; skip the interpreter's teardown of a few hundred MB of ASTs (~0.1 s). Nothing
    # of the target's is left to flush: sglang is never imported on the static route, and on the
    # dynamic route its state is throw-away.
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(code)
