"""The dynspec probe's reporting: what a process is (entry function, rank, server_args, sglang's version),
hit counting and coverage snapshots. Loaded by _dynspec_probe (the core, see there) on first need: a
hooked module executed, a signal, the process exiting. Most processes that never import sglang never load
it, and no process compiles it at start-up.

Stdlib only, Python 3.8+, nothing from dynspec. Its methods become methods of _dynspec_probe.Probe
(attach), so they read and write the probe's state directly.
"""
import os
import sys
import time

from _dynspec_probe import MAX_LINE, _RANK_ARGS, _SERVER_ARGS_FIELDS, _plain


def attach(cls):
    """Make ProbeEvents' methods methods of the core's Probe class."""
    for name, value in vars(ProbeEvents).items():
        if not name.startswith("__"):
            setattr(cls, name, value)


def _hunk_of(t):
    """The hunk fields of a hit line: a call of the function enclosing a hunk (v2), none for a v1 target."""
    return {} if t.hunk is None else {"hunk": t.hunk, "hunk_role": t.hunk_role}


def _ranges(lines):
    out, start, prev = [], None, None
    for ln in sorted(lines):
        if start is None:
            start = prev = ln
        elif ln == prev + 1:
            prev = ln
        else:
            out.append("%d-%d" % (start, prev) if prev != start else str(start))
            start = prev = ln
    if start is not None:
        out.append("%d-%d" % (start, prev) if prev != start else str(start))
    return ",".join(out)


def _compact(v):
    if isinstance(v, list):
        if len(v) > 8 and all(type(x) is int for x in v):
            return _ranges(v)
        return [_compact(x) for x in v]
    if isinstance(v, dict):
        return {k: _compact(x) for k, x in v.items()}
    return v


def _entry_role(name):
    n = (name or "").lower()
    if "detokenizer" in n:
        return "detokenizer"
    if "scheduler" in n:
        return "scheduler"
    if "data_parallel_controller" in n:
        return "dp_controller"
    if "tokenizer" in n:
        return "tokenizer"
    return None


def _is_server_args(obj):
    return type(obj).__name__ == "ServerArgs" or "model_path" in _fields_of(obj)


def _fields_of(obj):
    """Field names of a server_args object: dataclass fields, else instance attributes."""
    fields = getattr(type(obj), "__dataclass_fields__", None)
    if isinstance(fields, dict) and fields:
        return list(fields)
    try:  # 0.5.23: msgspec namespaces, listed by the server_args module's record_fields()
        rf = getattr(sys.modules.get(type(obj).__module__), "record_fields", None)
        if callable(rf):
            return [f.name for f in rf(type(obj))]
    except Exception:
        pass
    return [k for k in getattr(obj, "__dict__", {}) if not k.startswith("_")]


def _copy_meta(wrapper, func):
    for attr in ("__module__", "__name__", "__qualname__", "__doc__"):
        try:
            setattr(wrapper, attr, getattr(func, attr))
        except Exception:
            pass
    try:
        wrapper.__dict__.update(getattr(func, "__dict__", {}))
        wrapper.__wrapped__ = func
    except Exception:
        pass


class ProbeEvents(object):
    def _shrink(self, rec):
        """Same record under MAX_LINE: line lists become "a-b,c" ranges, then the largest fields are cut."""
        fixed = ("v", "event", "ts", "pid", "ppid", "role", "rank")
        rec = {k: (v if k in fixed else _compact(v)) for k, v in rec.items()}
        cut = ["lines-as-ranges"]
        for k in sorted((k for k in rec if k not in fixed), key=lambda k: -len(self._dumps(rec[k]))):
            if len(self._dumps(rec)) + 120 <= MAX_LINE:
                break
            v = rec[k]
            rec[k] = v[:200] + "..." if isinstance(v, str) and len(v) > 203 else "..."
            cut.append(k)
        rec["truncated"] = cut
        data = self._dumps(rec)
        if len(data) > MAX_LINE:
            minimal = {k: rec[k] for k in fixed if k in rec}
            minimal["truncated"] = ["*"]
            data = self._dumps(minimal)
        return data

    def _on_sglang(self, module, ok):
        self.fault("sglang")
        if "sglang" in self.reported:
            return
        self.reported.add("sglang")
        version = getattr(module, "__version__", None) if ok else None
        path = os.path.dirname(getattr(module, "__file__", "") or "") or None
        if not isinstance(version, str) and path:
            try:
                import re

                with open(os.path.join(path, "version.py")) as f:
                    m = re.search(r"""__version__\s*=\s*["']([^"']+)["']""", f.read())
                version = m.group(1) if m else None
            except Exception:
                version = None
        self.emit("sglang", version=version, path=path, import_ok=ok)

    def _wrap_bootstrap(self, module):
        cls = getattr(module, "BaseProcess", None)
        real = cls.__dict__.get("_bootstrap") if cls is not None else None
        if real is None or getattr(real, "_dynspec", False):
            return
        probe = self

        def _bootstrap(proc, *args, **kwargs):
            try:
                probe.on_process_entry(proc)
            except Exception as e:
                probe.error("entry", e)
            return real(proc, *args, **kwargs)

        _bootstrap._dynspec = True
        _copy_meta(_bootstrap, real)
        cls._bootstrap = _bootstrap

    def on_process_entry(self, proc):
        """In a multiprocessing child, just before its target runs: which sglang process is this?"""
        self.fault("entry")
        target = getattr(proc, "_target", None)
        args = tuple(getattr(proc, "_args", ()) or ())
        kwargs = dict(getattr(proc, "_kwargs", {}) or {})
        qual = getattr(target, "__qualname__", None) or getattr(target, "__name__", None) or repr(target)
        entry = "%s.%s" % (getattr(target, "__module__", "?"), qual)
        role = _entry_role(qual)
        # a launcher-side trampoline (e.g. run_scheduler_process_with_init_pipe(func, writer))
        inner = args[0] if args and callable(args[0]) and not isinstance(args[0], type) else None
        if role is None and inner is not None:
            role = _entry_role(getattr(inner, "__qualname__", ""))
        bound = {}
        code = getattr(target, "__code__", None)
        if code is not None:
            names = code.co_varnames[: code.co_argcount + code.co_kwonlyargcount]
            bound.update(zip(names, args))
        bound.update(kwargs)
        rank = {}
        for key, arg in _RANK_ARGS:
            if key not in rank and arg in bound and isinstance(bound[arg], int):
                rank[key] = bound[arg]
        if "dp" not in rank and role == "scheduler" and os.environ.get("SGLANG_DP_RANK", "").isdigit():
            rank["dp"] = int(os.environ["SGLANG_DP_RANK"])
        self.set_role(role or "other", "entry")
        self.rank = rank or self.rank
        fields = {"entry": entry, "process_name": getattr(proc, "_name", None), "started_as": self.started_as}
        if isinstance(bound.get("gpu_id"), int):
            fields["gpu_id"] = bound["gpu_id"]
        self.emit("entry", **fields)
        if bound.get("server_args") is not None:
            self._safely("server-args", self.report_server_args, bound["server_args"], entry)

    def _after_fork(self):
        try:
            parent = self.pid
            self.pid = os.getpid()
            self.trigger_thread = None
            self.emit("start", ok=True, started_as="fork", forked_from=parent,
                      python=".".join(map(str, sys.version_info[:3])), targets=len(self.targets),
                      mode=self.mode or ("monitoring" if self._monitoring_available() else "code"))
        except Exception as e:
            self.error("fork", e)

    # Nothing on the launch path is wrapped: a wrapper would add its frame to every traceback that
    # passes through it. The resolved server_args is read from the stack instead.

    def peek_server_args(self, where):
        if "server_args" in self.reported:
            return
        try:
            self.fault("server-args")
            f, depth = sys._getframe(1), 0
            while f is not None and depth < 100:
                code = f.f_code
                if code.co_name == "<module>":
                    sa = f.f_globals.get("server_args")
                elif "server_args" in code.co_varnames or "server_args" in code.co_cellvars:
                    sa = f.f_locals.get("server_args")
                else:
                    sa = None
                if sa is not None and _is_server_args(sa):
                    if self.role == "other" and self.started_as not in ("spawn-child", "fork", "forkserver"):
                        self.set_role("launcher", "server_args")  # < 3.10: no sys.orig_argv to tell
                    self.report_server_args(sa, "%s (%s in %s)" % (where, code.co_name, code.co_filename))
                    return
                f, depth = f.f_back, depth + 1
        except Exception as e:
            self.error("server-args", e)

    def _peek_main(self, where):
        if "server_args" in self.reported:
            return
        main = sys.modules.get("__main__")
        sa = getattr(main, "server_args", None)
        if sa is not None and _is_server_args(sa):
            self.report_server_args(sa, where)

    def report_server_args(self, sa, seen_at):
        self.fault("server-args")
        if "server_args" in self.reported:
            return
        self.reported.add("server_args")
        source, values = "attributes", None
        state = getattr(sa, "__dict__", {}) or {}
        resolved_dict = getattr(type(sa), "resolved_dict", None)
        if callable(resolved_dict) and state.get("_resolution_finished"):
            try:
                values = resolved_dict(sa)  # what sglang itself logs as server_args= (0.5.19+)
                source = "resolved_dict"
            except Exception:
                values = None
        if not isinstance(values, dict):
            values = {}
            for k in _fields_of(sa):
                try:
                    values[k] = getattr(sa, k)
                except Exception:
                    continue
            source = "attributes"
        keep = set(_SERVER_ARGS_FIELDS) | set(self.server_args_extra)
        out = {k: _plain(v) for k, v in sorted(values.items()) if k.startswith("speculative_") or k in keep}
        self.emit("server_args", seen_at=seen_at, source=source, type="%s.%s" % (type(sa).__module__,
                                                                               type(sa).__qualname__), args=out)

    # hits: shared by every instrumentation mode (_dynspec_probe_code)

    def _count(self, t):
        t.calls += 1
        if t.calls == 1:
            t.first_ts = time.time()
            self.fault("hit")
            self.emit("hit", target=t.index, function=t.qualname(), calls=1, first_ts=t.first_ts, **_hunk_of(t))
            for line in sorted(t.header):  # decorator / def / signature lines: they "run" with the call
                if line not in t.executed:
                    self._line(t, line)
        elif t.calls == self.count_limit:
            self.emit("hit", target=t.index, function=t.qualname(), calls=">=%d" % self.count_limit,
                      first_ts=t.first_ts, **_hunk_of(t))

    def _line(self, t, line):
        t.executed[line] = now = time.time()
        self.fault("line")
        if t.hunk is not None and not t.hunk_seen:
            # the first execution of this hunk in this process (rank): always reported, line_hits or not
            t.hunk_seen = True
            self.emit("hunk", hunk=t.hunk, hunk_role=t.hunk_role, target=t.index, function=t.qualname(),
                      file=t.loaded_file or t.file, line=line, at="%s:%d" % (t.loaded_file or t.file, line),
                      first_ts=round(now, 6), calls=t.calls if t.counted else None)
        if self.line_hits:
            self.emit("hit", target=t.index, function=t.qualname(), line=line)

    def coverage_entries(self):
        out = []
        for t in self.targets:
            if t.status == "not-loaded":
                continue
            e = {"target": t.index, "function": t.qualname(), "status": t.status, "file": t.loaded_file}
            if t.hunk is not None:
                e.update(hunk=t.hunk, hunk_role=t.hunk_role, hunk_ran=t.hunk_seen)
            if t.status == "instrumented":
                calls = t.calls if t.calls < self.count_limit else ">=%d" % self.count_limit
                executed = sorted(t.executed)
                e.update(mode=t.mode, calls=calls if t.counted else None, first_ts=t.first_ts,
                         executed=executed, missed=sorted(t.executable.difference(executed)),
                         not_code=sorted(set(t.lines) - t.executable))
                if t.mode == "wrap":
                    e["traced_calls"] = t.traced_calls
            elif t.detail:
                e["detail"] = t.detail
            out.append(e)
        return out

    def report_coverage(self, reason):
        try:
            self.fault("coverage")
            entries = self.coverage_entries()
            not_loaded = [t.index for t in self.targets if t.status == "not-loaded"]
            rec = {"reason": reason, "targets": entries, "not_loaded": not_loaded}
            if len(self._dumps(rec)) + 200 <= MAX_LINE or len(entries) <= 1:
                self.emit("coverage", **rec)
            else:  # one line per target keeps each under PIPE_BUF
                for i, e in enumerate(entries):
                    self.emit("coverage", reason=reason, targets=[e], not_loaded=not_loaded, part=i + 1,
                              parts=len(entries))
        except Exception as e:
            self.error("coverage", e)

    def _at_exit(self):
        self._safely("server-args", self._peek_main, "exit")
        self.report_coverage("exit")

    def _on_sigterm(self, signum, frame):
        try:
            import _signal as sig
        except ImportError:
            import signal as sig
        self._safely("server-args", self._peek_main, "sigterm")
        self.report_coverage("sigterm")
        try:
            current = sig.getsignal(signum)
            if getattr(current, "__self__", None) is self:  # ours (a trampoline's or this bound method)
                sig.signal(signum, sig.SIG_DFL)  # the disposition before us: die of the signal as before
        except Exception:
            pass
        os.kill(os.getpid(), signum)

    def _on_request_signal(self, signum, frame):
        try:
            self.fault("signal")
            self.report_coverage("signal")
        except Exception as e:
            self.error("signal", e)

    def on_module(self, module, ok):
        """Called once a module the finder hooked has executed (ok=False: it raised)."""
        name = getattr(module, "__name__", "")
        pkg = self.package
        if name == pkg:
            self._safely("sglang", self._on_sglang, module, ok)
        if not ok:
            return
        if name == "multiprocessing.process":
            self._safely("entry", self._wrap_bootstrap, module)
        targets = [t for t in self.targets if name in t.modules]
        is_worker = name.startswith(self.worker_prefix) and "worker" in name[len(self.worker_prefix):]
        if (targets or is_worker) and self._safely("module", self._load_code):
            self._safely("module", self._on_code_module, module, targets, is_worker)
