"""The dynspec probe's instrumentation: loaded by _dynspec_probe (the core, see there) only in a process
that imports a patched module or a speculative worker module: every other process of the server
(launcher, detokenizer, resource tracker, ...) never compiles it.

Stdlib only, Python 3.8+, nothing from dynspec. Its methods become methods of _dynspec_probe.Probe
(attach), so they read and write the probe's state directly.
"""
import os
import sys
import time

from _dynspec_probe import _realpath
from _dynspec_probe_events import _copy_meta


def attach(cls):
    """Make ProbeCode's methods methods of the core's Probe class."""
    for name, value in vars(ProbeCode).items():
        if not name.startswith("__"):
            setattr(cls, name, value)


def _sha256(path):
    import hashlib

    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _code_lines(code):
    try:
        return {ln for _, _, ln in code.co_lines() if ln is not None}
    except AttributeError:  # < 3.10
        import dis

        return {ln for _, ln in dis.findlinestarts(code)}


def _nested_codes(code):
    """code and every code object nested in it (functions, lambdas, comprehensions, classes)."""
    out, todo = [], [code]
    while todo:
        c = todo.pop()
        out.append(c)
        todo.extend(k for k in c.co_consts if type(k) is type(code))
    return out


class _WrapGroup(object):
    """One wrapped function (3.10/3.11 mode): the targets it counts, the patch lines under it, and how
    to undo the wrap."""

    def __init__(self):
        self.targets = []  # counted by the wrapper
        self.nested = []  # functions defined inside it: counted by the tracer
        self.lines = []  # (Target, patch lines) of every code object under this function
        self.calls = 0
        self.done = False
        self.restore = None
        self.can_trace = True

    def pending(self):
        """Is there anything left that only tracing a call can show?"""
        for t, lines in self.lines:
            for ln in lines:
                if ln not in t.executed:
                    return True
        for t in self.nested:
            if t.calls == 0:
                return True
        return False


class _Unsupported(Exception):
    """Source-level instrumentation is impossible for this function."""


class _Swap(object):
    def __init__(self, host, original, node, classes, future):
        self.host = host  # the function object whose __code__ is swapped
        self.original = original  # its code as loaded
        self.node = node  # its (pristine) def in the module's AST
        self.classes = classes  # enclosing class names, outermost first
        self.future = future  # the module's `from __future__` imports (compile flags)
        self.targets = []  # (Target, code name, first line, patch lines observed by calls)
        self.variant = None


def _first_line(node):
    return min([node.lineno] + [d.lineno for d in node.decorator_list])


def _find_code(code, name, first):
    todo = [code]
    while todo:
        c = todo.pop(0)
        if c.co_name == name and c.co_firstlineno == first:
            return c
        todo.extend(k for k in c.co_consts if type(k) is type(code))
    return None


def _line_plan(patch_lines, code):
    """(header lines, {code object: patch lines observable in it}). Header lines are patch lines of
    the decorators / def / signature: they get no line event of their own and count as run when the
    function is called. Comment, blank and docstring lines are no code at all."""
    wanted = set(patch_lines)
    body = _code_lines(code) - {code.co_firstlineno}
    first_body = min(body) if body else code.co_firstlineno + 1
    header = set()
    try:
        import linecache

        for n in range(code.co_firstlineno, first_body):
            text = linecache.getline(code.co_filename, n).split("#", 1)[0].strip()
            if text and n in wanted:
                header.add(n)
            if text.endswith(":"):  # end of the signature
                break
    except Exception:
        header = {ln for ln in wanted if ln == code.co_firstlineno}
    plan = {}
    for c in _nested_codes(code):
        lines = (_code_lines(c) & wanted) - header
        if c is code and body:
            lines -= {code.co_firstlineno} - body
        if lines:
            plan[c] = lines
    return header, plan


_STMT_LISTS = ("body", "orelse", "finalbody")


def _child_lists(stmt):
    for field in _STMT_LISTS:
        lst = getattr(stmt, field, None)
        if isinstance(lst, list) and lst:
            yield lst
    for h in getattr(stmt, "handlers", None) or ():
        yield h.body
    for c in getattr(stmt, "cases", None) or ():
        yield c.body


def _statement_for_line(func_node, line):
    """The innermost statement of func_node's body holding `line` (for an except / case clause line:
    the first statement of that clause's body), or None."""
    best = None
    lst = func_node.body
    while lst:
        nxt = None
        for st in lst:
            if st.lineno <= line <= (getattr(st, "end_lineno", None) or st.lineno):
                best = st
                for h in list(getattr(st, "handlers", None) or ()) + list(getattr(st, "cases", None) or ()):
                    start = getattr(h, "lineno", None) or getattr(getattr(h, "pattern", None), "lineno", None)
                    if start is not None and h.body and start <= line < h.body[0].lineno:
                        return h.body[0]
                for sub in _child_lists(st):
                    if any(s.lineno <= line <= (getattr(s, "end_lineno", None) or s.lineno) for s in sub):
                        nxt = sub
                        break
                break
        lst = nxt
    return best


def _probe_call(fn, args, at):
    import ast

    call = ast.Expr(value=ast.Call(
        func=ast.Attribute(value=ast.Call(func=ast.Name(id="__import__", ctx=ast.Load()),
                                          args=[ast.Constant(value="_dynspec_probe")], keywords=[]),
                           attr=fn, ctx=ast.Load()),
        args=[ast.Constant(value=a) for a in args], keywords=[]))
    for n in ast.walk(call):
        n.lineno, n.col_offset = at.lineno, at.col_offset
        n.end_lineno, n.end_col_offset = at.lineno, at.col_offset
    return call


def _insert_probe_calls(host_node, hits, unseen):
    """Insert `_hit(i)` at the start of each target function's body and `_line(i, lines)` before the
    statement holding those lines. `hits`: [(target index, def name, first line)]."""
    import ast

    before = {}
    defs = [n for n in ast.walk(host_node) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    for index, name, first in hits:
        node = next((n for n in defs if n.name == name and _first_line(n) == first), None)
        if node is None:
            continue
        body = node.body
        doc = 1 if (body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
                    and isinstance(body[0].value.value, str)) else 0
        if doc < len(body):
            before.setdefault(id(body[doc]), []).append(_probe_call("_hit", (index,), body[doc]))
        else:
            body.append(_probe_call("_hit", (index,), body[-1]))
    for index, lines in unseen.items():
        groups = {}
        for line in lines:
            st = _statement_for_line(host_node, line)
            if st is not None:
                groups.setdefault(id(st), (st, []))[1].append(line)
        for st, ls in groups.values():
            before.setdefault(id(st), []).append(_probe_call("_line", (index, tuple(ls)), st))

    def rebuild(lst):
        out = []
        for st in lst:
            out.extend(before.get(id(st), ()))
            out.append(st)
            for sub in _child_lists(st):
                sub[:] = rebuild(sub)
        return out

    host_node.body[:] = rebuild(host_node.body)


class ProbeCode(object):
    def _on_code_module(self, module, targets, is_worker):
        self.fault("module")
        name = module.__name__
        spec = getattr(module, "__spec__", None)
        file = getattr(spec, "origin", None) or getattr(module, "__file__", None)
        sha = None
        if file and os.path.isfile(file):
            try:
                sha = self.hashes[file] = _sha256(file)
            except Exception:
                sha = None
        infos = []
        for t in targets:
            t.loaded_file = file
            if not t.matches_file(file):
                t.status, t.detail = "other-file", "patched file %s, but %s was loaded from %s" % (t.file, name, file)
            else:
                try:
                    self.fault("instrument")
                    self._instrument(t, module)
                except LookupError as e:
                    t.status, t.detail = "unresolved", str(e)
                except Exception as e:
                    t.status, t.detail = "error", "%s: %s" % (type(e).__name__, e)
                    self.error("instrument", e)
            info = {"target": t.index, "status": t.status, "function": t.qualname()}
            if t.mode:
                info["mode"] = t.mode
            if t.detail:
                info["detail"] = t.detail
            infos.append(info)
        self.emit("module", module=name, file=file, sha256=sha, worker_module=is_worker, targets=infos)
        if is_worker:
            self._hook_worker_classes(module)
        if targets and self.cfg.get("trigger_file") and self.trigger_thread is None:
            self._start_trigger_thread()

    def _hook_worker_classes(self, module):
        name = module.__name__
        for obj in list(module.__dict__.values()):
            if isinstance(obj, type) and obj.__module__ == name and "Worker" in obj.__name__:
                self._hook_new(obj)

    def _hook_new(self, cls):
        """Report the first worker instantiated in this process from __new__, which returns before
        __init__ runs: an exception in the worker's __init__ never passes through probe code."""
        own = cls.__dict__.get("__new__")
        if getattr(own, "_dynspec", False) or getattr(getattr(own, "__func__", None), "_dynspec", False):
            return
        real = own.__func__ if isinstance(own, staticmethod) else own
        probe = self

        def __new__(klass, *args, **kwargs):
            if not probe.worker_seen:
                probe.worker_seen = True
                probe._safely("worker", probe.report_worker, klass)
            if real is not None:
                return real(klass, *args, **kwargs)
            parent_new = super(cls, klass).__new__
            if parent_new is object.__new__:
                return parent_new(klass)  # object.__new__ rejects the constructor's arguments
            return parent_new(klass, *args, **kwargs)

        __new__._dynspec = True
        __new__.__qualname__ = "%s.__new__" % cls.__qualname__
        cls.__new__ = staticmethod(__new__)

    def report_worker(self, cls):
        self.fault("worker")
        mod = sys.modules.get(cls.__module__)
        file = getattr(mod, "__file__", None)
        sha = self.hashes.get(file)
        if sha is None and file and os.path.isfile(file):
            sha = _sha256(file)
        mro = ["%s.%s" % (c.__module__, c.__qualname__) for c in cls.__mro__]
        patched, seen = [], set()
        for t in self.targets:
            if not t.cls or (t.cls, t.file) in seen:
                continue
            seen.add((t.cls, t.file))
            hit = None
            for c in cls.__mro__:
                if c.__qualname__ != t.cls:
                    continue
                cmod = sys.modules.get(c.__module__)
                if c.__module__ in t.modules or t.matches_file(getattr(cmod, "__file__", None)):
                    hit = c
                    break
            patched.append({"class": t.cls, "file": t.file, "in_mro": hit is not None})
        self.emit("worker", file=file, sha256=sha, mro=mro, patched_in_mro=patched,
                  **{"class": cls.__qualname__, "module": cls.__module__})

    def _instrument(self, t, module):
        owner, attr, raw, host, code, nested = self._resolve(t, module)
        t.header, line_codes = _line_plan(t.lines, code)
        t.executable = set(t.header)
        for lines in line_codes.values():
            t.executable |= lines
        if self._monitoring_available() and self._tool() is not None:
            self._monitor(t, code, line_codes)
            t.mode = "monitoring"
        else:
            try:
                self._swap_code(t, module, host, code, nested, line_codes)
                t.mode = "code"
            except _Unsupported as e:
                self._wrap_target(t, owner, attr, raw, code, nested, line_codes)
                t.mode, t.detail = "wrap", "source instrumentation impossible (%s): wrapped instead" % e
        self.mode = self.mode or t.mode
        t.status = "instrumented"

    def _resolve(self, t, module):
        """(owner, attribute, raw attribute, function object holding the code, target code, nested?)"""
        owner = module
        if t.cls:
            for part in t.cls.split("."):
                nxt = owner.__dict__.get(part)
                if not isinstance(nxt, type):
                    raise LookupError("class %s not found in %s" % (t.cls, module.__name__))
                owner = nxt
        if not t.function:
            return self._resolve_by_lines(t, module, owner)
        parts = [p for p in t.function.split(".") if p != "<locals>"]
        raw = owner.__dict__.get(parts[0])
        if raw is None:
            raise LookupError("%s not found in %s" % (t.qualname(), module.__name__))
        host, code = self._function_code(raw, getattr(module, "__file__", None))
        if code is None:
            raise LookupError("no Python code of %s in %s" % (t.qualname(), getattr(module, "__file__", "?")))
        for p in parts[1:]:
            code = next((c for c in _nested_codes(code) if c.co_name == p), None)
            if code is None:
                raise LookupError("nested function %s not found in %s" % (p, t.qualname()))
        t.resolved = t.function
        return owner, parts[0], raw, host, code, len(parts) > 1

    def _function_code(self, raw, file):
        """The function object (and its code as loaded) behind a class/module attribute, looking
        through staticmethod/classmethod/property and decorators (__wrapped__, closures) for the
        function whose code lives in `file`."""
        kind = type(raw)
        func = raw.__func__ if kind in (staticmethod, classmethod) else raw.fget if kind is property else raw
        rf = _realpath(file) if file else None
        todo, seen, fallback = [(func, 0)], set(), None
        while todo:
            f, depth = todo.pop(0)
            if f is None or id(f) in seen or depth > 4:
                continue
            seen.add(id(f))
            sw = self.swaps.get(id(f))
            code = sw.original if sw is not None else getattr(f, "__code__", None)
            if code is not None:
                if rf is None or _realpath(code.co_filename) == rf:
                    return f, code
                fallback = fallback or (f, code)
            todo.append((getattr(f, "__wrapped__", None), depth + 1))
            for cell in getattr(f, "__closure__", None) or ():
                try:
                    inner = cell.cell_contents
                except ValueError:
                    continue
                if callable(inner) and hasattr(inner, "__code__"):
                    todo.append((inner, depth + 1))
        return (None, None) if rf else (fallback or (None, None))

    def _resolve_by_lines(self, t, module, owner):
        """No function given: the function (method) of owner whose code holds the first patch line."""
        file = getattr(module, "__file__", None)
        first = t.lines[0] if t.lines else None
        for attr, raw in list(owner.__dict__.items()):
            if first is None or not (callable(raw) or isinstance(raw, (staticmethod, classmethod, property))):
                continue
            host, code = self._function_code(raw, file)
            if code is not None and any(first in _code_lines(c) for c in _nested_codes(code)):
                t.resolved = attr
                return owner, attr, raw, host, code, False
        raise LookupError("no function of %s holds line %s" % (getattr(owner, "__name__", "?"), first))

    def _tool(self):
        if self.tool is None:
            mon = sys.monitoring
            for tool_id in (4, 3):
                if mon.get_tool(tool_id) is None:
                    mon.use_tool_id(tool_id, "dynspec-probe")
                    self.tool = tool_id
                    mon.register_callback(tool_id, mon.events.PY_START, self._on_py_start)
                    mon.register_callback(tool_id, mon.events.LINE, self._on_line)
                    break
            else:
                self.tool = False  # every free id taken (debugger, coverage, ...): swap code instead
        return self.tool if self.tool is not False else None

    def _monitor(self, t, code, line_codes):
        mon = sys.monitoring
        ev = mon.events
        self.start_map.setdefault(code, []).append(t)
        wanted = {code: ev.PY_START}
        for c, lines in line_codes.items():
            self.line_map.setdefault(c, []).append((t, lines))
            wanted[c] = wanted.get(c, 0) | ev.LINE
        for c, events in wanted.items():
            mon.set_local_events(self.tool, c, mon.get_local_events(self.tool, c) | events)

    def _on_py_start(self, code, offset):
        try:
            done = True
            for t in self.start_map.get(code, ()):
                self._count(t)
                done = done and t.calls >= self.count_limit
            return sys.monitoring.DISABLE if done else None
        except Exception as e:
            self.error("hit", e)
            return sys.monitoring.DISABLE

    def _on_line(self, code, line):
        try:
            for t, lines in self.line_map.get(code, ()):
                if line in lines and line not in t.executed:
                    self._line(t, line)
        except Exception as e:
            self.error("line", e)
        return sys.monitoring.DISABLE

    def _swap_code(self, t, module, host, code, nested, line_codes):
        if host is None:
            raise _Unsupported("no function object")
        sw = self.swaps.get(id(host))
        fresh = sw is None
        if fresh:
            try:
                sw = self._new_swap(module, host)
            except _Unsupported:
                raise
            except Exception as e:  # a source the probe cannot handle: fall back, and say why
                raise _Unsupported("%s: %s" % (type(e).__name__, e))
        body_lines = set()
        for lines in line_codes.values():
            body_lines |= lines
        entry = (t, code.co_name, code.co_firstlineno, sorted(body_lines - t.header))
        sw.targets.append(entry)
        try:
            self._refresh(sw)
        except Exception as e:
            sw.targets.remove(entry)
            raise e if isinstance(e, _Unsupported) else _Unsupported("%s: %s" % (type(e).__name__, e))
        if fresh:
            self.swaps[id(host)] = sw
        t.swap = sw

    def _new_swap(self, module, host):
        import ast

        code = host.__code__
        tree = self._module_ast(module)
        if tree is None:
            raise _Unsupported("source not available")
        parents, node = {}, None
        for parent in ast.walk(tree):
            for child in ast.iter_child_nodes(parent):
                parents[id(child)] = parent
        found = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
                 and n.name == code.co_name and _first_line(n) == code.co_firstlineno]
        if len(found) != 1:
            raise _Unsupported("%d definitions of %s at line %d" % (len(found), code.co_name, code.co_firstlineno))
        node = found[0]
        classes, p = [], parents.get(id(node))
        while p is not None and not isinstance(p, ast.Module):
            if not isinstance(p, ast.ClassDef):
                raise _Unsupported("defined inside a function")
            classes.insert(0, p.name)
            p = parents.get(id(p))
        future = [n for n in tree.body if isinstance(n, ast.ImportFrom) and n.module == "__future__"]
        sw = _Swap(host, code, node, classes, future)
        if self._compile_variant(sw, False, {}) != code:
            raise _Unsupported("the source on disk differs from the loaded code")
        return sw

    def _module_ast(self, module):
        import ast

        name = module.__name__
        if name not in self.asts:
            src = None
            try:
                loader = getattr(module, "__loader__", None)
                src = loader.get_source(name) if loader is not None else None
            except Exception:
                src = None
            if src is None and getattr(module, "__file__", None):
                with open(module.__file__, "rb") as f:
                    src = f.read()
            self.asts[name] = ast.parse(src, module.__file__) if src is not None else None
        return self.asts[name]

    def _refresh(self, sw):
        """Install the variant that still observes what is left, or the original code."""
        need_hits = any(t.calls < self.count_limit for t, _, _, _ in sw.targets)
        unseen = {}
        for t, _, _, lines in sw.targets:
            left = tuple(ln for ln in lines if ln not in t.executed)
            if left:
                unseen[t.index] = left
        key = (need_hits, tuple(sorted(unseen.items())))
        if key == sw.variant:
            return
        if not need_hits and not unseen:
            new = sw.original
        else:
            new = self._compile_variant(sw, need_hits, unseen)
            if new.co_freevars != sw.original.co_freevars:
                raise _Unsupported("instrumented code has other free variables")
        sw.host.__code__ = new
        sw.variant = key

    def _compile_variant(self, sw, need_hits, unseen):
        import ast
        import copy

        node = copy.deepcopy(sw.node)
        if need_hits or unseen:
            _insert_probe_calls(node, [(t.index, name, first) for t, name, first, _ in sw.targets
                                       if need_hits and t.calls < self.count_limit], unseen)
        body = [node]
        for cname in reversed(sw.classes):
            cls = ast.ClassDef(name=cname, bases=[], keywords=[], body=body, decorator_list=[])
            if "type_params" in ast.ClassDef._fields:
                cls.type_params = []
            body = [cls]
        mod = ast.Module(body=list(sw.future) + body, type_ignores=[])
        ast.fix_missing_locations(mod)
        code = compile(mod, sw.original.co_filename, "exec", dont_inherit=True)
        found = _find_code(code, sw.original.co_name, sw.original.co_firstlineno)
        if found is None:
            raise _Unsupported("compiled variant lost the function")
        return found

    def swap_hit(self, index):
        try:
            t = self.targets[index]
            if t.calls < self.count_limit:
                self._count(t)
                if t.calls >= self.count_limit:
                    self._refresh(t.swap)
        except Exception as e:
            self.error("hit", e)

    def swap_line(self, index, lines):
        try:
            t = self.targets[index]
            new = False
            for line in lines:
                if line not in t.executed:
                    self._line(t, line)
                    new = True
            if new and all(u.calls >= self.count_limit for u, _, _, _ in t.swap.targets):
                self._refresh(t.swap)
        except Exception as e:
            self.error("line", e)

    def _wrap_target(self, t, owner, attr, raw, code, nested, line_codes):
        key = (id(owner), attr)
        group = self.groups.get(key)
        if group is None:
            group = _WrapGroup()
            kind = type(raw)
            outer = raw.__func__ if kind in (staticmethod, classmethod) else raw.fget if kind is property else raw
            flags = getattr(getattr(outer, "__code__", None), "co_flags", 0) | code.co_flags
            group.can_trace = not (flags & 0x2A0)  # generator / coroutine / async generator: runs after return
            wrapper = self._make_wrapper(outer, group)
            if kind in (staticmethod, classmethod):
                new = kind(wrapper)
            elif kind is property:
                new = property(wrapper, raw.fset, raw.fdel, raw.__doc__)
            else:
                new = wrapper
            setattr(owner, attr, new)
            group.restore = (owner, attr, raw, new)
            self.groups[key] = group
        for c, lines in line_codes.items():
            self.line_map.setdefault(c, []).append((t, lines))
            group.lines.append((t, lines))
        if nested:
            t.counted = False  # created at run time: seen only while the enclosing call is traced
            self.start_map.setdefault(code, []).append(t)
            group.nested.append(t)
        else:
            group.targets.append(t)

    def _make_wrapper(self, func, group):
        call = self._wrapped_call

        def wrapper(*args, **kwargs):
            if group.done:
                return func(*args, **kwargs)
            return call(group, func, args, kwargs)

        _copy_meta(wrapper, func)
        return wrapper

    def _wrapped_call(self, g, func, args, kwargs):
        trace = False
        try:
            g.calls += 1
            for t in g.targets:
                self._count(t)
            trace = g.can_trace and g.pending() and sys.gettrace() is None
            if g.calls >= self.count_limit:
                g.done = True
                owner, attr, raw, new = g.restore
                if owner.__dict__.get(attr) is new:
                    setattr(owner, attr, raw)  # calls through the class run unwrapped from now on
            if trace:
                for t in g.targets + g.nested:
                    t.traced_calls += 1
                sys.settrace(self._tracer)
        except Exception as e:
            self.error("hit", e)
            trace = False
        if not trace:
            return func(*args, **kwargs)
        try:
            return func(*args, **kwargs)
        finally:
            try:
                if sys.gettrace() == self._tracer:
                    sys.settrace(None)
            except Exception:
                pass

    def _tracer(self, frame, event, arg):
        # the global trace function: called for 'call' events only, while a patched call is traced
        try:
            code = frame.f_code
            for t in self.start_map.get(code, ()):
                if t.calls < self.count_limit:
                    self._count(t)
            if code in self.line_map:
                return self._local_tracer
        except Exception as e:
            self.error("line", e)
        return None

    def _local_tracer(self, frame, event, arg):
        if event != "line":
            return self._local_tracer
        try:
            pending = False
            for t, lines in self.line_map.get(frame.f_code, ()):
                line = frame.f_lineno
                if line in lines and line not in t.executed:
                    self._line(t, line)
                pending = pending or any(ln not in t.executed for ln in lines)
            return self._local_tracer if pending else None
        except Exception as e:
            self.error("line", e)
            return None

    def _start_trigger_thread(self):
        import threading

        path = str(self.cfg["trigger_file"])
        interval = float(self.cfg.get("trigger_poll", 0.5))

        def stamp():
            try:
                st = os.stat(path)
                return (st.st_mtime_ns, st.st_size, st.st_ino)
            except OSError:
                return None

        def poll():
            last = stamp()
            while True:
                time.sleep(interval)
                now = stamp()
                if now is not None and now != last:
                    self.report_coverage("trigger")
                last = now

        th = threading.Thread(target=poll, name="dynspec-probe-trigger", daemon=True)
        th.start()
        self.trigger_thread = th
