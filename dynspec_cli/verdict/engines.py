"""Engines as plug-ins: everything engine-specific that `verify` (and later preflight/launch) needs,
behind one small interface. An engine is its knowledge (configs/<engine>/*.toml, loaded once), a
classifier (log lines -> observations) and a judge (observations -> Verdict); the feeding,
following, reporting and exit codes are shared.

    name                      "sglang" | "vllm"
    detect(head) -> bool      do these first lines of a log come from this engine?
    knowledge()               the engine's validated tables (cached)
    classifier(feature)       an object with .classify(Line) -> list[Observation]
    judge(feature, patched, version)
                              an object with .feed(Observation), .verdict(at_eof=, quiet_for=) -> Verdict,
                              .decided(Verdict) -> bool, .launches
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Callable, Optional

HEAD_LINES = 200  # `--engine auto` reads at most this many lines (and 256 KB) of the log's start


@dataclass(frozen=True)
class Engine:
    name: str
    detect: Callable[[list[str]], bool]
    knowledge: Callable[[], object]
    classifier: Callable[..., object]
    judge: Callable[..., object]


def _sglang() -> Engine:
    from dynspec_cli.evidence.rules import Classifier
    from dynspec_cli.knowledge.sglang import knowledge
    from dynspec_cli.verdict.judge import Judge

    return Engine(
        "sglang", lambda head: True, knowledge,
        lambda feature: Classifier(knowledge(), feature),
        lambda feature, patched=None, version=None: Judge(knowledge(), feature, patched_classes=patched, sglang_version=version))


def _vllm() -> Engine:
    from dynspec_cli.evidence.vllm_rules import VllmClassifier, looks_like_vllm
    from dynspec_cli.knowledge.vllm import knowledge
    from dynspec_cli.verdict.vllm_judge import VllmJudge

    return Engine(
        "vllm", looks_like_vllm, knowledge,
        lambda feature: VllmClassifier(knowledge(), feature),
        lambda feature, patched=None, version=None: VllmJudge(knowledge(), feature, patched_classes=patched, engine_version=version))


_FACTORIES: dict[str, Callable[[], Engine]] = {"sglang": _sglang, "vllm": _vllm}
# Tried in this order by `auto`; sglang is the fallback (its lines have no single fixed prefix).
DETECT_ORDER = ("vllm",)
NAMES = ("sglang", "vllm", "auto")


class EngineError(ValueError):
    """Unknown engine name (one line, exit 2)."""


def get(name: str) -> Engine:
    try:
        return _FACTORIES[name]()
    except KeyError:
        raise EngineError(f"unknown engine {name!r}: choose one of {', '.join(NAMES)}") from None


def detect(head: list[str]) -> str:
    for name in DETECT_ORDER:
        if get(name).detect(head):
            return name
    return "sglang"


def head_of_file(path: str) -> list[str]:
    try:
        with open(path, "rb") as fh:
            data = fh.read(256 * 1024)
    except OSError:
        return []
    return data.decode("utf-8", errors="replace").splitlines()[:HEAD_LINES]


def resolve(name: Optional[str], path: Optional[str] = None, feature=None) -> str:
    """The engine for a verify run: the given name, the feature's engine, or detected from the log."""
    name = (name or "auto").lower()
    if name not in NAMES:
        raise EngineError(f"unknown engine {name!r}: choose one of {', '.join(NAMES)}")
    if name != "auto":
        return name
    head = head_of_file(path) if path else []
    found = detect(head) if head else None
    if found and found != "sglang":
        return found
    # an empty or not yet recognisable log (--follow from the first byte): the feature's engine
    return getattr(feature, "engine", None) or "sglang"
