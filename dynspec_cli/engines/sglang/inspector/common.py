"""Small helpers every concern uses; `Source` (one Python file read and parsed once), the module
resolution and the marker scan are the inspectors' shared module's (dynspec_cli/inject/inspector_common.py)."""
import os
import time

try:  # bundled by inject.program(): the shared module travels beside these modules
    from . import inspector_common as shared
except ImportError:  # run in place from dynspec's tree (tests, `python -m dynspec_cli.engines.sglang.inspector`)
    from dynspec_cli.inject import inspector_common as shared

Source = shared.Source
_read_bytes = shared.read_bytes
_dotted = shared.dotted


SCHEMA = "dynspec-inspector/1"
_T0 = time.perf_counter()
_MAX_LIST = 500
_MAX_TEXT = 4000


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


def _subscript_slice(node):
    s = node.slice
    if s.__class__.__name__ == "Index":  # Python 3.8
        s = s.value
    return s
