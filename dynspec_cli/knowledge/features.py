"""Features: the patches dynspec checks for, described in TOML (configs/features/*.toml)."""
from __future__ import annotations

import re
from pathlib import Path
from typing import Literal, Optional, Union

import msgspec

from dynspec_cli.knowledge.tables import ConfigError, cached, configs_dir, load_toml


class Marker(msgspec.Struct, forbid_unknown_fields=True):
    pattern: str
    literal: str
    logged_by: str = ""


class Flag(msgspec.Struct, forbid_unknown_fields=True):
    name: str
    dest: str


class PatchLocation(msgspec.Struct, forbid_unknown_fields=True, rename={"cls": "class"}):
    module: str
    cls: str
    function: str = "__init__"


class Threshold(msgspec.Struct, forbid_unknown_fields=True):
    field: str
    arg: str


class Expect(msgspec.Struct, forbid_unknown_fields=True):
    speculate_at_or_below_threshold: bool = True


class DeadWhen(msgspec.Struct, forbid_unknown_fields=True):
    """A line that proves the feature is off in this launch (sglang switched it off itself);
    the named group `reason` is shown."""
    pattern: str
    literal: str
    versions: str = ""
    logged_by: str = ""


class SupportRule(msgspec.Struct, forbid_unknown_fields=True):
    """One of the release's own support checks, in the order sglang runs them."""
    check: str
    versions: str
    reason: str
    flag: Optional[str] = None
    allowed: Optional[list[str]] = None
    absent: Literal["supported", "unsupported", "unknown"] = "supported"
    above: Optional[int] = None
    resolved: Optional[Literal["overlap"]] = None
    predictable: bool = True


class Tiers(msgspec.Struct, forbid_unknown_fields=True):
    """The default configuration's choices of draft steps per batch-size tier."""
    versions: str
    steps: dict[str, list[int]]


class Controller(msgspec.Struct, forbid_unknown_fields=True):
    """How the engine's own adaptive controller moves (the rule `dynspec guard` holds it to)."""
    warmup_batches: int
    update_interval: int
    rise_offset: float
    up_hysteresis: float = 0.0
    capture: list[list[int]] = []  # CUDA-graph batch sizes a batch is padded to, as [first, last, step] runs
    decode_log_interval: int = 40  # the server's default verify batches per Decode batch line

    def capture_sizes(self) -> list[int]:
        return sorted({n for first, last, step in self.capture for n in range(first, last + 1, step)})


class Plugin(msgspec.Struct, forbid_unknown_fields=True):
    """The patch is shipped as an engine plugin (an entry point of the engine's plugin group)
    whose hook wraps or replaces `target`; the feature's [marker] is the line the plugin logs."""
    entry_point: str  # the entry point's name (what the allow-list must list)
    target: str  # the dotted path the hook is registered on: module[.Class][.attribute]
    hook: str  # before | after | around | replace (the engine's hook types)
    processes: list[str] = msgspec.field(default_factory=lambda: ["scheduler"])  # the processes the hook must be active in
    distribution: str = ""  # the distribution that should provide it (default: whichever does)


class Feature(msgspec.Struct, forbid_unknown_fields=True, dict=True):
    name: str
    title: str
    marker: Marker
    summary: str = ""
    flag: Optional[Flag] = None
    # [[patch]]: where the patch typically is; or `patch = "F.diff"`: the unified diff itself
    # (relative: to the feature file's folder), whose hunks name the patched classes
    patch: Union[list[PatchLocation], str] = []
    threshold: Optional[Threshold] = None
    expect: Expect = msgspec.field(default_factory=Expect)
    versions: str = ""  # the sglang releases that have the feature ("" = not tied to releases)
    dead_when: list[DeadWhen] = []
    support: list[SupportRule] = []
    tiers: list[Tiers] = []
    controller: Optional[Controller] = None
    source: str = ""
    # the engine the patch is for: a name in the registry (dynspec_cli/engines/__init__.py); "" is
    # the registry's DEFAULT (engines.name_of). Its [plugin] section is checked by that engine
    # (engines.of(feature): the engine's plugin framework is the engine's knowledge, not this file's)
    engine: str = ""
    # the worker classes that build the feature's code when its marker is in a helper class (sglang's
    # own features): preflight looks for one of them in the running worker's MRO, not the marker's class
    runs_in: list[str] = []
    plugin: Optional[Plugin] = None

    def __post_init__(self) -> None:
        if isinstance(self.patch, str):  # the diff: kept apart, so `patch` stays the list of locations
            self.diff_ref, self.patch = self.patch, []
        else:
            self.diff_ref = getattr(self, "diff_ref", None)
        try:
            self.marker_re = re.compile(self.marker.pattern)
        except re.error as e:
            raise ValueError(f"marker.pattern is not a valid regex: {e}") from None
        if not self.marker.literal:
            raise ValueError("marker.literal must be a non-empty substring of every marker line")
        self.dead_res = []
        for d in self.dead_when:
            try:
                self.dead_res.append(re.compile(d.pattern))
            except re.error as e:
                raise ValueError(f"dead_when.pattern is not a valid regex: {e}") from None
            if not d.literal:
                raise ValueError("dead_when.literal must be a non-empty substring of every such line")


def patch_file(feature: Feature) -> Optional[str]:
    """The feature file's `patch = "F.diff"`, resolved against the file's folder (ConfigError, exit
    2, when it is not there); None when the feature names no diff."""
    ref = getattr(feature, "diff_ref", None)
    if not ref:
        return None
    p = (Path(feature.source).parent / ref) if feature.source else Path(ref)
    if not p.is_file():
        raise ConfigError(f"{feature.source or feature.name}: patch = {ref!r}: no such file ({p.resolve()})")
    return str(p.resolve())


DEFAULT_FEATURE = "dynamic-spec-disable"


def features_dir() -> Path:
    return configs_dir() / "features"


def available() -> list[str]:
    return sorted(p.stem for p in features_dir().glob("*.toml"))


def load_feature(name_or_path: str | None) -> Feature:
    """A bundled feature by name, or a TOML file by path."""
    ref = name_or_path or DEFAULT_FEATURE
    p = Path(ref)
    if p.suffix == ".toml" or "/" in ref or p.exists():
        path, label = p, ref
    else:
        path, label = features_dir() / f"{ref}.toml", f"feature {ref!r}"
        if not path.exists():
            raise ConfigError(f"unknown feature {ref!r}: bundled features are {', '.join(available())}; or pass a path to a .toml file")
    def build() -> Feature:
        f = load_toml(path, Feature, where=label)
        f.source = str(path)
        return f

    if not path.is_file():
        return build()  # the error names the problem
    return cached("feature", [path.resolve(), Path(__file__)], build)  # this file defines what is pickled
