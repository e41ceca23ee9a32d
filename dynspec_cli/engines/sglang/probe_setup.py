"""Prepare sglang's in-server probe (probe/ beside this file) for a server launch, and read its lines.

The probe is a folder holding a stdlib-only ``sitecustomize.py``: put it first on the server's
PYTHONPATH and set DYNSPEC_PROBE to a JSON config, and every Python process of the server (launcher,
spawned schedulers, every TP/DP rank) writes ``DYNSPEC-PROBE {json}`` lines into the server log.
Leaving both variables out (``--no-probe``) leaves the server untouched.

    env.update(probe_env(targets, existing_pythonpath=env.get("PYTHONPATH")))
    print(one_liner(targets))   # for people who start servers themselves

Line and config schemas: probe/README.md beside this file.
"""
from __future__ import annotations

import json
import os
import shlex
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Optional, Sequence, Union

from dynspec_cli import inject
from dynspec_cli.evidence.probe_lines import PREFIX, SCHEMA_VERSION  # noqa: F401 - the protocol's owner
from dynspec_cli.evidence.probe_lines import parse_line as parse_probe_line  # noqa: F401

if TYPE_CHECKING:
    from dynspec_cli.knowledge.features import Feature

PROBE_DIR = inject.script("engines/sglang/probe")
PROBE_FILES = ("sitecustomize.py", "_dynspec_probe.py", "_dynspec_probe_events.py", "_dynspec_probe_code.py")
ENV_VAR = "DYNSPEC_PROBE"
EVENTS = ("start", "entry", "sglang", "server_args", "module", "worker", "hit", "hunk", "coverage", "error")
# the roles of preflight's hunk entries (hunks.py) the probe watches: comments change nothing
# that runs, server_args.py hunks are judged as flags, a plugin's own files are not sglang's modules
HUNK_ROLES = ("behaviour", "marker", "marker+behaviour")
WATCHED_ROLES = HUNK_ROLES
ROLES = ("launcher", "scheduler", "detokenizer", "tokenizer", "dp_controller", "other")

_OPTIONS = {
    "package": str,
    "worker_prefix": str,
    "count_limit": int,
    "line_hits": bool,
    "monitoring": bool,
    "sigterm": str,
    "signal": (str, int),
    "trigger_file": str,
    "trigger_poll": (int, float),
    "server_args_fields": list,
    "fault": (str, list),
}


def normalize_targets(targets: Iterable[Mapping[str, Any]]) -> list[dict]:
    """Validated copies of ``{file, class, function, lines}`` targets (class and function optional:
    without a function the probe takes the function holding the first patch line)."""
    out = []
    for i, t in enumerate(targets):
        if not isinstance(t, Mapping):
            raise ValueError(f"target {i}: expected a mapping, got {type(t).__name__}")
        file = t.get("file")
        if not isinstance(file, str) or not file.endswith(".py"):
            raise ValueError(f"target {i}: 'file' must be a .py path (absolute or like sglang/srt/...), got {file!r}")
        cls, fn = t.get("class"), t.get("function")
        for key, val in (("class", cls), ("function", fn)):
            if val is not None and not (isinstance(val, str) and val):
                raise ValueError(f"target {i}: {key!r} must be a non-empty string or absent, got {val!r}")
        lines = t.get("lines") or []
        if isinstance(lines, (str, bytes)) or not all(isinstance(n, int) and n > 0 for n in lines):
            raise ValueError(f"target {i}: 'lines' must be positive line numbers, got {lines!r}")
        if fn is None and not lines:
            raise ValueError(f"target {i}: give a function or patch lines")
        entry = {"file": file.replace(os.sep, "/") if not os.path.isabs(file) else file}
        if cls:
            entry["class"] = cls
        if fn:
            entry["function"] = fn
        entry["lines"] = sorted(set(lines))
        if t.get("hunk") is not None:  # one hunk of the diff (schema v2): reported by "hunk" lines
            if not isinstance(t["hunk"], (int, str)) or isinstance(t["hunk"], bool):
                raise ValueError(f"target {i}: 'hunk' must be an id (int or string), got {t['hunk']!r}")
            entry["hunk"] = t["hunk"]
            role = t.get("role")
            if role is not None and role not in HUNK_ROLES:
                raise ValueError(f"target {i}: 'role' must be one of {', '.join(HUNK_ROLES)}, got {role!r}")
            if role:
                entry["role"] = role
        out.append(entry)
    return out


def probe_config(targets: Iterable[Mapping[str, Any]], **options: Any) -> dict:
    """The DYNSPEC_PROBE document. Options (all optional; see the README): package, worker_prefix,
    count_limit, line_hits, monitoring, sigterm ("launcher" | "all" | "none"), signal (e.g. "SIGUSR2"),
    trigger_file, trigger_poll, server_args_fields, fault (tests only)."""
    cfg: dict[str, Any] = {"v": SCHEMA_VERSION, "targets": normalize_targets(targets)}
    for key, value in options.items():
        if value is None:
            continue
        if key not in _OPTIONS:
            raise ValueError(f"unknown probe option {key!r} (known: {', '.join(sorted(_OPTIONS))})")
        if not isinstance(value, _OPTIONS[key]) or (isinstance(value, bool) and _OPTIONS[key] is int):
            raise ValueError(f"probe option {key!r}: unexpected value {value!r}")
        cfg[key] = value
    return cfg


def probe_env(targets: Iterable[Mapping[str, Any]], *, existing_pythonpath: Optional[str],
              probe_dir: Union[str, os.PathLike, None] = None, **options: Any) -> dict[str, str]:
    """Environment additions that inject the probe: PYTHONPATH with the probe folder first (followed by
    ``existing_pythonpath``, never by an empty entry, which would put the cwd on sys.path) and
    DYNSPEC_PROBE. ``probe_dir``: where the probe folder is on the server's host (default: here)."""
    pdir = str(probe_dir or PROBE_DIR)
    rest = [p for p in (existing_pythonpath or "").split(os.pathsep) if p and p != pdir]
    return {
        "PYTHONPATH": os.pathsep.join([pdir, *rest]),
        ENV_VAR: json.dumps(probe_config(targets, **options), separators=(",", ":")),
    }


def one_liner(targets: Iterable[Mapping[str, Any]], *, command: Union[str, Sequence[str]] = (
        "python -m sglang.launch_server ..."), probe_dir: Union[str, os.PathLike, None] = None,
        **options: Any) -> str:
    """A POSIX-shell line that starts the server with the probe, e.g.
    ``PYTHONPATH=/p/probe${PYTHONPATH:+:$PYTHONPATH} DYNSPEC_PROBE='{...}' python -m sglang.launch_server ...``.
    ``command``: the launch command, a string (pasted verbatim) or an argv list (quoted)."""
    pdir = str(probe_dir or PROBE_DIR)
    cfg = json.dumps(probe_config(targets, **options), separators=(",", ":"))
    cmd = command if isinstance(command, str) else " ".join(shlex.quote(str(a)) for a in command)
    return f"PYTHONPATH={shlex.quote(pdir)}${{PYTHONPATH:+:$PYTHONPATH}} {ENV_VAR}={shlex.quote(cfg)} {cmd}"


def precompile_command(python: str = "python3", probe_dir: Union[str, os.PathLike, None] = None) -> list[str]:
    """argv that writes the probe's bytecode for the server's interpreter (run it on the server's host,
    e.g. through its Host, after copying the files there). Every server process then loads the probe
    from bytecode (~3 ms) instead of compiling it (~15-20 ms), also under PYTHONDONTWRITEBYTECODE=1, which
    stops Python from writing bytecode but not from reading it."""
    return [python, "-m", "compileall", "-q", str(probe_dir or PROBE_DIR)]


def probe_files() -> dict[str, bytes]:
    """The probe folder's files, to copy to a remote host (then pass ``probe_dir=`` its location)."""
    return {name: (PROBE_DIR / name).read_bytes() for name in PROBE_FILES}


def probe_targets(feature: "Feature", preflight_result: Optional[dict], patched: list[str] | None) -> list[dict]:
    """What the in-server probe instruments: every hunk of the judged `--patch` diff (preflight's
    `hunks`), else where preflight found the patch, else the feature's usual location
    (module-relative, so it resolves in whatever sglang the server imports)."""
    hunks = hunk_targets((preflight_result or {}).get("hunks") or [])
    if hunks:
        return hunks
    found = [p for p in (preflight_result or {}).get("patched") or [] if p.get("file")]
    if found:
        return [{"file": p["file"], "class": p.get("class"), "function": p.get("function"),
                 "lines": [p["line"]] if p.get("line") else []} for p in found]
    out = []
    for loc in feature.patch:
        if patched and loc.cls not in patched:
            continue
        out.append({"file": f"sglang/srt/speculative/{loc.module.replace('.', '/')}.py", "class": loc.cls,
                    "function": loc.function, "lines": []})
    return out


def _module_path(diff_path: str) -> str:
    """`python/sglang/srt/x.py` (a git diff of an sglang checkout) as the probe's module-relative
    path `sglang/srt/x.py`: resolves in whatever sglang the server imports."""
    p = diff_path.replace(os.sep, "/")
    at = p.find("sglang/")
    return p[at:] if at >= 0 else p


def hunk_targets(hunks: Iterable[Mapping[str, Any]]) -> list[dict]:
    """One probe target per judged hunk scope (preflight JSON `hunks`: file, installed, class,
    function, lines, role) that runs code: behaviour and marker hunks; comment, flag (server_args.py)
    and plugin hunks are not watched (see WATCHED_ROLES). The hunk id is its index in `hunks`, so a
    `hunk` probe line names the preflight entry it proves."""
    out = []
    for i, h in enumerate(hunks):
        if h.get("role") not in WATCHED_ROLES or not h.get("lines"):
            continue
        # module-relative (from the installed path when there is one): the server may run on another host
        file = _module_path(h.get("installed") or h.get("file") or "")
        if not file.endswith(".py"):
            continue
        out.append({"file": file, "class": h.get("class") or None, "function": h.get("function") or None,
                    "lines": [n for n in h["lines"] if isinstance(n, int) and n > 0], "hunk": i, "role": h["role"]})
    return out
