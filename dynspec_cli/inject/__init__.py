"""What runs inside foreign interpreters (stdlib only, Python 3.8+), and how it gets there.

`script(name)` is the one place that finds a program of this package: a file or folder here (the
follower, the load generator, the host check), or one an engine ships in its folder (its inspector,
its probe: "engines/<name>/inspector"). `program(name)` is the text that runs: a file as it is, a
folder (one module per concern, importable here for tests) bundled into one script with the
inspectors' shared module (inspector_common.py) beside its own.

`command(python)` and `stdin(...)` ship a program the way the preflight inspector needs it: the
command line is `python -c BOOTSTRAP`, constant and data-free on every host, and everything else
(environment values such as HF_TOKEN, the program, its input: a 100 KB diff) travels on stdin, so
nothing of it shows in any process list, locally or on the SSH host, and no argv size limit applies.
"""
from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Mapping, Optional

def script(name: str) -> Path:
    """The file or folder `name` of dynspec_cli/inject (e.g. "loadgen.py"), or a path inside the
    package (e.g. "engines/sglang/inspector")."""
    from dynspec_cli import resources

    return resources.inject(name)


@functools.lru_cache(maxsize=None)
def program(name: str) -> str:
    """The text to run with a foreign `python`: a file's own text, or a folder bundled into one
    script that imports its modules from memory (package `_dynspec_<folder name>`, the shared
    inspector module among them as `inspector_common`) and calls `main.run()`."""
    path = script(name)
    if path.is_file():
        return path.read_text(encoding="utf-8")
    package = "_dynspec_" + path.name
    sources = {package: (path / "__init__.py").read_text(encoding="utf-8")}
    for f in sorted(path.glob("*.py")):
        if f.name not in ("__init__.py", "__main__.py"):
            sources[f"{package}.{f.stem}"] = f.read_text(encoding="utf-8")
    from dynspec_cli import resources

    shared = resources.inject("inspector_common.py")
    sources.setdefault(f"{package}.{shared.stem}", shared.read_text(encoding="utf-8"))
    folder = f"dynspec_cli/{name}" if "/" in name else f"dynspec_cli/inject/{name}"
    return _BUNDLE.replace("@PACKAGE@", repr(package)).replace("@FOLDER@", repr(folder)) \
                  .replace("@SOURCES@", repr(sources))


# Runs the modules from a dict of sources, as a meta-path finder, so relative imports between them
# work as they do in the folder; tracebacks show the folder's file names and lines. A failure before
# main() runs is still one JSON document (pipx's venv_metadata_inspector contract).
_BUNDLE = r'''import sys


def _dynspec_bundle():
    import importlib
    import importlib.abc
    import importlib.util
    import linecache

    package, folder, sources = @PACKAGE@, @FOLDER@, @SOURCES@

    class Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
        def find_spec(self, name, path=None, target=None):
            if name not in sources:
                return None
            return importlib.util.spec_from_loader(name, self, is_package=name == package)

        def create_module(self, spec):
            return None

        def exec_module(self, module):
            name = module.__name__
            text = sources[name]
            filename = "%s/%s.py" % (folder, "__init__" if name == package else name.rsplit(".", 1)[1])
            linecache.cache[filename] = (len(text), None, text.splitlines(True), filename)
            exec(compile(text, filename, "exec", dont_inherit=True), module.__dict__)

    sys.meta_path.insert(0, Finder())
    return importlib.import_module(package + ".main")


try:
    _main = _dynspec_bundle()
except BaseException as e:
    import json
    import traceback

    sys.stdout.write(json.dumps({"ok": False, "error": "%s: %s" % (type(e).__name__, e),
                                 "exception_traceback": traceback.format_exc()}) + "\n")
    sys.stdout.flush()
    sys.exit(1)
_main.run()
'''

# Reads "<12 digits>" + that many bytes from fd 0 exactly (no buffering: what follows stays in the
# pipe for the next reader). Section 1 is the environment as JSON: when it changes anything, the
# interpreter re-executes itself with it (PYTHONPATH and the like only act at start-up), which keeps
# values off every command line; `env NAME=VALUE python` would show them. Section 2 is the program,
# run as __main__; it reads its own input from the rest of stdin.
_READ = ("import os,sys\n"
         "def _r(n):\n"
         " b=b''\n"
         " while len(b)<n:\n"
         "  c=os.read(0,n-len(b))\n"
         "  if not c:raise SystemExit('dynspec: the input on stdin ended early')\n"
         "  b+=c\n"
         " return b\n")
_TAIL = ("p=_r(int(_r(12)))\n"
         "sys.argv=['-c']\n"
         "exec(compile(p,'<dynspec>','exec'),{'__name__':'__main__'})\n")
BOOTSTRAP = _READ + ("e=_r(int(_r(12)))\n"
                     "if e:\n"
                     " import json\n"
                     " o=dict(os.environ);v=dict(o)\n"
                     " for k,x in json.loads(e.decode('utf-8')).items():\n"
                     "  v.pop(k,None) if x is None else v.__setitem__(k,x)\n"
                     " if v!=o:x=sys.executable or 'python3';os.execvpe(x,[x,'-c',%r],v)\n" % (_READ + _TAIL)) + _TAIL


def command(python: str) -> list[str]:
    """argv that runs a program sent with `stdin()`: holds no data, only the interpreter's path."""
    return [python, "-c", BOOTSTRAP]


def stdin(text: str, input: bytes = b"", env: Optional[Mapping[str, str]] = None) -> bytes:
    """What to write to the stdin of `command(python)`: env (added to the host's environment of the
    interpreter; None unsets), the program `text`, then `input`, which the program reads from its stdin."""
    env_json = json.dumps(dict(env)).encode("utf-8") if env else b""
    prog = text.encode("utf-8")
    return b"%012d" % len(env_json) + env_json + b"%012d" % len(prog) + prog + input
