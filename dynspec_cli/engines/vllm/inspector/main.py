"""The driver: read the input (argv[1]), find vllm, scan for the marker, read the classes' MROs,
the plugin and the custom proposer (plugins.py), vLLM's own resolution when asked (dynamic.py);
print one JSON document whatever happens."""
import json
import os
import re
import sys

from .common import SCHEMA, pattern_of, shared, static_mro, worded
from .dynamic import resolve
from .plugins import inspect_custom_class, inspect_plugin


def locate_vllm():
    spec = shared.find_spec("vllm")
    if spec is None or not spec.submodule_search_locations:
        return None
    return list(spec.submodule_search_locations)[0]


def version_of(pkg_dir):
    """vllm's version from its files: _version.py (setuptools-scm), then the dist-info METADATA."""
    text = shared.read_text(os.path.join(pkg_dir, "_version.py"))
    if text:
        m = re.search(r"""^__version__\s*=\s*(?:version\s*=\s*)?['"]([^'"]+)['"]""", text, re.M)
        if m:
            return m.group(1), "vllm/_version.py"
    site = os.path.dirname(pkg_dir)
    try:
        names = sorted(os.listdir(site))
    except OSError:
        names = []
    for n in names:
        if n.startswith("vllm-") and n.endswith(".dist-info"):
            meta = shared.read_text(os.path.join(site, n, "METADATA")) or ""
            m = re.search(r"^Version:\s*(\S+)", meta, re.M)
            if m:
                return m.group(1), n + "/METADATA"
    return None, None


def scan_marker(pkg_dir, literal, pattern):
    """Every .py of the vllm package (the shared scan: string constants and f-strings, a literal split
    by implicit concatenation too), worded as this document's hits."""
    scan, _sizes = shared.scan_marker(pkg_dir, literal, pattern_of(pattern))
    return {"literal": literal, "files_scanned": scan["files_scanned"],
            "hits": worded(scan["hits"], os.path.dirname(pkg_dir))}, scan["hits"]


def inspect(args):
    out = {"schema": SCHEMA, "ok": True, "error": None,
           "python": {"executable": sys.executable, "version": ".".join(map(str, sys.version_info[:3]))},
           # what was asked, without the diff's text (a 100 KB diff would double the document)
           "input": dict({k: v for k, v in args.items() if k != "patch_diff"},
                         patch_diff_chars=len(args.get("patch_diff") or ""))}
    if args.get("patch_diff") is not None and not isinstance(args["patch_diff"], str):
        raise ValueError("patch_diff must be a string (a unified diff)")
    literal = args.get("marker_literal")
    if not isinstance(literal, str) or not literal:
        raise ValueError("marker_literal (a non-empty string) is required")
    if args.get("vllm_path"):
        sys.path.insert(0, args["vllm_path"])
    names = args.get("env_names") or ["VLLM_USE_V2_MODEL_RUNNER"]
    out["env"] = {n: os.environ.get(n) for n in names}
    pkg = locate_vllm()
    if pkg is None:
        out["vllm"] = {"found": False, "reason": "no module named vllm on this interpreter's sys.path"}
        return out
    version, source = version_of(pkg)
    out["vllm"] = {"found": True, "package_dir": pkg, "version": version, "version_source": source}
    t = shared.find_spec("triton")
    out["triton"] = {"found": t is not None, "origin": getattr(t, "origin", None) if t else None}
    out["marker"], raw_hits = scan_marker(pkg, literal, args.get("marker_pattern"))
    out["diff"] = {"given": False}
    if args.get("patch_diff"):  # the user's --patch on this install: each hunk's scopes and roles (shared analysis)
        # (raw_hits: the scan's absolute paths, which mark_roles matches against the installed files)
        out["diff"] = shared.mark_roles(shared.analyse_diff(args["patch_diff"], pkg, "vllm"),
                                        [h for h in raw_hits if h["kind"] in ("str", "fstring")])
    site = os.path.dirname(pkg)
    classes = {}
    for c in args.get("classes") or []:
        mod, name = c.get("module"), c.get("class")
        if not mod or not name:
            continue
        path, line, mro = static_mro(site, mod, name)
        classes[f"{mod}:{name}"] = {"present": bool(mro), "file": path if mro else None, "line": line, "mro": mro}
    out["classes"] = classes
    rx = pattern_of(args.get("marker_pattern"))
    if args.get("plugin"):
        out["plugin"] = inspect_plugin(args["plugin"], literal, rx, pkg)
    if args.get("custom_class"):
        out["custom_class"] = inspect_custom_class(args["custom_class"], literal, rx, site)
    out["dynamic"] = resolve(args.get("serve_flags") or []) if args.get("dynamic") else None
    return out


def main(argv):
    try:
        raw = argv[1] if len(argv) > 1 else None
        if raw is None:
            raise ValueError("usage: python INSPECTOR '<json>' (or @file.json)")
        if raw.startswith("@"):
            raw = shared.read_text(raw[1:]) or ""
        args = json.loads(raw)
        if not isinstance(args, dict):
            raise ValueError("the input must be a JSON object")
        doc = inspect(args)
    except Exception as e:  # the caller always gets JSON
        doc = {"schema": SCHEMA, "ok": False, "error": f"{type(e).__name__}: {e}"}
    sys.stdout.write(json.dumps(doc) + "\n")
    return 0 if doc.get("ok") else 1


def run():
    """The bundle's entry (inject.program): the input is argv[1]."""
    sys.exit(main(sys.argv))
