"""The contract of a placement: where one server runs (a host, a group of hosts, a Slurm job; next,
Kubernetes). It is declared here once, as stubs with docstrings (SkyPilot's
`sky/provision/__init__.py`, pytest's hookspec.py); tests/seam/test_protocol.py holds every
registered placement to it.

A placement is a folder `place/<name>/` and one line of the registry (place/__init__.py KINDS). Its
`__init__.py` offers the module-level names below (SCHEDULER ... check_script); `open` and the
finders hand back an object with the `Placement` methods. The launch, watch, Ctrl-C and stop
sequence is written once, in sequence.py, over those methods, and nothing above place/ (cli/,
prove/, guard/) names a member: it asks the registry, which asks each member in turn.

A member reads its own profile keys and its own command-line options; what it cannot do it
refuses with one line (RunError or ConfigError: exit 2)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, ContextManager, Optional, Protocol

if TYPE_CHECKING:  # (annotations only: this module is imported on every command's path)
    from dynspec_cli.run.profiles import Profile
    from dynspec_cli.transport import Host


@dataclass
class Request:
    """What one command line asks of a placement, parsed once by cli/. The fields every placement
    reads are typed here; a placement's own launch options are its `Options` (typed, built from the
    command line by place.options), in `options`. Hosts opened through `open_host` are closed with
    the request (`with req:`), whichever placement opened them."""

    profile: str = ""  # the profile reference (launch): a .toml path or a bundled name
    reach: Optional[Callable[..., "Host"]] = None  # (spec, python="python3", profile=None) -> Host, the user's SSH options
    host: Optional[str] = None  # --host: where the server runs (a scheduler's: its login host)
    env: Optional[list[str]] = None  # --env K=V
    sets: Optional[list[str]] = None  # --set flag=value
    name: Optional[str] = None  # --name
    timeout: Optional[float] = None  # --timeout: give up watching (a scheduler's also: waiting for the job to start)
    stall_timeout: float = 120.0  # a node whose log makes no progress this long before live counts as crashed
    patch: Optional[str] = None  # --patch: the diff applied (overrides the profile's `patch`)
    probe: bool = True  # inject the in-server probe
    preflight: bool = True  # preflight before the server starts (a scheduler: inside the job)
    options: Any = None  # the placement's own Options (None: its defaults)
    opened: list = field(default_factory=list, repr=False)

    def open_host(self, spec: str, python: str = "python3", profile: Optional["Profile"] = None) -> "Host":
        """The host `spec` names, reached with the user's SSH options (else the profile's)."""
        h = self.reach(spec, python, profile=profile)
        self.opened.append(h)
        return h

    def __enter__(self) -> "Request":
        return self

    def __exit__(self, *exc) -> None:
        for h in self.opened:
            try:
                h.close()
            except Exception:  # noqa: BLE001 - closing is best effort; the command's own error stands
                pass


# --------------------------------------------------------------------------------------------------
# what a placement module offers (stubs: each member's __init__.py defines every one of them)

SCHEDULER: Optional[str] = None
"""The value of a profile's `scheduler` key that selects this placement (None: it is selected
otherwise). The registry names them all when a profile asks for a scheduler no member knows."""

SELECTED_BY: str = ""
"""How a profile says it runs here, as the user writes it (`hosts = [...]`, `scheduler = "slurm"`;
"" for the fallback): the registry says it when an option is given that only this placement takes."""

SCRIPTS: tuple[str, ...] = ()
"""Kinds of the user's own launch scripts this placement can check before they run (`dynspec
preflight --sbatch FILE`: "sbatch"); see check_script."""


class Options(Protocol):
    """The placement's own launch options (a frozen msgspec Struct with defaults), filled from the
    command line by place.options: a field is an option the placement takes (`dry_run` for
    `--dry-run`); an option given that no field takes is refused, naming SELECTED_BY."""


def claims(raw: dict) -> bool:
    """Does the profile (its TOML as read) run here? Asked in the registry's order; the host,
    last, claims nothing and takes every profile no other placement claimed."""


def open(req: Request) -> ContextManager["Placement"]:
    """The Placement of one launch of `req.profile`: the profile loaded and checked (one line on
    bad input), the hosts it needs reached; what it opened is closed when the context ends."""


def find(target: "Host", ref: str, req: Request) -> Optional[tuple["Placement", Any]]:
    """The run `ref` recorded on `target` (by its name, or whatever else this placement knows its
    runs by: a Slurm job id), as (placement, record), ready to watch, stop or prove; None when
    this placement has no such run there (`dynspec watch/stop/prove/gate/guard`)."""


def find_group(target: "Host", ref: str, req: Request) -> Optional[tuple["Placement", Any]]:
    """The run `ref` over several hosts whose record is on `target`, its node 0 (`dynspec group
    watch/status/stop`); None when this placement records no such run."""


def status_rows(target: "Host", names: Optional[list[str]], feature_loader: Callable) -> list[dict]:
    """`dynspec status` rows for this placement's runs recorded on `target` (only `names`, if
    given): name, host, pid, alive, verdict, port, log, started_at, stopped_at, last_lines, ..."""


def owns_receipt(doc: dict) -> bool:
    """Whether a prove receipt is of a run of this placement (asked in order; the host: always)."""


def gate_server(host: "Host", doc: dict) -> str:
    """The gate's check that the proven server still runs as proven (prove/receipt.py): a line
    naming it, or GateFailed."""


def server_profile(ref: str, *, host: Optional[str], env: Optional[list[str]]) -> "Profile":
    """The one server `dynspec preflight PROFILE` judges, as a Profile (host, python, env, flags);
    a placement whose profiles are not one server's refuses with one line saying where its
    preflight runs."""


def check_script(kind: str, path: str, json_out: bool) -> int:
    """`dynspec preflight --<kind> FILE` for a kind of SCRIPTS: the user's own launch script read
    (never run), its findings printed (or JSON), the exit code."""


MODULE = ("SCHEDULER", "SELECTED_BY", "SCRIPTS", "Options", "claims", "open", "find", "find_group", "status_rows",
          "owns_receipt", "gate_server", "server_profile", "check_script")


# --------------------------------------------------------------------------------------------------
# what a placement object does (the sequence's steps, then what the commands need)

class Placement(Protocol):
    """Where one run's server runs (a host, a group, a Slurm job, ...), as the sequence and the
    commands drive it. `rec` is the placement's own record of the run."""

    name: str
    ready_timeout: Optional[float]  # a launch's watch gives up after this long unless told otherwise

    # the sequence's steps (sequence.py)
    def preflight(self) -> Optional[dict[str, Any]]:
        """Judge the patch where the server will run, before it starts; None: this placement
        checks elsewhere (a Slurm job: on every node, inside the job)."""

    def refuses(self, pre: dict[str, Any]) -> bool:
        """Whether that preflight forbids the start (nothing is started; exit 1)."""

    def start(self, pre: Optional[dict[str, Any]], *, probe: bool, replace: bool) -> Any:
        """Start the server (detached: it outlives dynspec); its record. A Ctrl-C inside is the
        sequence's (`started` then says what was started)."""

    def watching(self, rec: Any, *, keep: bool, detach: bool) -> None:
        """About to watch `rec` (a re-attach too): take over answering for it."""

    def watch(self, rec: Any, *, timeout: Optional[float], keep: bool, on_update: Optional[Callable]) -> Any:
        """Watch to the verdict; stop a dead or crashed server unless `keep`; the outcome (its
        `stopped`: whether dynspec stopped it). KeyboardInterrupt propagates."""

    def started(self, since: float) -> Any:
        """After a Ctrl-C or an error during the start: the record this launch wrote, else None."""

    def unresolved(self, rec: Any) -> Optional[str]:
        """Why `rec` cannot be stopped now (a start cut short before its process was known)."""

    def release(self, rec: Any) -> None:
        """dynspec stops answering for the run: it stays as it is."""

    def stop(self, rec: Any) -> Any:
        """Stop it and confirm: falsy once nothing of it runs, else what may be left (said)."""

    def hint(self, verb: str, rec: Any) -> str:
        """The dynspec command that does `verb` (stop, watch, status) to the run, pasteable."""

    def mark(self, rec: Any, why: str) -> None:
        """Note in the run's record that dynspec stopped watching it, and why."""

    # what the commands need
    def screen(self, out: Any, json_out: bool) -> Any:
        """What a launch or watch shows while it runs (a sequence.Screen, and a context manager)."""

    def render(self, out: Any, result: Any, json_out: bool) -> int:
        """The end of a launch or watch (a sequence.Launched), shown; the exit code."""

    def end(self, rec: Any, *, grace: float, out: Any) -> int:
        """`dynspec stop` (and `group stop`): stop the run, confirm nothing of it runs, say so;
        the exit code (0 gone, 1 something survived)."""

    # (OPTIONAL below: only the placements that need them)
    def prove_target(self, rec: Any) -> Any:
        """The prove/session.py Target that prove, gate and guard drive (where the load generator
        runs, the server's URL from there, its log)."""

    def nodes_status(self, rec: Any, feature_loader: Callable) -> dict[str, Any]:
        """`dynspec group status`: the run, its verdict and a row per node."""

    def dry_run(self) -> int:
        """`launch --dry-run`: print what would be submitted, submit nothing; the exit code."""


PLACEMENT = ("name", "ready_timeout", "preflight", "refuses", "start", "watching", "watch", "started", "unresolved",
             "release", "stop", "hint", "mark", "screen", "render", "end")
# the methods only some placements need, and which: answered by what the placement offers, never by its name
OPTIONAL = {"prove_target": "a placement whose `find` finds runs (prove, gate and guard find them so)",
            "nodes_status": "a placement whose `find_group` finds runs",
            "dry_run": "a placement whose Options take `dry_run`"}
