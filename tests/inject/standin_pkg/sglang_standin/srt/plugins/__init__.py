"""The stand-in's general plugins, as sglang 0.5.11+ has them (sglang/srt/plugins/__init__.py and
hook_registry.py, cut to what tests need): entry points of group sglang.srt.plugins, the allow-list
SGLANG_PLUGINS (comma-separated, stripped), each plugin's function run, then its hooks applied by
setattr on the resolved target. Called first in run_scheduler_process, as sglang does."""
import functools
import os
import pkgutil
from importlib.metadata import entry_points

_hooks = []
_loaded = False


def register(target, hook, hook_type="after"):
    _hooks.append((target, hook, hook_type))


def _wrap(original, hook, hook_type):
    @functools.wraps(original)
    def wrapper(*args, **kwargs):
        if hook_type == "before":
            hook(*args, **kwargs)
            return original(*args, **kwargs)
        if hook_type == "around":
            return hook(original, *args, **kwargs)
        if hook_type == "replace":
            return hook(*args, **kwargs)
        result = original(*args, **kwargs)
        return hook(result, *args, **kwargs) or result
    return wrapper


def _group(name):
    # The probe promises Python 3.8, whose entry_points() takes no group= and returns a dict.
    found = entry_points()
    return found.select(group=name) if hasattr(found, "select") else found.get(name, [])


def load_plugins():
    global _loaded
    if _loaded:
        return
    _loaded = True
    allowed = os.environ.get("SGLANG_PLUGINS")
    allowed = {x.strip() for x in allowed.split(",") if x.strip()} if allowed else None
    for ep in _group("sglang.srt.plugins"):
        if allowed is None or ep.name in allowed:
            ep.load()()
    for target, hook, hook_type in _hooks:
        path, attr = target.rsplit(".", 1)
        obj = pkgutil.resolve_name(path)
        setattr(obj, attr, _wrap(getattr(obj, attr), hook, hook_type))
