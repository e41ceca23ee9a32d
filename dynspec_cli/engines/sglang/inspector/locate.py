"""Which sglang this interpreter imports: installs, versions, editable evidence, RECORD sizes."""
import ast
import json
import os
import re
import sys

from .common import _clip, _read_bytes, _realpath


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


def record_hashes(dist_dir, pkg_dir, editable):
    """The package's .py files whose sha256 differs from the dist-info RECORD (the released wheel's),
    or that RECORD lists and are gone: "you changed these files", without a diff. Only .py files
    RECORD lists are hashed (~2000 files, a fraction of a second); an editable install's RECORD does
    not list its sources, so it says so instead of guessing."""
    import base64
    import hashlib
    import time

    t0 = time.perf_counter()
    out = {"checked": False, "reason": None, "record": None, "files_hashed": 0, "changed": [], "missing": [],
           "seconds": None}
    if editable:
        out["reason"] = "an editable install: its RECORD does not list the sources, so what changed is not known"
        return out
    record = os.path.join(dist_dir, "RECORD") if dist_dir else None
    if not record or not os.path.isfile(record):
        out["reason"] = "no dist-info RECORD beside the imported package (not installed by pip from a wheel)"
        return out
    out["record"] = record
    entry = os.path.dirname(dist_dir)
    name = os.path.basename(pkg_dir.rstrip(os.sep))
    if _realpath(os.path.join(entry, name)) != _realpath(pkg_dir):
        out["reason"] = "the RECORD at %s is not the imported package's" % record
        return out
    try:
        text = _read_bytes(record).decode("utf-8", "replace")
    except OSError as e:
        out["reason"] = "RECORD unreadable: %s" % e
        return out
    import csv

    for row in csv.reader(text.splitlines()):
        if len(row) < 2 or not row[0].startswith(name + "/") or not row[0].endswith(".py"):
            continue
        algo, _, want = row[1].partition("=")
        if algo != "sha256" or not want:
            continue
        path = os.path.join(entry, *row[0].split("/"))
        try:
            data = _read_bytes(path)
        except OSError:
            out["missing"].append(path)
            continue
        out["files_hashed"] += 1
        got = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode("ascii")
        if got != want:
            out["changed"].append({"path": path, "sha256": hashlib.sha256(data).hexdigest()})
    out["checked"] = out["files_hashed"] > 0
    if not out["checked"]:
        out["reason"] = "RECORD lists no .py file of %s with a sha256" % name
    out["changed"].sort(key=lambda c: c["path"])
    out["missing"].sort()
    out["seconds"] = round(time.perf_counter() - t0, 4)
    return out
