"""Loading configs/*.toml into validated structures (msgspec does the validation: a bad
table fails with the file, the key path and the problem)."""
from __future__ import annotations

import functools
import re
from pathlib import Path
from typing import Any, Literal, Union

import msgspec

from dynspec_cli import resources
from dynspec_cli.resources import tomllib



class ConfigError(Exception):
    """A config or user-supplied TOML file is unreadable or invalid (one line, names the file)."""


def configs_dir() -> Path:
    """dynspec's tables, wherever this install keeps them (dynspec_cli/resources.py)."""
    try:
        return resources.configs()
    except FileNotFoundError as e:
        raise ConfigError(str(e)) from None


# A regex of the tables, compiled the first time a line needs it and kept: a run meets few of the
# ~100 patterns, and compiling them all took longer than judging a short log.
regex = functools.lru_cache(maxsize=None)(re.compile)


def load_toml(path: Path, into: type, where: str | None = None) -> Any:
    """Parse `path` and convert it to `into`, raising ConfigError with file and key on failure."""
    label = where or str(path)
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"{label}: file not found") from None
    except IsADirectoryError:
        raise ConfigError(f"{label}: is a directory, not a TOML file") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{label}: not UTF-8 text") from None
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{label}: invalid TOML: {e}") from None
    except OSError as e:
        raise ConfigError(f"{label}: cannot read: {e.strerror}") from None
    try:
        return msgspec.convert(raw, into, strict=True)
    except msgspec.ValidationError as e:
        raise ConfigError(f"{label}: {e}") from None


def cached(kind: str, paths: list[Path], build):
    """`build()`'s result, pickled in ~/.cache/dynspec and reused while every file in `paths` keeps
    its size and mtime: TOML parsing and validation happen once per change, not at every start."""
    import binascii
    import os
    import pickle

    try:
        # this file too: it defines the structures that are pickled
        stamp = "|".join(f"{p}:{p.stat().st_size}:{p.stat().st_mtime_ns}" for p in [*paths, Path(__file__)])
    except OSError:
        return build()
    key = f"{binascii.crc32(stamp.encode()):08x}{len(stamp):04x}"
    cache = os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "dynspec", f"{kind}-{key}.pickle")
    try:
        with open(cache, "rb") as fh:
            stored_stamp, value = pickle.load(fh)
        if stored_stamp == stamp:
            return value
    except Exception:  # missing, stale or unreadable: rebuild
        pass
    value = build()
    try:
        os.makedirs(os.path.dirname(cache), exist_ok=True)
        tmp = f"{cache}.{os.getpid()}.tmp"
        with open(tmp, "wb") as fh:
            pickle.dump((stamp, value), fh, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(tmp, cache)
    except OSError:
        pass
    return value


class _Row(msgspec.Struct, forbid_unknown_fields=True, rename={"cls": "class"}):
    pass


# --- configs/sglang/releases.toml ------------------------------------------------------------
class ReleasesFile(msgspec.Struct, forbid_unknown_fields=True):
    releases: list[str]
    aliases: dict[str, str] = {}


# --- configs/sglang/dispatch.toml ------------------------------------------------------------
class DispatchRule(_Row):
    algorithms: list[str]
    overlap: Union[bool, None] = None
    multi_layer: Union[bool, None] = None
    module: Union[str, None] = None
    cls: Union[str, None] = None
    error: Union[str, None] = None

    def __post_init__(self) -> None:
        if (self.cls is None) == (self.error is None):
            raise ValueError("a rule names exactly one of `class` (with `module`) or `error`")
        if self.cls is not None and self.module is None:
            raise ValueError(f"rule for {self.cls} has no `module`")


class DispatchRange(_Row):
    versions: str
    where: str
    rules: list[DispatchRule]


class DispatchFile(msgspec.Struct, forbid_unknown_fields=True):
    range: list[DispatchRange]


# --- configs/sglang/overlap.toml -------------------------------------------------------------
class Switch(_Row):
    kind: Literal["none", "flag", "env", "removed", "ignored"]
    name: Union[str, None] = None
    default: Union[bool, None] = None
    overrides_user_disable: bool = False
    warning: Union[str, None] = None


class OverlapRule(_Row):
    overlap: Union[bool, Literal["user"]]
    algorithms: Union[list[str], None] = None
    switch: Union[bool, None] = None
    user_disable: Union[bool, None] = None
    topk_gt1: Union[bool, None] = None
    device_cpu: Union[bool, None] = None
    warning: Union[str, None] = None
    reason: Union[str, None] = None
    error: Union[str, None] = None


class OverlapRange(_Row):
    versions: str
    switch: Switch
    rules: list[OverlapRule]


class MaxRunningReset(_Row):
    versions: str
    value: int
    algorithms: list[str]


class OverlapFile(msgspec.Struct, forbid_unknown_fields=True):
    range: list[OverlapRange]
    max_running_requests_reset: MaxRunningReset


# --- configs/sglang/warnings.toml ------------------------------------------------------------
class Implies(_Row):
    overlap: Union[bool, None] = None
    algorithms: Union[list[str], None] = None
    multi_layer: Union[bool, None] = None
    max_running_requests: Union[int, None] = None
    env_set: Union[str, None] = None


class WarningRow(_Row):
    id: str
    versions: str
    implies: Implies
    text: Union[str, None] = None
    pattern: Union[str, None] = None
    level: Literal["warning", "info", "error"] = "warning"

    def __post_init__(self) -> None:
        if (self.text is None) == (self.pattern is None):
            raise ValueError(f"warning {self.id}: give exactly one of `text` or `pattern`")


class WarningsFile(msgspec.Struct, forbid_unknown_fields=True):
    warning: list[WarningRow]


# --- configs/sglang/modules.toml -------------------------------------------------------------
class ClassRow(_Row):
    name: str
    module: str
    versions: str
    bases: list[str]


class OverrideRow(_Row):
    cls: str
    method: str
    versions: str
    calls: str  # the class whose method the override runs; "" = it replaces the method
    conditional: bool = False


class BuildsRow(_Row):
    worker: str
    draft: str  # the draft worker class the worker's __init__ builds
    versions: str


class ModulesFile(msgspec.Struct, forbid_unknown_fields=True):
    cls: list[ClassRow] = msgspec.field(name="class")
    override: list[OverrideRow] = []
    builds: list[BuildsRow] = []


# --- configs/sglang/log_lines.toml -----------------------------------------------------------
class LogLineRow(_Row):
    id: str
    literal: str
    pattern: str
    phase: Union[str, None] = None
    crash: Union[str, None] = None
    crash_start: bool = False
    crash_end: bool = False
    implies: dict[str, Any] = {}
    versions_by_form: dict[str, str] = {}
    decisive: bool = False  # the line alone proves the process died (no later line can undo it)
    aftermath: bool = False  # the line follows the crash's cause: a crash line seen before it stays the one named
    startup_crash: bool = False  # the line is only written while the server starts (before ready)
    evidence: Union[str, None] = None  # frame | served | constructor | startup: read by engines/sglang/claims.py only
    stop: Union[str, None] = None  # the line says the server was asked to stop, by this signal (SIGTERM)
    after_stop: bool = False  # a stop writes it too: after a stop line it is the stop's (evidence/exits.py), not a crash


class LogLinesFile(msgspec.Struct, forbid_unknown_fields=True):
    line: list[LogLineRow]


# --- configs/sglang/cuda_graph.toml ------------------------------------------------------------
class CaptureRow(_Row):
    id: str
    role: Literal["target", "draft", "draft-extend"]
    versions: str
    files: list[str]
    literal: str
    pattern: str


class GraphSettings(_Row):
    versions: str
    max_bs_field: str
    bs_field: str
    padding_off_field: str
    disabled: dict[str, Union[bool, str]]
    max_bs_flag: str
    bs_flag: str
    disable_flag: str
    renamed: dict[str, str] = {}


class BatchSizes(_Row):
    versions: str
    source: str
    speculative: list[Union[int, list[int]]]
    plain: list[Union[int, list[int]]]
    append_max: bool

    def sizes(self, max_bs: int, *, speculative: bool, padding: bool = True) -> list[int]:
        """The batch sizes sglang captures for a maximum `max_bs`."""
        if not padding:
            return list(range(1, max_bs + 1))
        out: list[int] = []
        for e in self.speculative if speculative else self.plain:
            if isinstance(e, int):
                out.append(e)
            else:
                start, stop, step = e
                out += range(start, stop or max_bs + 1, step)
        out = [b for b in out if b <= max_bs]
        if self.append_max and max_bs not in out:
            out.append(max_bs)
        return out


class GraphPasses(_Row):
    versions: str
    file: str
    metric: str
    decode: list[str]  # [graph mode, eager mode]
    prefill: list[str]


class CudaGraphFile(msgspec.Struct, forbid_unknown_fields=True):
    capture: list[CaptureRow]
    settings: list[GraphSettings]
    batch_sizes: list[BatchSizes]
    passes: list[GraphPasses] = []


# --- configs/findings.toml -------------------------------------------------------------------
class DraftMismatch(msgspec.Struct, forbid_unknown_fields=True):
    algorithm: str
    architecture: str  # regex searched in each of the draft's config.json architectures
    expected: str
    versions: str
    source: str


class DraftsFile(msgspec.Struct, forbid_unknown_fields=True):
    mismatch: list[DraftMismatch]


class FindingDoc(msgspec.Struct, forbid_unknown_fields=True):
    name: str
    severity: Literal["error", "warning", "info"]
    what: str
    why: str
    fix: str
    # the finding's effect on the verdict per context (log, preflight, group); absent: none
    verdict: dict[Literal["log", "preflight", "group", "guard"], Literal["dead", "crashed", "ineffective", "invalid"]] = {}
    fix_template: Union[str, None] = None


# --- configs/<engine>/plugins.toml -----------------------------------------------------------
class PluginFramework(msgspec.Struct, forbid_unknown_fields=True):
    versions: str
    module: str
    group: str
    allow_env: str
    hook_types: list[str]
    platform_group: str = ""
    platform_env: str = ""
    skipped_line: str = ""
    loaded_line: str = ""
    executed_line: str = ""
    applied_line: str = ""


class PluginProcess(msgspec.Struct, forbid_unknown_fields=True):
    name: str
    module: str
    function: str
    runs: str = ""


class PluginsFile(msgspec.Struct, forbid_unknown_fields=True):
    framework: list[PluginFramework]
    process: list[PluginProcess] = []
