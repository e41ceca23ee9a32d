"""The contract of an engine, written down once (as pytest's hookspec.py and SkyPilot's
sky/provision/__init__.py write theirs): every member an engine folder `dynspec_cli/engines/<name>/`
provides, with what the code above the seam does with it. Nothing outside `engines/` asks which
engine it has: it asks the engine.

An engine is an object (the member's `ENGINE`, engines/__init__.py finds it) with the members of
`Engine` below. `Base`, at the end, holds the defaults of the optional parts: an engine without an
in-server probe, adaptive speculation or a prove reader says so by not overriding them, and code
above asks `engine.supports(CAPABILITY)` or tests the attribute for None, never the engine's name.
(One file, the contract and its defaults: `dynspec verify` imports it at every start.)

The heavy parts (the tables, the classifier, the judge, the preflight) are imported by the member's
methods when called: `dynspec verify` of one engine's log imports nothing of another's but its
`__init__.py` and its detection table.
"""
from __future__ import annotations

import functools
from pathlib import Path
from typing import Any, Iterable, Optional, Protocol, runtime_checkable

import msgspec

# What `supports()` answers (the optional parts; an engine lists those it has in `capabilities`)
PROVE = "prove"  # prove/guard read its serving lines (decode_lines) and drive its server with the load generator
PROBE = "probe"  # the in-server probe instruments its server (`probe` is set)
ADAPTIVE = "adaptive"  # guard holds its adaptive-speculation controller to its own rule (`adaptive` is set)
GRAPH_PASSES = "graph_passes"  # guard reads decode graphs from its /metrics (`serving.graph_passes`) and /server_info
PATCHED_FILES = "patched_files"  # prove's receipt can find the patched files in its install (`patched_files`)
CAPABILITIES = (PROVE, PROBE, ADAPTIVE, GRAPH_PASSES, PATCHED_FILES)

# One fact line of a report: (label, value, detail shown dim or None)
Fact = tuple[str, str, Optional[str]]


class Serving(msgspec.Struct, frozen=True):  # msgspec Structs, not dataclasses: a dataclass costs `verify` ~0.7 ms of start-up to build
    """How a profile of the engine is started and when its server is ready (run/profiles.py,
    run/watch.py): `python -m MODULE *COMMAND [MODEL_FLAG] MODEL --port P --flag value ...`; and what
    prove and guard read while it serves."""

    module: str  # the server's entry module, run with the profile's python (a profile's `module` overrides it)
    command: tuple[str, ...] = ()  # arguments before the model and the flags
    model_flag: Optional[str] = None  # the profile's `model` is given with this flag (None: as a positional)
    readiness: tuple[str, ...] = ("/health",)  # GET paths asked in turn; the first 200 means ready
    # the load generator's request form (inject/loadgen.py): "generate" (POST /generate, GET /server_info)
    # or "openai" (/v1/completions)
    api: str = "generate"
    metrics_prefix: str = ""  # the prefix of its /metrics series ("name:")
    counters: tuple[str, ...] = ()  # /metrics counters summed per window (a fall is a reset)
    rank_label: tuple[str, str] = ("dp_rank", "DP")  # the /metrics label naming a DP rank, and how guard names it
    dp_flags: tuple[str, ...] = ("--dp-size", "--dp")  # the server flags that give the number of DP ranks
    startup: tuple[str, ...] = ()  # log landmarks written only at start-up (a new one: a restart)
    multi_node: bool = False  # group and Slurm launches know its multi-node flags (--nnodes, --node-rank, ...)
    # /metrics gauges guard reads per rank: the accept length and the draft steps now (None: not exported)
    accept_gauge: Optional[str] = None
    steps_gauge: Optional[str] = None
    graph_passes: Optional[str] = None  # the counter of decode passes by mode (graph / eager), evidence/graph_passes.py
    backend_fields: tuple[str, ...] = ()  # /server_info args whose change mid-run mixes attention backends


class Detection(msgspec.Struct, frozen=True):
    """How `--engine auto` tells the engine's log from its first lines (evidence/detect.py runs the
    rules of every engine together, line by line; the registry's DEFAULT when none decides)."""

    strong: tuple[str, ...] = ()  # regexes of lines only this engine writes (or only its users paste): the first decides
    files: frozenset = frozenset()  # its source file names: a prefixed line naming one is its line
    tag: Optional[str] = None  # regex of a process tag before its prefix (optional on a line)
    prefix: Optional[str] = None  # regex of its `LEVEL date [file:N]` prefix, with a group `src`
    prefixed: int = 0  # this many lines with its prefix make its log when no strong line decided (0: never)


@runtime_checkable
class Classifier(Protocol):
    def classify(self, line: Any) -> list:
        """The observations (evidence/observation.py) in one log line (evidence/lines.py Line)."""


@runtime_checkable
class Judge(Protocol):
    launches: list  # each with .last_line and .steady(decode_lines) -> bool (the big-file reader)

    def feed(self, obs: Any) -> None:
        """One observation, in log order."""

    def verdict(self, *, at_eof: bool = True, quiet_for: float = 0.0, text_lines: int = 0) -> Any:
        """The newest launch's Verdict now (verdict/result.py)."""

    def decided(self, v: Any, *, quiet_for: float = 0.0) -> bool:
        """True when more log lines cannot change this verdict (`verify --follow` stops)."""

    def exited(self, v: Any) -> Any:
        """The verdict once the server process is gone before it was ready."""


@runtime_checkable
class DecodeReader(Protocol):
    def feed(self, obs: Any) -> Optional[tuple[str, Any]]:
        """(rank label, evidence/observation.py Decode) for an observation that is one serving step's
        line, else None (prove and guard judge speculation by running batch on these)."""


@runtime_checkable
class Adaptive(Protocol):
    """The engine's adaptive speculation, held to its own rule window by window under guard."""

    lines: tuple[str, ...]  # the landmark ids of its controller's lines

    def setup(self, target: Any, receipt: dict, classifier: Classifier, end: int) -> tuple[Any, list[str]]:
        """(a tracker, or None when the proven server does not adapt; notes for the report)."""

    def label_of(self, obs: Any) -> str:
        """The rank a controller line is from, in guard's rank names."""

    def window(self, config: Any, steps: dict) -> Any:
        """The judge of one window (guard/windows.py `controller`: .level(r, level), .judge(r))."""


@runtime_checkable
class ProbeSetup(Protocol):
    """The in-server probe's set-up: a folder put first on the server's PYTHONPATH and a config in
    its environment (engines/sglang/probe_setup.py is the one there is)."""

    PROBE_DIR: Path

    def probe_targets(self, feature: Any, preflight: Optional[dict], classes: Optional[list[str]]) -> list[dict]:
        """What to instrument: the preflight's hunks and marker hits, else the feature's locations."""

    def probe_files(self) -> dict[str, bytes]:
        """The folder's files, to copy to a host that does not share this one's files."""

    def precompile_command(self, python: str, probe_dir: str) -> list[str]:
        """argv that writes the probe's bytecode for the server's interpreter."""

    def probe_env(self, targets: list[dict], *, existing_pythonpath: Optional[str] = None,
                  probe_dir: Optional[str] = None) -> dict[str, str]:
        """The environment additions that start the probe in every process of the server."""

    def probe_config(self, targets: list[dict]) -> dict:
        """The probe's JSON config (for a command a person runs)."""


@runtime_checkable
class Engine(Protocol):
    # --- who it is ---------------------------------------------------------------------------------
    name: str  # the registry's key: `--engine NAME`, a profile's `engine =`, "engine" in JSON documents
    title: str  # how reports name it ("sglang", "vLLM")
    package: str  # the Python package its server imports: dotted targets, frames and diffs are read against it
    # the JSON key of its release in verdicts, preflight results and run records (an engine's own,
    # kept for its consumers, e.g. "sglang_version"); None: verdicts carry `engine_version` only
    version_key: Optional[str]
    # a literal the start of each launch writes once: a huge log is read from its last one (verdict/pipeline.py)
    launch_boundary: Optional[bytes]
    serving: Serving
    capabilities: frozenset  # which of CAPABILITIES it has
    probe: Optional[ProbeSetup]  # set when PROBE is supported
    adaptive: Optional[Adaptive]  # set when ADAPTIVE is supported

    def supports(self, capability: str) -> bool:
        """Whether the optional part `capability` (one of CAPABILITIES) exists for this engine."""

    @property
    def tables(self) -> Path:
        """Its knowledge as data: a folder of TOML tables (configs/<name>/ for the bundled engines),
        checked against the real releases by tests/knowledge."""

    def detection(self) -> Detection:
        """How its log is recognised (`--engine auto`)."""

    def knowledge(self) -> Any:
        """Its validated tables, loaded once per change of them."""

    # --- a feature ---------------------------------------------------------------------------------
    def check_feature(self, feature: Any) -> None:
        """What a feature file says that only this engine can check (its [plugin] section against
        the engine's plugin framework); ConfigError naming the file. Normalises what it checks."""

    def check_version(self, version: Optional[str], what: str) -> Optional[str]:
        """A release pinned by the user (`--sglang-version`, a profile's), as the engine writes it;
        ValueError (one line, exit 2) for one it does not know."""

    def patched_classes(self, diff: str, marker_literal: str) -> list[str]:
        """`verify --patch`: the classes the diff's behaviour hunks change (the log verdict checks them)."""

    # --- a log ---------------------------------------------------------------------------------------
    def classifier(self, feature: Any) -> Classifier:
        """Log lines -> observations, with the feature's marker among the literals."""

    def judge(self, feature: Any, patched: Optional[list[str]] = None, version: Optional[str] = None,
              diff: Optional[dict] = None) -> Judge:
        """Observations -> a Verdict (the one judge core, verdict/core.py, runs the engine's steps).
        `diff`: the diff given for this log, {"hunks": [...]} as the run's preflight judged each hunk
        (the run record's patch.hunks) or {"text": ...} (`verify --patch`); an engine that cannot place
        hunks ignores it and judges as without."""

    def report_facts(self, doc: dict) -> list[Fact]:
        """The verdict's engine lines in the report (its release, what speculates, the engine's own
        switches), between the headline and the worker (report/console.py)."""

    # --- before launch ---------------------------------------------------------------------------------
    def preflight(self, host: Any, python: str, feature: Any, flags: list[str], env: dict, patched: Optional[list[str]] = None,
                  *, patch_diff: Optional[str] = None, dynamic: bool = False) -> dict:
        """Its preflight from the installed engine (verdict "reachable" | "dead" | "unknown" | ...);
        bad input raises verdict/preflight.py's InputError (one line, exit 2)."""

    def preflight_text(self, result: dict) -> Optional[str]:
        """The preflight result as plain text, or None (report/console.py renders the document)."""

    def preflight_facts(self, result: dict) -> list[Fact]:
        """The preflight report's engine lines (the release found and where) for report/console.py."""

    def release_of(self, preflight: Optional[dict]) -> Optional[str]:
        """The release a preflight result found (kept in the run record, pinned by watch and prove)."""

    def install_of(self, preflight: dict) -> Optional[str]:
        """Where a preflight result found the engine's package (a group compares the files under it)."""

    # --- while it serves (prove, guard) -----------------------------------------------------------
    def decode_lines(self) -> DecodeReader:
        """Its serving steps' lines as prove's observations (requires PROVE)."""

    def patched_files(self, host: Any, python: str, feature: Any, flags: list[str], *, given: Iterable = (),
                      diff_path: Optional[str] = None) -> tuple[list[tuple[str, str]], str]:
        """(path, how it was found) of the patched files in the install, with `given` (the run's
        diff's installed files, from `diff_path`) first, and how they were found, in words; without
        PATCHED_FILES: none, and why."""

    def metric_accept(self, samples: list[dict]) -> dict[str, float]:
        """Accept length per rank from /metrics counters where no gauge says it (rank label -> value)."""

    def tokens_per_verify(self, counters: dict[str, float]) -> Optional[float]:
        """Tokens per verify pass from a window's counter deltas (None: the counters do not say)."""

    def graphs_off(self, args: dict) -> Optional[bool]:
        """From /server_info's server args: True when they switch decode graphs off (None: unknown)."""


def members() -> list[str]:
    """Every member of the contract: its attributes and its methods."""
    names = set(Engine.__dict__.get("__annotations__", {}))
    names |= {n for n, v in vars(Engine).items() if not n.startswith("_") and (callable(v) or isinstance(v, property))}
    return sorted(names)


def missing(engine: Any) -> list[str]:
    """The members of the contract `engine` lacks (tests/seam checks every registered engine and the toy)."""
    return [n for n in members() if not hasattr(engine, n)]


# --- the defaults of the optional parts --------------------------------------------------------------
class Base:
    name: str = ""
    title: str = ""
    package: str = ""
    version_key: Optional[str] = None
    launch_boundary: Optional[bytes] = None
    serving: Serving
    capabilities: frozenset = frozenset()
    probe: Optional[ProbeSetup] = None
    adaptive: Optional[Adaptive] = None

    def __repr__(self) -> str:
        return f"<engine {self.name}>"

    def supports(self, capability: str) -> bool:
        return capability in self.capabilities

    @property
    def tables(self) -> Path:
        from dynspec_cli.knowledge.tables import configs_dir

        return configs_dir() / self.name

    @functools.lru_cache(maxsize=None)
    def detection(self) -> Detection:
        """`detect.toml` of its tables ({strong, files, prefixed}), with the tag and prefix the
        engine's code names (`detect_shape`)."""
        from dynspec_cli.knowledge import tables

        path = self.tables / "detect.toml"

        def build() -> Detection:
            from dynspec_cli.resources import tomllib

            d = tomllib.loads(path.read_text(encoding="utf-8"))
            tag, prefix = self.detect_shape()
            return Detection(tuple(d.get("strong", ())), frozenset(d.get("files", ())), tag, prefix, int(d.get("prefixed", 0)))

        return tables.cached(f"detect-{self.name}", [path, Path(__file__)], build)

    def detect_shape(self) -> tuple[Optional[str], Optional[str]]:
        """(process tag regex, line prefix regex with a group `src`) of its log lines, if it has a fixed one."""
        return None, None

    # --- a feature -------------------------------------------------------------------------------
    def check_feature(self, feature: Any) -> None:
        if getattr(feature, "plugin", None) is not None:
            from dynspec_cli.knowledge.tables import ConfigError

            raise ConfigError(f"{feature.source or feature.name}: plugin: plugin-delivered patches are not checked "
                              f"for {self.title}")

    def check_version(self, version: Optional[str], what: str) -> Optional[str]:
        return version

    def patched_classes(self, diff: str, marker_literal: str) -> list[str]:
        from dynspec_cli.verdict import diffclasses

        return diffclasses.from_diff(diff, marker_literal)

    # --- reports ----------------------------------------------------------------------------------
    def report_facts(self, doc: dict) -> list[Fact]:
        return [(self.title, doc.get("engine_version") or "unknown", None)]

    def preflight_text(self, result: dict) -> Optional[str]:
        return None

    def preflight_facts(self, result: dict) -> list[Fact]:
        return []

    def release_of(self, preflight: Optional[dict]) -> Optional[str]:
        return (preflight or {}).get(self.version_key) if self.version_key else None

    def install_of(self, preflight: dict) -> Optional[str]:
        return None

    # --- while it serves --------------------------------------------------------------------------
    def decode_lines(self):
        raise NotImplementedError(f"prove and guard do not read {self.title}'s serving lines")

    def patched_files(self, host, python: str, feature, flags: list[str], *, given=(),
                      diff_path: Optional[str] = None) -> tuple[list[tuple[str, str]], str]:
        return [], f"dynspec does not search a {self.name} install for the patched files; pass --patched-file PATH"

    def metric_accept(self, samples: list[dict]) -> dict[str, float]:
        return {}

    def tokens_per_verify(self, counters: dict[str, float]) -> Optional[float]:
        return None

    def graphs_off(self, args: dict) -> Optional[bool]:
        return None
