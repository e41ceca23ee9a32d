"""Questions about vllm releases, answered from configs/vllm/*.toml: which model runner and which
proposer class a release runs for a speculative config and environment, what its log lines
prove, and which speculative_config keys it ignores or rejects."""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Optional, Union

import msgspec

from dynspec_cli.knowledge import tables

V2_ENV = "VLLM_USE_V2_MODEL_RUNNER"


class _Row(msgspec.Struct, forbid_unknown_fields=True):
    pass


class ReleasesFile(_Row):
    releases: list[str]
    covered: str


class RunnerRange(_Row):
    versions: str
    selection: Literal["env-opt-in", "auto", "v2-only"]
    env: Union[str, None] = None
    model_gated: bool = False
    v2_methods: Union[list[str], None] = None
    v1_methods: Union[list[str], None] = None
    parallel_drafting_ok: list[str] = []
    dynamic_sd_v1: bool = False
    fallback_warning: Union[str, None] = None


class RunnerPaths(_Row):
    v2: list[str]
    v1: list[str]


class RunnerFile(_Row):
    paths: RunnerPaths
    range: list[RunnerRange]


class ProposerRow(_Row):
    versions: str
    runner: Literal["v1", "v2"]
    methods: list[str]
    cls: str
    module: str


class V0ProposerRow(_Row):
    cls: str
    methods: list[str]
    wrapper: bool = False


class ProposersFile(_Row):
    proposer: list[ProposerRow]
    v0: list[V0ProposerRow] = []


class LineRow(_Row):
    id: str
    literal: str
    pattern: str
    versions: Union[str, None] = None
    text: Union[str, None] = None
    phase: Union[str, None] = None
    crash: Union[str, None] = None
    startup_crash: bool = False  # written only while the server starts (before it is ready)
    evidence: Union[Literal["served"], None] = None  # "served": the server answered or generated
    implies: dict[str, Any] = {}


class LinesFile(_Row):
    line: list[LineRow]


class StartupFrame(_Row):
    path: str  # regex searched in the frame's file path
    functions: list[str]


class FramesFile(_Row):
    startup: list[StartupFrame]
    speculative: list[str] = []  # path fragments of vLLM's speculative-decoding code


class KnobRow(_Row):
    key: str
    versions: str
    status: Literal["dead", "rejected", "switched-off"]
    note: str
    when: Union[str, None] = None
    warning: Union[str, None] = None


class KnobsFile(_Row):
    knob: list[KnobRow]


class PluginFramework(_Row):
    versions: str
    module: str  # the file that holds load_general_plugins() (path under site-packages)
    group: str
    allow_env: str
    allow_strips: bool  # whether the allow-list's names are stripped of blanks
    hook_types: list[str]
    processes: list[str]
    loading_line: str
    failed_line: str


class CustomClass(_Row):
    module: str  # the file that imports the user's proposer class; a release without it has no such method
    method: str
    required_methods: list[str]
    loaded_line: str


class PluginsFile(_Row):
    framework: PluginFramework
    custom_class: CustomClass


@dataclass(frozen=True)
class RunnerChoice:
    runner: Optional[str]  # "v1" | "v2" | None (release unknown)
    reason: str
    certain: bool = True  # False: other settings or the model may still force V1
    warning: Optional[str] = None  # the log line id vllm writes for this choice
    unsupported: tuple[str, ...] = ()


@dataclass(frozen=True)
class ProposerChoice:
    cls: Optional[str]
    module: Optional[str]


@dataclass
class KnobIssue:
    key: str
    status: str
    note: str
    warning: Optional[str] = None


def tables_dir() -> Path:
    """configs/vllm/: this engine's tables (the engine's `tables`)."""
    return tables.configs_dir() / "vllm"


class VllmKnowledge:
    def __init__(self) -> None:
        d = tables_dir()
        rel = tables.load_toml(d / "releases.toml", ReleasesFile)
        self.releases, self.covered = rel.releases, rel.covered
        self.all = (1 << len(self.releases)) - 1
        runner = tables.load_toml(d / "runner.toml", RunnerFile)
        self.runner_ranges, self.runner_paths = runner.range, runner.paths
        proposers = tables.load_toml(d / "proposers.toml", ProposersFile)
        self.proposers = proposers.proposer
        self.v0_proposers = {r.cls: r for r in proposers.v0}
        self.lines = tables.load_toml(d / "log_lines.toml", LinesFile).line
        self.knobs = tables.load_toml(d / "knobs.toml", KnobsFile).knob
        plugins = tables.load_toml(d / "plugins.toml", PluginsFile)
        self.plugins, self.custom_class = plugins.framework, plugins.custom_class
        frames = tables.load_toml(d / "frames.toml", FramesFile)
        self.startup_frames = [(re.compile(f.path), frozenset(f.functions)) for f in frames.startup]
        self.speculative_paths = tuple(frames.speculative)
        self.line_by_id = {r.id: r for r in self.lines}
        for r in self.runner_ranges:
            if r.fallback_warning and r.fallback_warning not in self.line_by_id:
                raise tables.ConfigError(f"configs/vllm/runner.toml: unknown line id {r.fallback_warning!r}")
        for k in self.knobs:
            if k.warning and k.warning not in self.line_by_id:
                raise tables.ConfigError(f"configs/vllm/knobs.toml: unknown line id {k.warning!r}")
        self._masks: dict[str, int] = {}
        specs = [r.versions for r in self.runner_ranges] + [p.versions for p in self.proposers]
        specs += [r.versions for r in self.lines if r.versions] + [k.versions for k in self.knobs] + [self.covered]
        for s in specs:
            self.mask(s)

    # --- versions (same representation as the sglang tables: bit masks over releases) -------
    def mask(self, spec: str) -> int:
        m = self._masks.get(spec)
        if m is None:
            from packaging.specifiers import SpecifierSet
            from packaging.version import Version

            s = SpecifierSet(spec)
            m = sum(1 << i for i, r in enumerate(self.releases) if s.contains(Version(r), prereleases=True))
            self._masks[spec] = m
        return m

    def mask_of(self, version: Optional[str]) -> int:
        if not version:
            return 0
        from packaging.version import InvalidVersion, Version

        try:
            v = Version(version)
        except InvalidVersion:
            return 0
        # a local or dev build (0.33.0+cu130, 0.33.1.dev3+g...) is judged as its release
        base = Version(v.base_version)
        for i, r in enumerate(self.releases):
            if Version(r) == base:
                return 1 << i
        return 0

    def known(self, version: Optional[str]) -> bool:
        return self.mask_of(version) != 0

    def in_range(self, version: str, spec: str) -> bool:
        return bool(self.mask(spec) & self.mask_of(version))

    def versions_in(self, mask: int) -> list[str]:
        return [r for i, r in enumerate(self.releases) if mask >> i & 1]

    # --- runner ---------------------------------------------------------------------------
    def runner_range(self, version: str) -> Optional[RunnerRange]:
        return next((r for r in self.runner_ranges if self.in_range(version, r.versions)), None)

    def runner(self, version: str, spec: dict, env: dict) -> RunnerChoice:
        """The model runner `version` picks for `spec` (the --speculative-config dict) and `env`."""
        r = self.runner_range(version)
        if r is None:
            return RunnerChoice(None, f"vllm {version} is outside the runner table ({self.covered})", certain=False)
        if r.selection == "v2-only":
            return RunnerChoice("v2", f"vllm {version} has only the V2 model runner")
        raw = env.get(r.env) if r.env else None
        if r.selection == "env-opt-in":
            on = _env_int_bool(raw)
            if on is None and raw not in (None, ""):
                return RunnerChoice(None, f"{r.env}={raw!r} is not an integer: vllm raises ValueError", certain=True)
            if on:
                return RunnerChoice("v2", f"{r.env}={raw} opts in to the V2 model runner (vllm {version})")
            return RunnerChoice("v1", f"vllm {version} runs the V1 model runner unless {r.env}=1")
        # auto
        if raw is not None:
            on = _env_int_bool(raw)
            if on is None:
                return RunnerChoice(None, f"{r.env}={raw!r} is not an integer: vllm raises ValueError", certain=True)
            return RunnerChoice("v2" if on else "v1", f"{r.env}={raw} decides the runner (vllm {version})")
        unsupported = self.v2_unsupported(r, spec)
        if unsupported:
            return RunnerChoice("v1", f"Model Runner V2 does not support {', '.join(unsupported)} on vllm {version}: it falls back to V1",
                                warning=r.fallback_warning, unsupported=tuple(unsupported))
        caveat = "unless the model is outside V2's default architectures (no warning then) or another setting is unsupported" \
            if r.model_gated else "unless another (non-speculative) setting is unsupported or Triton is missing"
        return RunnerChoice("v2", f"vllm {version} defaults to the V2 model runner for this speculative config, {caveat}",
                            certain=False)

    @staticmethod
    def v2_unsupported(r: RunnerRange, spec: dict) -> list[str]:
        """The speculative "unsupported features" of `_get_v2_model_runner_unsupported_features`."""
        out: list[str] = []
        method = spec.get("method")
        if method is None:
            return out
        if r.v2_methods is not None and method not in r.v2_methods:
            out.append(f"speculative method '{method}'")
        if r.v1_methods is not None and method in r.v1_methods:
            out.append(f"speculative method '{method}'")
        if spec.get("parallel_drafting") and method not in r.parallel_drafting_ok:
            out.append("parallel drafting")
        if r.dynamic_sd_v1 and spec.get("num_speculative_tokens_per_batch_size") is not None:
            out.append("dynamic speculative decoding")
        return out

    # --- proposers ---------------------------------------------------------------------------
    def proposer(self, version: str, runner: str, method: Optional[str]) -> Optional[ProposerChoice]:
        for p in self.proposers:
            if p.runner == runner and method in p.methods and self.in_range(version, p.versions):
                return ProposerChoice(p.cls, p.module)
        return None

    def proposer_rows_for_class(self, cls: str) -> list[ProposerRow]:
        return [p for p in self.proposers if p.cls == cls]

    def runner_of_module(self, module: str) -> Optional[str]:
        """v1 | v2 for a file inside vllm (runner.toml [paths]): a patch's module, a traceback
        frame's file, the file a log line was logged from; None when it is neither runner's."""
        m = "/" + module.replace("\\", "/")
        for runner in ("v2", "v1"):
            for p in getattr(self.runner_paths, runner):
                if (f"/{p}" in m) if p.endswith("/") else m.endswith("/" + p.rsplit("/", 1)[-1]):
                    return runner
        return None

    # --- knobs ---------------------------------------------------------------------------------
    def knob_issues(self, version: str, spec: dict, parallel: Optional[dict] = None) -> list[KnobIssue]:
        parallel = parallel or {}
        out = []
        for k in self.knobs:
            if k.key not in spec or not self.in_range(version, k.versions):
                continue
            if k.status == "switched-off":
                dp = parallel.get("data_parallel_size")
                if k.when == "data_parallel_size > 1" and not (isinstance(dp, int) and dp > 1):
                    continue
            out.append(KnobIssue(k.key, k.status, k.note, k.warning))
        return out

    def is_startup_frame(self, path: str, function: str) -> bool:
        """A frame of code that runs only while the server starts (configs/vllm/frames.toml)."""
        return any(function in funcs and rx.search(path) for rx, funcs in self.startup_frames)

    @functools.cached_property
    def matchers(self) -> list[tuple[LineRow, re.Pattern]]:
        return [(r, re.compile(r.pattern)) for r in self.lines]


def _env_int_bool(raw: Optional[str]) -> Optional[bool]:
    """vllm reads the switch as bool(int(value)); None when unset or not an integer."""
    if raw is None:
        return None
    try:
        return bool(int(raw))
    except ValueError:
        return None


@functools.lru_cache(maxsize=1)
def knowledge() -> VllmKnowledge:
    d = tables_dir()
    return tables.cached("vllm-knowledge", sorted(d.glob("*.toml")), VllmKnowledge)
