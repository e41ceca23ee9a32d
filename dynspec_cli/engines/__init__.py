"""The engine registry: one line per engine, its folder `dynspec_cli/engines/<name>/` holding its
knowledge, rules, judge, preflight and inspector behind the contract of engines/protocol.py.

Adding an engine is its folder, its tables (the folder it names as `tables`) and one line in
ENGINES below; nothing outside `engines/` names an engine (tests/seam). A member is imported when
first asked for (`get`), by its module path: `dynspec verify` of an sglang log loads nothing of
vLLM's but the face of its folder, which `--engine auto` asks how a vLLM log looks.
"""
from __future__ import annotations

import importlib
from typing import Optional

from dynspec_cli.engines.protocol import Engine, Serving  # noqa: F401 - the contract, named here too

ENGINES = {
    "sglang": "dynspec_cli.engines.sglang",
    "vllm": "dynspec_cli.engines.vllm",
}
# The engine of a log nothing identifies, and of a feature, record or profile that names none
# (records written before records carried an engine): dynspec began as sglang's tool.
DEFAULT = "sglang"
AUTO = "auto"  # `--engine auto`: told by the log's first lines (`detect`), else the feature's engine
HEAD_LINES = 200  # `--engine auto` reads at most this many lines (and 256 KB) of the log's start

_loaded: dict[str, Engine] = {}


class EngineError(ValueError):
    """Unknown engine name (one line, exit 2)."""


def names() -> tuple[str, ...]:
    """The registered engines, in the registry's order (the order `--engine auto` asks them in)."""
    return tuple(ENGINES)


def get(name: str) -> Engine:
    """The engine object of the member `name` (its folder's ENGINE), imported on first use."""
    engine = _loaded.get(name)
    if engine is None:
        if name not in ENGINES:
            raise EngineError(f"unknown engine {name!r}: choose one of {', '.join(names() + (AUTO,))}")
        engine = _loaded[name] = importlib.import_module(ENGINES[name]).ENGINE
    return engine


def name_of(feature) -> str:
    """The engine a feature is for (its file's `engine =`, else DEFAULT)."""
    return getattr(feature, "engine", None) or DEFAULT


def of(feature) -> Engine:
    """The engine a feature is for, once it has checked what in the feature only it can check (the
    [plugin] section against its plugin framework: ConfigError naming the file, exit 2)."""
    engine = get(name_of(feature))
    if getattr(feature, "checked_by", None) != engine.name:
        engine.check_feature(feature)
        feature.checked_by = engine.name
    return engine


def by_version_key(key: str) -> Optional[Engine]:
    """The engine whose release a record or option named `key` holds (e.g. `--sglang-version`)."""
    return next((e for e in map(get, names()) if e.version_key == key), None)


def all_serving() -> dict[str, Serving]:
    """name -> Serving of every engine (the profiles' and Slurm's checks of what may run where)."""
    return {n: get(n).serving for n in names()}


def detect(head: list[str]) -> str:
    """The engine that wrote a log, from its first lines: every engine's Detection at once, line by
    line (evidence/detect.py); DEFAULT when no line decides."""
    from dynspec_cli.evidence.detect import which

    return which(head, [(n, get(n).detection()) for n in names()]) or DEFAULT


def head_of_file(path: str) -> list[str]:
    import os
    import stat

    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return []  # a pipe or device is read once, by the judge (`head=`)
        with open(path, "rb") as fh:
            data = fh.read(256 * 1024)
    except OSError:
        return []
    return head_lines(data)


def head_lines(data: bytes) -> list[str]:
    return data.decode("utf-8", errors="replace").splitlines()[:HEAD_LINES]


def resolve(name: Optional[str], path: Optional[str] = None, feature=None, *, head: Optional[bytes] = None) -> str:
    """The engine for a verify run: the given name, the feature's engine, or detected from the log
    (`head`: its first bytes, for a log that can be read only once)."""
    name = (name or AUTO).lower()
    if name != AUTO:
        get(name)  # (EngineError for a name no member has)
        return name
    head = head_lines(head) if head is not None else head_of_file(path) if path else []
    found = detect(head) if head else None
    if found and found != DEFAULT:
        return found
    # an empty or not yet recognisable log (--follow from the first byte): the feature's engine
    return name_of(feature)
