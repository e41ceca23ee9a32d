"""Features: the patches dynspec checks for, described in TOML (configs/features/*.toml)."""
from __future__ import annotations

import re
from pathlib import Path
from typing import Literal, Optional

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


class Feature(msgspec.Struct, forbid_unknown_fields=True, dict=True):
    name: str
    title: str
    marker: Marker
    summary: str = ""
    flag: Optional[Flag] = None
    patch: list[PatchLocation] = []
    threshold: Optional[Threshold] = None
    expect: Expect = msgspec.field(default_factory=Expect)
    versions: str = ""  # the sglang releases that have the feature ("" = not tied to releases)
    dead_when: list[DeadWhen] = []
    support: list[SupportRule] = []
    tiers: list[Tiers] = []
    source: str = ""
    engine: str = "sglang"  # the engine the patch is for (dynspec_cli/verdict/engines.py)
    # the worker classes that build the feature's code when its marker is in a helper class (sglang's
    # own features): preflight looks for one of them in the running worker's MRO, not the marker's class
    runs_in: list[str] = []

    def __post_init__(self) -> None:
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
