"""The dynamic route: import sglang and run its own argument resolution and worker choice."""
import os
import re
import sys
import traceback

from .common import _MAX_LIST, _clip, _jsonable, _realpath
from .common import shared

static_mro = shared.static_mro


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
