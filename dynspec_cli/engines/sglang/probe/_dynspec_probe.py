"""dynspec in-server probe: which of the patched code a running sglang server really executes.

Runs inside every Python process of someone else's server (started by the ``sitecustomize.py`` beside
it when DYNSPEC_PROBE is set), so: stdlib only, Python 3.8+, nothing from dynspec, and it must never
change what the process does. Every error of its own is caught and reported as an ``error`` line;
exceptions of the server pass through untouched; exit code and output are unchanged apart from
probe lines.

Output: lines ``DYNSPEC-PROBE {json}`` on fd 2 (the server log), each written with one
``os.write`` of a complete line under PIPE_BUF bytes, so lines of concurrent processes never
interleave. Schema ``"v": 2``; every line has ``v, event, ts, pid, ppid, role`` (+ ``rank`` once
known). Events: ``start, entry, sglang, server_args, module, worker, hit, hunk, coverage, error``.
Input: the JSON config in DYNSPEC_PROBE. Both are documented field by field in README.md here.

How it stays cheap:
- this module is the small core every process compiles at start-up: configuration, the import hook,
  signals, the start line. The reporting (_dynspec_probe_events.py) is loaded on first need (a hooked
  module executed, exit, a signal), the instrumentation (_dynspec_probe_code.py) only by a process that
  imports a patched or a speculative worker module;
- no ``json`` (it imports ``re``): the C accelerator ``_json`` parses and writes the lines;
- one ``sys.meta_path`` finder that answers None at once for every module except the handful it
  cares about; for those it wraps the loader's ``exec_module`` to look at the module once executed;
- Python >= 3.12: ``sys.monitoring`` local events on the patched code objects only (PY_START for
  calls, LINE for patch lines). Every LINE location returns DISABLE at its first event; PY_START
  counts calls exactly up to ``count_limit`` and then returns DISABLE (reported as ">=N"). After
  that the patched code runs without any probe callback;
- Python 3.10/3.11 (or no free monitoring tool id): the patched function's own ``__code__`` is
  swapped for a compile of the same source with probe calls in it (same file, names and line
  numbers: tracebacks unchanged), and swapped back once there is nothing left to count or see. A
  plain wrapper is the last resort (no source, a function defined inside a function).
Nothing is wrapped on sglang's launch path: a wrapper would add its frame to every traceback that
passes through it.
"""
import os
import sys
import time

V = 2  # 2: targets may carry a hunk id and role; "hunk" lines (first execution of a hunk's lines)
CONFIG_VERSIONS = (1, 2)  # a v1 config (no hunk fields) means the same under v2
ENV = "DYNSPEC_PROBE"
PREFIX = b"DYNSPEC-PROBE "
MAX_LINE = 3800  # < PIPE_BUF (4096): a write of one line to a pipe is atomic
COUNT_LIMIT = 1000
MAX_ERRORS = 25
_SERVER_ARGS_FIELDS = (
    "model_path", "device", "tp_size", "dp_size", "pp_size", "ep_size", "enable_dp_attention",
    "disable_overlap_schedule", "enable_multi_layer_eagle", "attention_backend", "disable_cuda_graph",
)
_RANK_ARGS = (("tp", "tp_rank"), ("dp", "dp_rank"), ("pp", "pp_rank"), ("ep", "moe_ep_rank"), ("ep", "ep_rank"),
              ("attn_cp", "attn_cp_rank"), ("moe_dp", "moe_dp_rank"))

_probe = None


def install(raw=None):
    """Start the probe in this process (once). Returns the Probe, or None when DYNSPEC_PROBE is unset."""
    global _probe
    if _probe is not None:
        return _probe
    if raw is None:
        raw = os.environ.get(ENV)
    if not raw:
        return None
    t0 = time.perf_counter()
    p = _probe = Probe()
    ok = True
    try:
        p.configure(raw)
    except Exception as e:
        ok = False
        p.error("config", e)
    try:
        p.fault("start")
        p.detect_start()
        if ok:
            p.install_hooks()
    except Exception as e:
        ok = False
        p.error("start", e)
    p.emit_start(ok, (time.perf_counter() - t0) * 1000.0)
    return p


def report_coverage(reason="request"):
    """Print a coverage snapshot now (for code running inside the server, e.g. a debugger)."""
    if _probe is not None:
        _probe.report_coverage(reason)


# --------------------------------------------------------------------------------------------------
# small helpers


def _json_codec():
    """(loads, dumps) on the C accelerator `_json` alone: `json` imports `re`, which is most of the
    probe's start-up time in a process that never imported it. Falls back to `json` if `_json` is
    missing or encodes differently (checked once)."""
    try:
        import _json

        inf = float("inf")

        class _Ctx(object):
            strict = True
            object_hook = None
            object_pairs_hook = None
            parse_float = float
            parse_int = int
            parse_constant = {"-Infinity": -inf, "Infinity": inf, "NaN": inf - inf}.__getitem__

        scan = _json.make_scanner(_Ctx())

        def loads(text):
            text = text.strip(" \t\n\r")
            try:
                obj, end = scan(text, 0)
            except StopIteration:
                raise ValueError("DYNSPEC_PROBE is not JSON")
            if end != len(text):
                raise ValueError("DYNSPEC_PROBE: extra data after the JSON value at %d" % end)
            return obj

        def dumps(obj):
            enc = _json.make_encoder({}, _plain, _json.encode_basestring_ascii, None, ":", ",", False, False, True)
            return "".join(enc(obj, 0))

        if dumps({"a": [1, "\u00e9\n", 1.5, None, True]}) != '{"a":[1,"\\u00e9\\n",1.5,null,true]}':
            raise ValueError("_json encodes differently")
        if loads(' {"a": [1, "x", 2.5, null, false]} ') != {"a": [1, "x", 2.5, None, False]}:
            raise ValueError("_json decodes differently")
        return loads, dumps
    except Exception:
        import json

        return json.loads, lambda obj: json.dumps(obj, separators=(",", ":"), ensure_ascii=True, default=_plain)


def _realpath(p):
    try:
        return os.path.realpath(p)
    except Exception:
        return p


def _plain(v, depth=0):
    if v is None or isinstance(v, (bool, int, float)):
        return v
    if isinstance(v, str):
        return v if len(v) <= 300 else v[:300] + "..."
    if depth < 2 and isinstance(v, (list, tuple, set, frozenset)):
        return [_plain(x, depth + 1) for x in list(v)[:20]]
    if depth < 2 and isinstance(v, dict):
        return {str(k): _plain(x, depth + 1) for k, x in list(v.items())[:20]}
    name = getattr(type(v), "__name__", "")
    enum_name = getattr(v, "name", None)
    if isinstance(enum_name, str) and type(v).__module__ != "builtins":
        return enum_name  # enums: the member name
    try:
        r = repr(v)
    except Exception:
        r = "<%s>" % name
    return r if len(r) <= 300 else r[:300] + "..."


_SECRET_FLAGS = ("--api-key", "--admin-api-key", "--hf-token", "--token")


def _secret_flag(word):
    """--api-key and any --NAME that names a secret as dynspec's run/secrets.py does (*_TOKEN,
    *_KEY, *_PASS, *PASSWORD*, *SECRET*, *CREDENTIALS*): its value never goes into the log."""
    if not word.startswith("--"):
        return False
    name = word[2:].upper().replace("-", "_")
    return (word in _SECRET_FLAGS or name.endswith(("_TOKEN", "_KEY", "_PASS"))
            or any(p in name for p in ("PASSWORD", "SECRET", "CREDENTIALS")))


def _redacted(argv):
    """argv with the values of secret flags (`--api-key V`, `--api-key=V`) as ***."""
    out, hide = [], False
    for a in argv:
        a = str(a)
        flag, eq, _ = a.partition("=")
        if hide:
            out.append("***")
            hide = False
        elif _secret_flag(flag):
            out.append(flag + "=***" if eq else a)
            hide = not eq
        else:
            out.append(a)
    return out


def _parse_argv(argv):
    """(kind, value) of how the interpreter was started: module / command / script / interactive."""
    args = list(argv[1:])
    i = 0
    while i < len(args):
        a = args[i]
        if a == "-m":
            return "module", args[i + 1] if i + 1 < len(args) else ""
        if a == "-c":
            return "command", args[i + 1] if i + 1 < len(args) else ""
        if a in ("-W", "-X", "--check-hash-based-pycs"):
            i += 2
            continue
        if a.startswith("-") and a != "-":
            if a[1:2] != "-":  # combined short options: "-Bm" is -B -m, "-c..." code attached
                for j, ch in enumerate(a[1:], 1):
                    if ch in "mc":
                        rest = a[j + 1:] or (args[i + 1] if i + 1 < len(args) else "")
                        return ("module" if ch == "m" else "command"), rest
                    if ch in "WX":
                        break
            i += 1
            continue
        return "script", a
    return "interactive", ""


# --------------------------------------------------------------------------------------------------


class Target(object):
    """One patched function (file, class, function, patch lines) and what this process saw of it."""

    def __init__(self, index, raw, package):
        if not isinstance(raw, dict):
            raise ValueError("target %d is not an object" % index)
        self.index = index
        self.file = str(raw["file"])
        self.cls = raw.get("class") or None
        self.function = raw.get("function") or None
        self.lines = sorted({int(x) for x in (raw.get("lines") or ())})
        # one hunk of the user's diff (preflight's hunks): its id and role (behaviour / marker / ...);
        # None for a target of the marker's method alone (v1 configs)
        self.hunk = raw.get("hunk")
        self.hunk_role = raw.get("role") or None
        self.hunk_seen = False
        self.is_abs = os.path.isabs(self.file)
        self.modules, self.rel = _module_names(self.file, package)
        # what this process saw
        self.status = "not-loaded"  # instrumented | other-file | unresolved | error
        self.detail = None
        self.loaded_file = None
        self.mode = None
        self.calls = 0
        self.counted = True  # False: calls not observable (nested function in wrap mode)
        self.first_ts = None
        self.executed = {}
        self.executable = set()
        self.header = set()
        self.swap = None
        self.resolved = None
        self.traced_calls = 0

    def matches_file(self, path):
        if not path:
            return False
        if self.is_abs:
            return _realpath(path) == _realpath(self.file)
        suffix = "/" + self.rel
        p = path.replace(os.sep, "/")
        return p.endswith(suffix) or _realpath(path).replace(os.sep, "/").endswith(suffix)

    def qualname(self):
        fn = self.resolved or self.function or "?"
        return "%s.%s" % (self.cls, fn) if self.cls else fn


def _module_names(path, package):
    """Candidate module names for a target file, and its path relative to the import root."""
    p = path.replace(os.sep, "/")
    names, rels = [], []

    def add(rel):
        rel = rel.lstrip("/")
        if rel.startswith("./"):
            rel = rel[2:]
        mod = rel[:-3] if rel.endswith(".py") else rel
        if mod.endswith("/__init__"):
            mod = mod[: -len("/__init__")]
        name = mod.replace("/", ".")
        if name and name not in names:
            names.append(name)
            rels.append(rel)

    if not os.path.isabs(path):
        add(p)
    else:
        d, base = os.path.split(path)
        parts = [] if base == "__init__.py" else [base]
        while os.path.isfile(os.path.join(d, "__init__.py")):
            d, pkg = os.path.split(d)
            parts.insert(0, pkg)
            if not pkg:
                break
        if parts:  # a spurious name is harmless: an absolute target must also match by realpath
            add("/".join(parts + (["__init__.py"] if base == "__init__.py" else [])))
        marker = "/%s/" % package
        if marker in p:
            add(p[p.rindex(marker) + 1:])
    return names, (rels[0] if rels else os.path.basename(p))


class _Finder(object):
    """sys.meta_path entry: None for every module but the few the probe looks at once executed."""

    def __init__(self, probe):
        self.probe = probe
        self.names = probe.module_names()
        self.peek_points = probe.peek_points()
        self.worker_prefix = probe.worker_prefix
        self.busy = set()

    def find_spec(self, fullname, path=None, target=None):
        if fullname not in self.names and not (
                fullname.startswith(self.worker_prefix) and "worker" in fullname[len(self.worker_prefix):]):
            return None
        if fullname in self.busy:
            return None
        if fullname in self.peek_points:
            self.probe.peek_server_args("import " + fullname)
        self.busy.add(fullname)
        try:
            spec = self._real_spec(fullname, path, target)  # errors of other finders propagate as without us
        finally:
            self.busy.discard(fullname)
        if spec is None:
            return None
        try:
            self.probe.fault("import-hook")
            self._wrap_loader(spec)
        except Exception as e:
            self.probe.error("import-hook", e)
        return spec

    def _real_spec(self, fullname, path, target):
        for finder in list(sys.meta_path):
            if finder is self:
                continue
            find_spec = getattr(finder, "find_spec", None)
            if find_spec is None:
                return None  # a legacy finder: let the import system handle it without us
            spec = find_spec(fullname, path, target)
            if spec is not None:
                return spec
        return None

    def _wrap_loader(self, spec):
        loader = spec.loader
        real_exec = getattr(loader, "exec_module", None)
        if real_exec is None:
            return
        probe = self.probe

        def exec_module(module):
            ok = False
            try:
                real_exec(module)
                ok = True
            finally:
                try:
                    if loader.__dict__.get("exec_module") is exec_module:
                        del loader.exec_module
                except Exception:
                    pass
                try:
                    probe.on_module(module, ok)
                except Exception as e:
                    probe.error("module", e)

        exec_module.__code__ = _as_importlib(exec_module.__code__)
        loader.exec_module = exec_module  # instance attribute: the loader object (and its type) stay


def _as_importlib(code):
    """The same code under importlib's file name. Python trims importlib frames from the traceback of
    a failed import (remove_importlib_frames in import.c); the probe's loader and finder frames sit
    inside those chunks, so with this name they are trimmed too and an import error (a syntax error
    in the patched file, a missing dependency) reads exactly as without the probe."""
    try:
        return code.replace(co_filename="<frozen importlib._bootstrap_external>")
    except Exception:
        return code


_Finder.find_spec.__code__ = _as_importlib(_Finder.find_spec.__code__)
_Finder._real_spec.__code__ = _as_importlib(_Finder._real_spec.__code__)


class Probe(object):
    def __init__(self):
        self.pid = os.getpid()
        self.ppid = os.getppid()
        self.role = "other"
        self.role_source = None
        self.rank = None
        self.started_as = None
        self.targets = []
        self.cfg = {}
        self.faults = set()
        self.errors = 0
        self.package = "sglang"
        self.worker_prefix = "sglang.srt.speculative."
        self.count_limit = COUNT_LIMIT
        self.line_hits = True
        self.use_monitoring = True
        self.server_args_extra = ()
        self.mode = None
        # state of the instrumentation (_dynspec_probe_code)
        self.tool = None
        self.start_map = {}  # code -> [Target] counted on PY_START (monitoring) or on call events (tracer)
        self.line_map = {}  # code -> [(Target, patch lines in this code)]
        self.groups = {}
        self.hashes = {}
        self.swaps = {}
        self.asts = {}
        self.reported = set()
        self.worker_seen = False
        self.code_loaded = False
        self.events_loaded = False
        self.events_failed = False
        self.trigger_thread = None
        self._json = None

    # ---------------------------------------------------------------------------------- output

    def emit(self, event, **fields):
        try:
            rec = {"v": V, "event": event, "ts": round(time.time(), 6), "pid": os.getpid(), "ppid": os.getppid(),
                   "role": self.role}
            if self.rank:
                rec["rank"] = self.rank
            rec.update(fields)
            data = self._dumps(rec)
            if len(data) > MAX_LINE:
                data = self._shrink(rec)
            line = PREFIX + data + b"\n"
            while line:
                n = os.write(2, line)
                line = line[n:]
        except Exception:
            pass  # nowhere left to report to

    def _dumps(self, rec):
        if self._json is None:
            self._json = _json_codec()
        return self._json[1](rec).encode("ascii")

    def error(self, where, exc):
        self.errors += 1
        if self.errors > MAX_ERRORS:
            return
        try:
            import traceback

            tb = traceback.format_exc()
            tb = tb if len(tb) <= 1500 else "..." + tb[-1500:]
            self.emit("error", where=where, error="%s: %s" % (type(exc).__name__, str(exc)[:500]), traceback=tb)
        except Exception:
            pass

    def fault(self, stage):
        if stage in self.faults:
            raise RuntimeError("dynspec probe: injected fault at %s" % stage)

    # ---------------------------------------------------------------------------------- setup

    def configure(self, raw):
        self._json = _json_codec()
        cfg = self._json[0](raw)
        if isinstance(cfg, list):
            cfg = {"targets": cfg}
        if not isinstance(cfg, dict):
            raise ValueError("DYNSPEC_PROBE must hold a JSON object")
        self.cfg = cfg
        fault = cfg.get("fault") or ()
        self.faults = {fault} if isinstance(fault, str) else set(fault)
        self.fault("config")
        if int(cfg.get("v", V)) not in CONFIG_VERSIONS:
            raise ValueError("unsupported DYNSPEC_PROBE config version %r" % cfg.get("v"))
        self.package = str(cfg.get("package") or "sglang")
        self.worker_prefix = str(cfg.get("worker_prefix") or self.package + ".srt.speculative.")
        self.count_limit = max(1, int(cfg.get("count_limit", COUNT_LIMIT)))
        self.line_hits = bool(cfg.get("line_hits", True))
        self.use_monitoring = bool(cfg.get("monitoring", True))
        self.server_args_extra = tuple(cfg.get("server_args_fields") or ())
        targets = cfg.get("targets") or []
        for i, t in enumerate(targets):
            try:
                self.targets.append(Target(i, t, self.package))
            except Exception as e:
                self.error("config", e)

    def detect_start(self):
        argv = list(getattr(sys, "orig_argv", None) or [sys.executable] + sys.argv)
        kind, value = _parse_argv(argv)
        pkg = self.package
        if kind == "module":
            self.started_as = "module:" + value
            if value in (pkg + ".launch_server", pkg + ".launch_server.__main__"):
                self.set_role("launcher", "argv")
        elif kind == "command":
            if "multiprocessing.spawn" in value and "spawn_main" in value:
                self.started_as = "spawn-child"
            elif "multiprocessing.resource_tracker" in value:
                self.started_as = "resource-tracker"
            elif "multiprocessing.forkserver" in value:
                self.started_as = "forkserver"
            else:
                self.started_as = "command"
        elif kind == "script":
            self.started_as = "script:" + value
            base = os.path.basename(value)
            rest = argv[argv.index(value) + 1:] if value in argv else []
            if base.startswith("launch_server") or (base == pkg and rest[:1] == ["serve"]):
                self.set_role("launcher", "argv")
        else:
            self.started_as = kind

    def set_role(self, role, source):
        if role and (self.role_source is None or self.role_source == "argv" or source == "entry"):
            self.role, self.role_source = role, source

    def peek_points(self):
        """Modules sglang imports inside run_server(server_args) / Engine: importing them is when the
        resolved server_args is on the stack (0.5.9 fails in that very import, so peek before it)."""
        pkg = self.package + ".srt.entrypoints."
        return {pkg + "http_server", pkg + "engine", pkg + "grpc_server"}

    def module_names(self):
        names = {self.package, "multiprocessing.process"} | self.peek_points()
        for t in self.targets:
            names.update(t.modules)
        return names

    def install_hooks(self):
        import atexit

        self.finder = _Finder(self)
        sys.meta_path.insert(0, self.finder)
        for name in sorted(self.finder.names):  # already imported before us (rare: other sitecustomize)
            mod = sys.modules.get(name)
            if mod is not None:
                self.on_module(mod, True)
        atexit.register(self._at_exit)
        self._install_signals()
        if hasattr(os, "register_at_fork"):
            os.register_at_fork(after_in_child=self._after_fork)

    def _install_signals(self):
        try:
            import _signal as sig
        except ImportError:
            import signal as sig
        try:
            policy = str(self.cfg.get("sigterm", "launcher"))
            if policy == "all" or (policy == "launcher" and self.role == "launcher"):
                if sig.getsignal(sig.SIGTERM) == sig.SIG_DFL:  # never replace a handler someone set
                    sig.signal(sig.SIGTERM, self._on_sigterm)
            name = self.cfg.get("signal")
            if name:
                num = name if isinstance(name, int) else getattr(sig, str(name), None)
                if num is None:
                    raise ValueError("unknown signal %r" % (name,))
                if sig.getsignal(num) in (sig.SIG_DFL, sig.SIG_IGN):
                    sig.signal(num, self._on_request_signal)
        except ValueError as e:
            if "main thread" not in str(e):
                raise

    def emit_start(self, ok, setup_ms):
        argv = list(getattr(sys, "orig_argv", None) or [sys.executable] + sys.argv)
        self.emit("start", ok=ok, started_as=self.started_as, argv=[_plain(a) for a in _redacted(argv)[:16]],
                  python=".".join(map(str, sys.version_info[:3])), executable=sys.executable,
                  probe=os.path.abspath(__file__), targets=len(self.targets),
                  hunks=len([t for t in self.targets if t.hunk is not None]),
                  behaviour_hunks=len([t for t in self.targets if t.hunk is not None and "behaviour" in str(t.hunk_role)]),
                  mode=("monitoring" if self._monitoring_available() else "code"), setup_ms=round(setup_ms, 3))

    def _monitoring_available(self):
        return self.use_monitoring and hasattr(sys, "monitoring")

    # ---------------------------------------------------------------------------------- modules

    def _load_code(self):
        """The instrumentation (_dynspec_probe_code), loaded on first need: most processes never need it."""
        if not self.code_loaded:
            self._attach("_dynspec_probe_code")
            self.code_loaded = True
        return True

    def _safely(self, where, fn, *args):
        try:
            return fn(*args)
        except Exception as e:
            self.error(where, e)

    # ---------------------------------------------------------------------------------- lazily loaded
    # Reached first through these trampolines: _events() makes the real methods (in
    # _dynspec_probe_events) methods of this class, after which the lookup finds them. Bound methods
    # registered before that (atexit, signal handlers, at-fork) keep working the same way. If that
    # module cannot be loaded, each trampoline does nothing (or, for SIGTERM, what the default would).

    def _shrink(self, rec):
        return self._events() and self._shrink(rec)

    def on_module(self, module, ok):
        return self._events() and self.on_module(module, ok)

    def _after_fork(self):
        return self._events() and self._after_fork()

    def peek_server_args(self, where):
        return self._events() and self.peek_server_args(where)

    def report_coverage(self, reason):
        return self._events() and self.report_coverage(reason)

    def _at_exit(self):
        if self.events_loaded or self.events_failed:
            return self._events() and self._at_exit()
        try:  # nothing was hooked in this process: a trivial snapshot, without loading the reporting
            self.fault("coverage")
            self.emit("coverage", reason="exit", targets=[], not_loaded=[t.index for t in self.targets])
        except Exception as e:
            self.error("coverage", e)

    def _on_request_signal(self, signum, frame):
        return self._events() and self._on_request_signal(signum, frame)

    def _on_sigterm(self, signum, frame):
        if self._events():
            return self._on_sigterm(signum, frame)
        try:
            import _signal as sig
        except ImportError:
            import signal as sig
        sig.signal(signum, sig.SIG_DFL)  # die of the signal as without the probe
        os.kill(os.getpid(), signum)

    def _events(self):
        """True once _dynspec_probe_events is attached (loaded on first call; False if it cannot be)."""
        if not self.events_loaded and not self.events_failed:
            try:
                self._attach("_dynspec_probe_events")
                self.events_loaded = True
            except Exception as e:
                self.events_failed = True
                self.error("events", e)
        return self.events_loaded

    def _attach(self, name):
        """Import a sibling module of the probe and make its methods methods of Probe."""
        try:
            mod = __import__(name)
        except ImportError:  # our folder is no longer on sys.path: load it from beside this file
            import importlib.util

            path = os.path.join(os.path.dirname(os.path.abspath(__file__)), name + ".py")
            spec = importlib.util.spec_from_file_location(name, path)
            mod = importlib.util.module_from_spec(spec)
            sys.modules[name] = mod
            spec.loader.exec_module(mod)
        mod.attach(Probe)


def _hit(index):
    """Called by instrumented code (3.10/3.11) when a patched function starts."""
    p = _probe
    if p is not None:
        p.swap_hit(index)


def _line(index, lines):
    """Called by instrumented code (3.10/3.11) before the statement holding patch lines."""
    p = _probe
    if p is not None:
        p.swap_line(index, lines)


