"""What a stack frame in a log proves: which worker module's code ran, which scheduler loop ran,
whether the process was still starting. The rules are data (configs/sglang/frames.toml); frames
come from Python tracebacks, faulthandler dumps and py-spy dumps alike."""
from __future__ import annotations

import functools
import re
from typing import Optional

import msgspec



class FrameRules(msgspec.Struct, frozen=True):  # msgspec Structs, not dataclasses: a dataclass costs `verify` ~0.7 ms of start-up to build
    worker_dir: str
    startup: tuple[tuple[re.Pattern, frozenset], ...]
    loops: tuple[tuple[Optional[re.Pattern], frozenset, Optional[str], bool], ...]
    families: tuple[tuple[re.Pattern, frozenset], ...] = ()


@functools.lru_cache(maxsize=None)
def rules() -> FrameRules:
    from dynspec_cli.engines.sglang.knowledge import tables_dir
    from dynspec_cli.resources import tomllib

    d = tomllib.loads((tables_dir() / "frames.toml").read_text(encoding="utf-8"))
    startup = tuple((re.compile(r["path"]), frozenset(r["functions"])) for r in d.get("startup", []))
    loops = tuple((re.compile(r["path"]) if r.get("path") else None, frozenset(r.get("functions", [])),
                   r.get("line"), bool(r["overlap"])) for r in d.get("loop", []))
    families = tuple((re.compile(r["path"]), frozenset(r["workers"])) for r in d.get("family", []))
    return FrameRules(d["worker_dir"], startup, loops, families)


def family(path: str) -> Optional[frozenset]:
    """The workers that use the (non-worker) speculative module a frame's file is, if listed."""
    norm = path.replace("\\", "/")
    return next((workers for rx, workers in rules().families if rx.search(norm)), None)


def worker_module(path: str, known: set[str]) -> Optional[str]:
    """The worker module (as in modules.toml, e.g. "eagle_worker_v2") a frame's file is, if any.
    A py-spy frame may carry only the file's basename (`eagle_worker.py`)."""
    r = rules()
    norm = path.replace("\\", "/")
    if r.worker_dir in norm:
        mod = norm.split(r.worker_dir, 1)[1]
    elif "/" not in norm or norm.startswith("speculative/"):
        mod = norm.split("speculative/", 1)[-1]
    else:
        return None
    if not mod.endswith(".py"):
        return None
    mod = mod[:-3].replace("/", ".")
    return mod if mod in known else None


def is_startup(path: str, function: str) -> bool:
    norm = path.replace("\\", "/")
    return any(function in funcs and rx.search(norm) for rx, funcs in rules().startup)


def overlap_of(path: str, function: str) -> Optional[bool]:
    norm = path.replace("\\", "/")
    for rx, funcs, line_id, overlap in rules().loops:
        if line_id:
            continue
        if (funcs and function in funcs) or (rx is not None and not funcs and rx.search(norm)):
            return overlap
    return None


def overlap_of_line(row_id: str) -> Optional[bool]:
    return next((ov for _, _, line_id, ov in rules().loops if line_id == row_id), None)
