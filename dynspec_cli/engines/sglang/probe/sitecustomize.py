"""dynspec probe bootstrap, imported by `site` in every Python process started with this folder on
PYTHONPATH (the sglang launcher, its spawned schedulers, every TP/DP rank).

Two jobs, both stdlib-only and both unable to change what the process does:
1. when DYNSPEC_PROBE is set, start the probe (``_dynspec_probe.install``; see README.md beside this
   file). Nothing is loaded or printed when it is not set.
2. run the ``sitecustomize`` this file shadows: the next one on sys.path after this folder. It is
   executed as the module ``sitecustomize`` (so ``import sitecustomize`` still gives it), and what it
   raises propagates exactly as it would have without us (``site`` prints its usual message).
"""


def _dynspec_start():
    import os

    if not os.environ.get("DYNSPEC_PROBE"):
        return
    try:
        import _dynspec_probe

        _dynspec_probe.install()
    except Exception as e:  # install() reports its own errors; this guards the import of the probe
        try:
            import json

            line = json.dumps({"v": 2, "event": "error", "ts": __import__("time").time(), "pid": os.getpid(),
                               "ppid": os.getppid(), "role": "other", "where": "bootstrap",
                               "error": "%s: %s" % (type(e).__name__, str(e)[:500])}, separators=(",", ":"))
            os.write(2, b"DYNSPEC-PROBE " + line.encode("ascii", "replace") + b"\n")
        except Exception:
            pass


def _dynspec_next_sitecustomize():
    """Spec of the sitecustomize that sys.path would give if this folder were not on it."""
    import os
    import sys

    here = os.path.realpath(os.path.dirname(os.path.abspath(__file__)))

    def real(p):
        try:
            return os.path.realpath(p or os.curdir)
        except Exception:
            return p

    entries = list(sys.path)
    after = entries
    for i, p in enumerate(entries):
        if real(p) == here:
            after = entries[i + 1:]
            break
    after = [p for p in after if real(p) != here]
    try:
        path_finder = sys.modules["_frozen_importlib_external"].PathFinder
    except (KeyError, AttributeError):
        from importlib.machinery import PathFinder as path_finder
    return path_finder.find_spec("sitecustomize", after)


def _dynspec_chain():
    import sys

    try:
        spec = _dynspec_next_sitecustomize()
    except Exception:
        return  # a broken path entry: site would have found nothing usable either
    if spec is None or spec.loader is None:
        return
    try:
        module_from_spec = sys.modules["_frozen_importlib"].module_from_spec
    except (KeyError, AttributeError):
        from importlib.util import module_from_spec
    module = module_from_spec(spec)
    # the import of `sitecustomize` in progress returns whatever sys.modules holds when we finish
    sys.modules["sitecustomize"] = module
    spec.loader.exec_module(module)


_dynspec_start()
_dynspec_chain()
