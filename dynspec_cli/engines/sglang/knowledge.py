"""Questions about sglang releases, answered from configs/sglang/*.toml.

Version knowledge is handled as sets of known releases (bit masks over releases.toml), so
evidence from several lines narrows the set by intersection and is reported as spans of real
releases; a version outside the table is never guessed about."""
from __future__ import annotations

import functools
import re
from pathlib import Path
from typing import Iterable, Optional

import msgspec

from dynspec_cli.knowledge import tables

V2_SWITCH_ENV = "SGLANG_ENABLE_SPEC_V2"
_TRUE = {"true", "1", "yes", "y"}
_FALSE = {"false", "0", "no", "n"}


class WorkerChoice(msgspec.Struct, frozen=True):  # msgspec Structs, not dataclasses: a dataclass costs `verify` ~0.7 ms of start-up to build
    module: Optional[str]  # under sglang.srt.speculative
    cls: Optional[str]
    error: Optional[str] = None


class OverlapOutcome(msgspec.Struct, frozen=True):
    overlap: Optional[bool]
    warning: Optional[str]  # id in warnings.toml
    reason: Optional[str] = None
    error: Optional[str] = None
    switch_value: Optional[bool] = None


def tables_dir() -> Path:
    """configs/sglang/: this engine's tables (the engine's `tables`)."""
    return tables.configs_dir() / "sglang"


class Knowledge:
    def __init__(self) -> None:
        d = tables_dir()
        rel = tables.load_toml(d / "releases.toml", tables.ReleasesFile)
        self.releases: list[str] = rel.releases
        self.aliases = rel.aliases
        self._index = {r: i for i, r in enumerate(self.releases)}
        self._masks: dict[str, int] = {}
        self.all = (1 << len(self.releases)) - 1
        self.dispatch_ranges = tables.load_toml(d / "dispatch.toml", tables.DispatchFile).range
        # every algorithm some release dispatches, in dispatch.toml's order (an unknown one: all of them)
        self.algorithms = list(dict.fromkeys(a for r in self.dispatch_ranges for rule in r.rules for a in rule.algorithms))
        ov = tables.load_toml(d / "overlap.toml", tables.OverlapFile)
        self.overlap_ranges = ov.range
        self.max_running_reset = ov.max_running_requests_reset
        self.warnings = tables.load_toml(d / "warnings.toml", tables.WarningsFile).warning
        modules = tables.load_toml(d / "modules.toml", tables.ModulesFile)
        self.classes, self.overrides, self.builds = modules.cls, modules.override, modules.builds
        self.log_lines = tables.load_toml(d / "log_lines.toml", tables.LogLinesFile).line
        self.draft_mismatches = tables.load_toml(d / "drafts.toml", tables.DraftsFile).mismatch
        self.warning_by_id = {w.id: w for w in self.warnings}
        self.plugins = tables.load_toml(d / "plugins.toml", tables.PluginsFile)
        graphs = tables.load_toml(d / "cuda_graph.toml", tables.CudaGraphFile)
        self.capture_rows, self.graph_settings_rows = graphs.capture, graphs.settings
        self.batch_sizes_rows = graphs.batch_sizes
        self.graph_passes_rows = graphs.passes
        self._precompute()
        for r in self.overlap_ranges:
            if r.switch.warning and r.switch.warning not in self.warning_by_id:
                raise tables.ConfigError(f"overlap.toml: unknown warning id {r.switch.warning!r}")
            for rule in r.rules:
                if rule.warning and rule.warning not in self.warning_by_id:
                    raise tables.ConfigError(f"overlap.toml: unknown warning id {rule.warning!r}")

    def _precompute(self) -> None:
        """Masks of every range the tables use, so a cached Knowledge needs no version parsing."""
        specs = [r.versions for r in self.dispatch_ranges] + [r.versions for r in self.overlap_ranges]
        specs += [w.versions for w in self.warnings] + [c.versions for c in self.classes]
        specs += [self.max_running_reset.versions] + [o.versions for o in self.overrides] + [b.versions for b in self.builds]
        specs += [v for row in self.log_lines for v in row.versions_by_form.values()]
        specs += [m.versions for m in self.draft_mismatches]
        specs += [f.versions for f in self.plugins.framework]
        specs += [r.versions for r in self.capture_rows] + [r.versions for r in self.graph_settings_rows]
        specs += [r.versions for r in self.batch_sizes_rows]
        specs += [r.versions for r in self.graph_passes_rows]
        for spec in specs:
            self.mask(spec)

    def draft_mismatch(self, version: str, algorithm: str, architectures: list[str]):
        """(row, architecture) of drafts.toml that this draft and algorithm hit on `version`, or None."""
        import re

        for m in self.draft_mismatches:
            if m.algorithm == algorithm and (not self.known(version) or self.mask(m.versions) & self.mask_of(version)):
                for a in architectures:
                    if re.search(m.architecture, a):
                        return m, a
        return None

    # --- versions ------------------------------------------------------------------------
    def mask(self, spec: str) -> int:
        m = self._masks.get(spec)
        if m is None:
            from packaging.specifiers import SpecifierSet
            from packaging.version import Version

            s = SpecifierSet(spec)
            m = 0
            for i, r in enumerate(self.releases):
                if s.contains(Version(r), prereleases=True):
                    m |= 1 << i
            self._masks[spec] = m
        return m

    def mask_of(self, version: str) -> int:
        """Mask of one release; 0 when the version is not in the table."""
        if version in self._index:
            return 1 << self._index[version]
        from packaging.version import InvalidVersion, Version

        try:
            v = Version(version)
        except InvalidVersion:
            return 0
        for i, r in enumerate(self.releases):
            if Version(r) == v:
                return 1 << i
        return 0

    def known(self, version: str) -> bool:
        return self.mask_of(version) != 0

    def versions_in(self, mask: int) -> list[str]:
        return [r for i, r in enumerate(self.releases) if mask >> i & 1]

    def span(self, mask: int) -> Optional[str]:
        """Human range of a set of releases: '0.5.9', '0.5.7 – 0.5.10.post1', or several spans."""
        if mask == 0:
            return None
        spans, start, prev = [], None, None
        for i, r in enumerate(self.releases):
            if mask >> i & 1:
                if start is None:
                    start = r
                prev = r
            elif start is not None:
                spans.append((start, prev))
                start = None
        if start is not None:
            spans.append((start, prev))
        return ", ".join(a if a == b else f"{a} – {b}" for a, b in spans)

    def single(self, mask: int) -> Optional[str]:
        vs = self.versions_in(mask)
        return vs[0] if len(vs) == 1 else None

    # --- algorithms ------------------------------------------------------------------------
    def canonical_algorithm(self, name: Optional[str]) -> Optional[str]:
        if name is None:
            return None
        up = name.upper()
        return self.aliases.get(up, up)

    # --- the overlap switch ------------------------------------------------------------------
    def overlap_range(self, version: str) -> Optional[tables.OverlapRange]:
        m = self.mask_of(version)
        return next((r for r in self.overlap_ranges if self.mask(r.versions) & m), None)

    @property
    def env_switches(self) -> list[str]:
        """The environment variables some release reads (or warns about) for the overlap switch."""
        return sorted({r.switch.name for r in self.overlap_ranges if r.switch.kind not in ("none", "flag")})

    def switch_value(self, r: tables.OverlapRange, env: dict, flags: set) -> Optional[bool]:
        sw = r.switch
        if sw.kind == "flag":
            return sw.name in flags
        if sw.kind == "env":
            raw = env.get(sw.name)
            if raw is None:
                return sw.default
            low = raw.lower()  # like sglang's EnvBool.parse: no stripping
            return True if low in _TRUE else False if low in _FALSE else sw.default
        return None

    def resolve_overlap(self, version: str, algorithm: str, *, env: dict, flags: set,
                        user_disable: bool, topk: Optional[int], device: Optional[str] = None) -> OverlapOutcome:
        """What argument resolution of `version` does to the overlap scheduler (static route)."""
        r = self.overlap_range(version)
        algo = self.canonical_algorithm(algorithm)
        if r is None:
            return OverlapOutcome(None, None)
        sv = self.switch_value(r, env, flags)
        for rule in r.rules:
            if rule.algorithms is not None and algo not in rule.algorithms:
                continue
            if rule.switch is not None and rule.switch != sv:
                continue
            if rule.user_disable is not None and rule.user_disable != user_disable:
                continue
            if rule.topk_gt1 is not None and rule.topk_gt1 != (topk is not None and topk > 1):
                continue
            if rule.device_cpu is not None and rule.device_cpu != (device == "cpu"):
                continue
            overlap = (not user_disable) if rule.overlap == "user" else rule.overlap
            return OverlapOutcome(overlap, rule.warning, rule.reason, rule.error, sv)
        return OverlapOutcome(not user_disable, None, None, None, sv)

    def warning_fits(self, version: str, algorithm: str, warning_id: str) -> bool:
        """Could `version` log `warning_id` for `algorithm`? Only warnings that overlap.toml
        names constrain the algorithm; others fit every algorithm."""
        r = self.overlap_range(version)
        named = [rule for rr in self.overlap_ranges for rule in rr.rules if rule.warning == warning_id]
        if not named or r is None:
            return True
        algo = self.canonical_algorithm(algorithm)
        return any(rule.warning == warning_id and (rule.algorithms is None or algo in rule.algorithms) for rule in r.rules)

    # --- dispatch ----------------------------------------------------------------------------
    def plugin_framework(self, version: Optional[str]) -> Optional[tables.PluginFramework]:
        """The general-plugin framework of a release (None: it has none); a release the tables do
        not know gets the newest row (the inspector says whether the framework is there)."""
        if version and self.known(version):
            return next((f for f in self.plugins.framework if self.mask(f.versions) & self.mask_of(version)), None)
        return self.plugins.framework[-1]

    def dispatch_rules(self, version: str) -> Optional[tables.DispatchRange]:
        m = self.mask_of(version)
        return next((r for r in self.dispatch_ranges if self.mask(r.versions) & m), None)

    def worker(self, version: str, algorithm: str, overlap: bool, multi_layer: bool = False) -> Optional[WorkerChoice]:
        r = self.dispatch_rules(version)
        algo = self.canonical_algorithm(algorithm)
        if r is None:
            return None
        for rule in r.rules:
            if algo not in rule.algorithms:
                continue
            if rule.overlap is not None and rule.overlap != overlap:
                continue
            if rule.multi_layer is not None and rule.multi_layer != multi_layer:
                continue
            return WorkerChoice(rule.module, rule.cls, rule.error)
        return None

    def workers_for(self, mask: int, algorithms: Iterable[str], overlaps: Iterable[bool],
                    multi_layers: Iterable[bool], fits=None) -> dict[WorkerChoice, int]:
        """Every worker the combinations allow, with the releases giving each. `fits(version,
        algorithm)` drops combinations the evidence rules out."""
        out: dict[WorkerChoice, int] = {}
        algorithms, overlaps, multi_layers = list(algorithms), list(overlaps), list(multi_layers)
        for v in self.versions_in(mask):
            bit = self.mask_of(v)
            for a in algorithms:
                if fits is not None and not fits(v, a):
                    continue
                for o in overlaps:
                    for ml in multi_layers:
                        w = self.worker(v, a, o, ml)
                        if w is not None:
                            out[w] = out.get(w, 0) | bit
        return out

    # --- classes ---------------------------------------------------------------------------
    def class_row(self, version: str, name: str) -> Optional[tables.ClassRow]:
        m = self.mask_of(version)
        return next((c for c in self.classes if c.name == name and self.mask(c.versions) & m), None)

    def mro(self, version: str, name: str) -> list[str]:
        out, todo = [], [name]
        while todo:
            n = todo.pop(0)
            if n in out:
                continue
            out.append(n)
            row = self.class_row(version, n)
            if row:
                todo.extend(row.bases)
        return out

    def override(self, version: str, cls: str, method: str) -> Optional[tables.OverrideRow]:
        m = self.mask_of(version)
        return next((o for o in self.overrides if o.cls == cls and o.method == method and self.mask(o.versions) & m), None)

    def method_reaches(self, version: str, running: str, patched: str, method: str) -> tuple[Optional[bool], Optional[str]]:
        """Does calling `method` on a `running` instance execute `patched.method`? Follows the
        overrides of modules.toml up the MRO. (True, None) reached; (False, cls) cls's override
        skips it; (None, cls) cls calls on only conditionally; (None, None) unknown classes."""
        mro = self.mro(version, running)
        if patched not in mro:
            return None, None
        i, maybe = 0, None
        while mro[i] != patched:
            o = self.override(version, mro[i], method)
            if o is None:
                i += 1
                continue
            if not o.calls or o.calls not in mro[i + 1:]:
                return False, mro[i]
            if o.conditional:
                maybe = maybe or mro[i]
            j = mro.index(o.calls)
            if mro.index(patched) < j:  # the call jumps past the patched class
                return False, mro[i]
            i = j
        return (None, maybe) if maybe else (True, None)

    def on_path(self, version: str, running: str) -> set[str]:
        """The classes a `running` worker runs code of: its MRO and that of the draft worker it builds
        (a patch in EagleDraftWorker.draft runs under EAGLEWorkerV2 and StandaloneWorkerV2)."""
        draft = self.draft_of(version, running)
        return set(self.mro(version, running)) | (set(self.mro(version, draft)) if draft else set())

    def draft_of(self, version: str, running: str) -> Optional[str]:
        """The draft worker class a `running` worker builds on `version` (the first class of its
        MRO with a [[builds]] row: a subclass's own __init__ builds its own), or None."""
        m = self.mask_of(version)
        for c in self.mro(version, running):
            row = next((b for b in self.builds if b.worker == c and self.mask(b.versions) & m), None)
            if row is not None:
                return row.draft
        return None

    def module_of_class(self, name: str) -> Optional[str]:
        return next((c.module for c in self.classes if c.name == name), None)

    def class_mask(self, name: str) -> int:
        m = 0
        for c in self.classes:
            if c.name == name:
                m |= self.mask(c.versions)
        return m

    # --- CUDA graphs (cuda_graph.toml) -------------------------------------------------------
    def graph_settings(self, mask: int) -> Optional[tables.GraphSettings]:
        """The settings row of the releases in `mask`: None when they span rows (or none is known)."""
        rows = [r for r in self.graph_settings_rows if self.mask(r.versions) & mask]
        return rows[0] if len(rows) == 1 else None

    def batch_sizes(self, version: str) -> Optional[tables.BatchSizes]:
        m = self.mask_of(version)
        return next((r for r in self.batch_sizes_rows if self.mask(r.versions) & m), None)

    def capture_of(self, msg: str, mask: int) -> Optional[tuple[tables.CaptureRow, dict]]:
        """(row, fields) of the capture line `msg`, among the rows of the releases in `mask` (all
        rows when the release is unknown)."""
        for row in self.capture_rows:
            if row.literal in msg and (not mask or self.mask(row.versions) & mask):
                m = tables.regex(row.pattern).search(msg)
                if m:
                    return row, m.groupdict()
        return None

    # --- warnings --------------------------------------------------------------------------
    @functools.cached_property
    def warning_matchers(self) -> list[tuple[tables.WarningRow, Optional[re.Pattern]]]:
        """(row, regex); the regex is None for exact texts, which are matched as substrings."""
        return [(w, re.compile(w.pattern) if w.pattern is not None else None) for w in self.warnings]


@functools.lru_cache(maxsize=1)
def knowledge() -> Knowledge:
    """The tables, loaded and validated once per change of configs/sglang (tables.cached)."""
    d = tables_dir()
    return tables.cached("knowledge", [*sorted(d.glob("*.toml")), Path(__file__)], Knowledge)  # this file: what is pickled
