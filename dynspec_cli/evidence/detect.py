"""Which engine wrote a log, told from its first lines (`--engine auto`, engines/__init__.py), with
no engine's rules loaded: each engine gives its Detection (engines/protocol.py, from its
detect.toml), and the lines are read once against all of them. The first line only one engine
writes decides (the engines asked in the registry's order); else enough lines with an engine's
prefix make its log, unless the prefix names another engine's source file (older sglang builds
and custom logging configs write vLLM's `LEVEL mm-dd hh:mm:ss [file.py:N]` shape too)."""
from __future__ import annotations

from typing import Any, Optional

from dynspec_cli.evidence.lines import WRAPPER_PATTERNS, strip_noise, wrapped
from dynspec_cli.knowledge.tables import regex

# the wrappers a log may carry around a process tag: docker compose, Kubernetes, docker logs -t
_OUTER = [p for p in WRAPPER_PATTERNS if "pid=" not in p]


def which(head: list[str], engines: list[tuple[str, Any]]) -> Optional[str]:
    """The engine (a name of `engines`: (name, its Detection, engines/protocol.py)) whose log `head`
    starts, or None when no line decides.
    (Each pattern is compiled when a line first reaches it: an sglang log is told by its first.)"""
    prefixed = {name: 0 for name, _ in engines}
    for raw in head:
        text = strip_noise(raw)
        for w in _OUTER if wrapped(text) else ():
            m = regex(w).match(text)
            if m and m.end() < len(text):
                text = text[m.end():]
        for name, d in engines:
            if any(regex(p).search(text) for p in d.strong):
                return name
        for name, d in engines:
            if d.prefix is None:
                continue
            m = regex(d.tag).match(text) if d.tag else None
            pm = regex(d.prefix).match(text[m.end():] if m else text)
            if pm:
                src = pm.group("src").rsplit("/", 1)[-1]
                owner = next((other for other, od in engines if other != name and src in od.files), None)
                if owner is not None:
                    return owner
                prefixed[name] += 1
    return next((name for name, d in engines if d.prefixed and prefixed[name] >= d.prefixed), None)
