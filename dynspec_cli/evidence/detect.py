"""Which engine wrote a log, told from its first lines (`--engine auto`, engines/__init__.py), with
neither engine's rules loaded: the sglang path of `verify` never imports vLLM's classifier or
tables. What tells them apart is configs/vllm/detect.toml and configs/sglang/detect.toml."""
from __future__ import annotations

from pathlib import Path

from dynspec_cli.evidence.lines import WRAPPER_PATTERNS, strip_noise, wrapped
from dynspec_cli.knowledge import tables
from dynspec_cli.knowledge.tables import regex

# vLLM's process tag and line prefix (vllm/logger.py), also read by evidence/vllm_rules.py
VLLM_PROC = r"^\((?P<proc>[A-Za-z][\w]*?)(?:_(?P<role>DP|TP|PP|EP)(?P<rank>\d+))?(?: rank=(?P<wrank>\d+))? pid=(?P<pid>\d+)(?:, ip=[\d.:a-fA-F]+)?\) ?"
VLLM_PREFIX = r"^(?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL) (?P<ts>\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?) \[?(?P<src>[\w./<>-]+):(?P<lineno>\d+)\] ?"
# the wrappers a vLLM log may carry around its process tag: docker compose, Kubernetes, docker logs -t
_OUTER = [p for p in WRAPPER_PATTERNS if "pid=" not in p]


def _rules() -> tuple[list[str], int, list[str], frozenset]:
    """(vLLM's strong patterns, how many prefixed lines make a vLLM log, sglang's strong patterns,
    sglang's file names), parsed once per change of the two files (tables.cached)."""
    d = tables.configs_dir()
    paths = [d / "vllm" / "detect.toml", d / "sglang" / "detect.toml", Path(__file__)]

    def build():
        from dynspec_cli.resources import tomllib

        v, sg = (tomllib.loads(p.read_text()) for p in paths[:2])
        return list(v["strong"]), int(v["prefixed"]), list(sg["strong"]), frozenset(sg["files"])

    return tables.cached("detect", paths, build)


def looks_like_vllm(head: list[str]) -> bool:
    """True when the first lines of a log were written by vLLM: the first line only one engine
    writes decides; else enough lines with vLLM's prefix, unless the prefix names an sglang file.
    (Each pattern is compiled when a line first reaches it: an sglang log is told by its first.)"""
    vllm_strong, enough, sglang_strong, sglang_files = _rules()
    prefixed = 0
    for raw in head:
        text = strip_noise(raw)
        for w in _OUTER if wrapped(text) else ():
            m = regex(w).match(text)
            if m and m.end() < len(text):
                text = text[m.end():]
        if any(regex(p).search(text) for p in sglang_strong):
            return False
        if any(regex(p).search(text) for p in vllm_strong):
            return True
        m = regex(VLLM_PROC).match(text)
        pm = regex(VLLM_PREFIX).match(text[m.end():] if m else text)
        if pm:
            if pm.group("src").rsplit("/", 1)[-1] in sglang_files:
                return False
            prefixed += 1
    return prefixed >= enough
