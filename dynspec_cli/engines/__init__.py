"""Engines as plug-ins: everything engine-specific that `verify`, preflight and launch need,
behind one small interface. An engine is its knowledge (configs/<engine>/*.toml, loaded once), a
classifier (log lines -> observations) and a judge (observations -> Verdict); the feeding,
following, reporting and exit codes are shared.

    name                      "sglang" | "vllm"
    knowledge()               the engine's validated tables (cached)
    classifier(feature)       an object with .classify(Line) -> list[Observation]
    judge(feature, patched, version)
                              an object with .feed(Observation), .verdict(at_eof=, quiet_for=, text_lines=)
                              -> Verdict (verdict/result.py), .decided(Verdict) -> bool, .exited(Verdict),
                              .launches (each with .last_line and .steady(decode_lines) -> bool)
    preflight(host, python, feature, flags, env, patched, patch_diff=, dynamic=) -> dict
                              the engine's preflight (verdict "reachable" | "dead" | "unknown"); bad
                              flags raise a ValueError the CLI reports in one line
    preflight_text            the preflight result as plain text, or None (the sglang report renders it)

DETECT[name]: the function that tells from a log's first lines whether this engine wrote it, as
"module:function" of a module that loads none of the engine's rules (`--engine auto` on an sglang
log imports nothing of vLLM's).

SERVING[name] (plain data, no import of the engine's judge): how `dynspec launch` starts the engine's
server and asks whether it is ready.
"""
from __future__ import annotations

import importlib
from typing import Callable, Optional

import msgspec

HEAD_LINES = 200  # `--engine auto` reads at most this many lines (and 256 KB) of the log's start


class Serving(msgspec.Struct, frozen=True):  # msgspec Structs, not dataclasses: a dataclass costs `verify` ~0.7 ms of start-up to build
    """How a profile of this engine is started and when its server is ready (run/profiles.py,
    run/watch.py): `python -m MODULE *COMMAND [MODEL_FLAG] MODEL --port P --flag value ...`."""

    module: str  # the server's entry module, run with the profile's python (a profile's `module` overrides it)
    command: tuple[str, ...] = ()  # arguments before the model and the flags
    model_flag: Optional[str] = None  # the profile's `model` is given with this flag (None: as a positional)
    readiness: tuple[str, ...] = ("/health",)  # GET paths asked in turn; the first 200 means ready
    probe: bool = False  # the in-server probe (dynspec_cli/inject/probe) instruments this engine
    # What prove and guard read while the server serves (names from the engines' own source:
    # sglang/srt/metrics/collector.py; vllm/v1/metrics/loggers.py and vllm/v1/spec_decode/metrics.py)
    api: str = "sglang"  # the load generator's request form: sglang's /generate, or "openai" /v1/completions
    metrics_prefix: str = "sglang:"
    counters: tuple[str, ...] = ()  # /metrics counters summed per window (a fall is a reset)
    rank_label: tuple[str, str] = ("dp_rank", "DP")  # the /metrics label naming a DP rank, and how guard names it
    dp_flags: tuple[str, ...] = ("--dp-size", "--dp")  # the server flags that give the number of DP ranks
    startup: tuple[str, ...] = ("server-args-dump",)  # log landmarks written only at start-up (a new one: a restart)
    multi_node: bool = False  # group and Slurm launches know this engine's multi-node flags (--nnodes, --node-rank, ...)


SERVING = {
    # /health_generate runs a real generation; /health answers before the scheduler can serve
    "sglang": Serving("sglang.launch_server", model_flag="--model-path", readiness=("/health_generate", "/health"),
                      probe=True, counters=("sglang:generation_tokens_total", "sglang:num_requests_total",
                                            "sglang:spec_verify_calls_total", "sglang:prompt_tokens_total"),
                      multi_node=True),
    # `vllm serve MODEL`; vLLM has no /health_generate, its /health is 200 once the engine core is up.
    # Its counters carry engine="N" (one per DP engine); prometheus_client adds `_total` to a Counter's name.
    "vllm": Serving("vllm.entrypoints.cli.main", command=("serve",), readiness=("/health",), api="openai",
                    metrics_prefix="vllm:",
                    counters=("vllm:generation_tokens_total", "vllm:request_success_total", "vllm:prompt_tokens_total",
                              "vllm:spec_decode_num_drafts_total", "vllm:spec_decode_num_draft_tokens_total",
                              "vllm:spec_decode_num_accepted_tokens_total"),
                    rank_label=("engine", "engine "), dp_flags=("--data-parallel-size", "-dp"),
                    startup=("non-default-args", "engine-config")),
}


class Engine(msgspec.Struct, frozen=True):
    name: str
    knowledge: Callable[[], object]
    classifier: Callable[..., object]
    judge: Callable[..., object]
    preflight: Callable[..., dict]
    preflight_text: Optional[Callable[[dict], str]] = None


def _sglang() -> Engine:
    from dynspec_cli.evidence.rules import Classifier
    from dynspec_cli.knowledge.sglang import knowledge
    from dynspec_cli.verdict.judge import Judge

    def preflight(host, python, feature, flags, env, patched=None, *, patch_diff=None, dynamic=False):
        from dynspec_cli.verdict import preflight

        return preflight.run(host, python, feature, flags, env, patched=patched, patch_diff=patch_diff, dynamic=dynamic)

    return Engine(
        "sglang", knowledge,
        lambda feature: Classifier(knowledge(), feature),
        lambda feature, patched=None, version=None, hunks=None, diff=None: Judge(knowledge(), feature, patched_classes=patched, sglang_version=version, hunks=hunks, diff=diff),
        preflight)


def _vllm() -> Engine:
    from dynspec_cli.evidence.vllm_rules import VllmClassifier
    from dynspec_cli.knowledge.vllm import knowledge
    from dynspec_cli.verdict.vllm_judge import VllmJudge

    def preflight(host, python, feature, flags, env, patched=None, *, patch_diff=None, dynamic=False):
        from dynspec_cli.verdict import vllm_preflight

        return vllm_preflight.run(host, python, feature, flags, env, dynamic=dynamic)  # (the marker finds the patch)

    def preflight_text(result):
        from dynspec_cli.verdict import vllm_preflight

        return vllm_preflight.render(result)

    return Engine(
        "vllm", knowledge,
        lambda feature: VllmClassifier(knowledge(), feature),
        lambda feature, patched=None, version=None, hunks=None, diff=None: VllmJudge(knowledge(), feature, patched_classes=patched, engine_version=version),
        preflight, preflight_text)


_FACTORIES: dict[str, Callable[[], Engine]] = {"sglang": _sglang, "vllm": _vllm}
# Tried in this order by `auto`; sglang is the fallback (its lines have no single fixed prefix).
DETECT = {"vllm": "dynspec_cli.evidence.detect:looks_like_vllm"}
NAMES = ("sglang", "vllm", "auto")
SERVER_ENGINES = ("sglang", "vllm")  # what a profile's `engine` may say
# The engine of a log nothing identifies, and of a record or profile that names none (records written before
# records carried an engine): dynspec began as sglang's tool.
DEFAULT = "sglang"


class EngineError(ValueError):
    """Unknown engine name (one line, exit 2)."""


def get(name: str) -> Engine:
    try:
        return _FACTORIES[name]()
    except KeyError:
        raise EngineError(f"unknown engine {name!r}: choose one of {', '.join(NAMES)}") from None


def detect(head: list[str]) -> str:
    for name, where in DETECT.items():
        module, function = where.split(":")
        if getattr(importlib.import_module(module), function)(head):
            return name
    return "sglang"


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
    name = (name or "auto").lower()
    if name not in NAMES:
        raise EngineError(f"unknown engine {name!r}: choose one of {', '.join(NAMES)}")
    if name != "auto":
        return name
    head = head_lines(head) if head is not None else head_of_file(path) if path else []
    found = detect(head) if head else None
    if found and found != "sglang":
        return found
    # an empty or not yet recognisable log (--follow from the first byte): the feature's engine
    return getattr(feature, "engine", None) or "sglang"
