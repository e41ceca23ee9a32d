"""The driver: read the input from stdin, run each concern, print one JSON document whatever happens."""
import json
import os
import re
import sys
import traceback

from .common import SCHEMA, _MAX_LIST, _clip, _rel_time, shared
from .locate import locate_sglang, record_hashes, record_sizes
from .bytecode import compile_report
from .diff import analyse_diff, mark_roles
from .flags import collect_flags, flag_status, value_spec
from .envvars import env_defaults
from .dynamic import dynamic_route
from .draft import read_draft
from .plugins import plugin_report


_INPUT_TYPES = {
    "marker_literal": (str,), "marker_pattern": (str, type(None)), "flag": (str, type(None)),
    "patch_diff": (str, type(None)), "flags": (list,), "env": (dict,), "dynamic": (bool,),
    "sglang_path": (str, type(None)), "env_vars": (list,), "list_flags": (bool,),
    "hide_accelerators": (bool,), "default_device": (str, type(None)), "plugin": (dict, type(None)),
}
_PLUGIN_KEYS = ("entry_point", "group", "allow_env", "target", "framework_module", "processes")


class InputError(ValueError):
    pass


def parse_input(raw):
    """The input JSON object (bytes, as read from stdin) with its defaults filled in."""
    if not raw.strip():
        raise InputError("no input given: the inspector reads one JSON object from stdin")
    try:
        args = json.loads(raw.decode("utf-8") if isinstance(raw, bytes) else raw)
    except ValueError as e:
        raise InputError("input is not valid JSON: %s" % e)
    if not isinstance(args, dict):
        raise InputError("input must be a JSON object, got %s" % type(args).__name__)
    full = {"marker_literal": None, "marker_pattern": None, "flag": None, "patch_diff": None, "flags": [],
            "env": {}, "dynamic": False, "sglang_path": None, "env_vars": ["SGLANG_ENABLE_SPEC_V2"],
            "list_flags": False, "hide_accelerators": True, "default_device": "cuda", "plugin": None}
    unknown = sorted(set(args) - set(full))
    full.update(args)
    for k, types_ in _INPUT_TYPES.items():
        if full[k] is None and k == "marker_literal":
            raise InputError("marker_literal is required")
        if not isinstance(full[k], types_):
            raise InputError("%s must be %s, got %s" % (k, "/".join(t.__name__ for t in types_), type(full[k]).__name__))
    missing = [k for k in _PLUGIN_KEYS if full["plugin"] is not None and k not in full["plugin"]]
    if missing:
        raise InputError("plugin lacks %s" % ", ".join(missing))
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
    result["draft"] = read_draft(args["flags"])
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

    marker, sizes = shared.scan_marker(os.path.join(pkg_dir, "srt"), args["marker_literal"], pattern, extra_files=diff_files)
    marker["literal"] = args["marker_literal"]
    marker["pattern"] = args["marker_pattern"]
    if not marker["hits"]:
        others = [i for i in sg.get("installs", []) if not i["active"]]
        elsewhere = []
        for inst in others:
            elsewhere += shared.scan_marker(os.path.join(inst["package_dir"], "srt"), args["marker_literal"], pattern)[0]["hits"]
        marker["hits_in_other_installs"] = elsewhere
    result["marker"] = marker
    if diff.get("given"):
        mark_roles(diff, marker["hits"])
    timings["marker"] = _rel_time()
    if args["plugin"]:
        result["plugin"] = plugin_report(args["plugin"], pkg_dir, args["marker_literal"], pattern)
        timings["plugin"] = _rel_time()

    srt_prefix = os.path.join(pkg_dir, "srt") + os.sep
    srt_sizes = dict((f, n) for f, n in sizes.items() if f.startswith(srt_prefix))
    modified = record_sizes(sg.get("dist_info"), pkg_dir, srt_sizes) if not sg.get("editable") else {
        "checked": False, "scope": "sglang/srt", "changed": [], "added": [], "missing": []}
    result["sglang"]["modified_since_install"] = dict(
        (k, v[:_MAX_LIST] if isinstance(v, list) else v) for k, v in modified.items())
    result["sglang"]["changed_files"] = record_hashes(sg.get("dist_info"), pkg_dir, sg.get("editable"))
    timings["record"] = _rel_time()

    flags = collect_flags(pkg_dir, warnings)
    options = flags["options"]
    fl = {"count": len(options), "sources": flags["sources"], "errors": flags["errors"],
          "no_cli_fields": flags["skipped_fields"], "feature_flag": None, "user_flags": []}
    if args["flag"]:
        fl["feature_flag"] = flag_status(args["flag"], options)
    for f in args["flags"]:
        if f.startswith("-") and not re.match(r"^-\d", f):
            rec = flag_status(f, options)
            if rec["accepted"]:  # what its value must look like (type=, choices=, nargs=; action)
                rec["values"] = value_spec(flags, rec["abbreviation_of"] or rec["option"])
            fl["user_flags"].append(rec)
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


def main(raw=None):
    """Inspect with the JSON input `raw` (default: all of stdin); print the document; exit status."""
    # stdout belongs to our single JSON document: anything else written to fd 1 (sglang prints,
    # C extensions) goes to stderr instead.
    out_fd = None
    try:
        sys.stdout.flush()
        out_fd = os.dup(1)
        os.dup2(2, 1)
    except Exception:
        out_fd = None
    result = {
        "schema": SCHEMA, "ok": False, "error": None, "exception_traceback": None, "warnings": [],
        "python": {"executable": sys.executable, "version": "%d.%d.%d" % sys.version_info[:3],
                   "implementation": sys.implementation.name,
                   "cache_tag": getattr(sys.implementation, "cache_tag", None), "prefix": sys.prefix,
                   "base_prefix": getattr(sys, "base_prefix", sys.prefix),
                   "in_venv": getattr(sys, "base_prefix", sys.prefix) != sys.prefix, "cwd": os.getcwd()},
        "input": None, "sglang": None, "marker": None, "diff": None, "files": [], "flags": None,
        "env_defaults": None, "environ": None, "dynamic": None, "plugin": None, "timings": {},
    }
    try:
        args, unknown = parse_input(sys.stdin.buffer.read() if raw is None else raw)
        if unknown:
            result["warnings"].append("unknown input keys ignored: %s" % ", ".join(unknown))
        result["input"] = {k: v for k, v in args.items() if k != "patch_diff"}
        # env values may be secrets (HF_TOKEN): the echo keeps which names were set, not their values
        result["input"]["env"] = dict((k, None if v is None else "<set>") for k, v in args["env"].items())
        result["input"]["patch_diff_chars"] = len(args["patch_diff"] or "")
        # what the server started from this environment will see: the host's own (a local shell,
        # an SSH login) with dynspec's overrides applied by the bootstrap
        result["environ"] = dict((n, _clip(os.environ[n], 200) if n in os.environ else None) for n in args["env_vars"])
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


def run():
    """main(), then exit without the interpreter's teardown."""
    code = main()
    # The JSON is out; skip the interpreter's teardown of a few hundred MB of ASTs (~0.1 s). Nothing
    # of the target's is left to flush: sglang is never imported on the static route, and on the
    # dynamic route its state is throw-away.
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(code)
