"""The claims a verdict makes about a launch — `crashed`, `server_ready`, `speculative_algorithm`,
`worker`, `speculative` (is speculative decoding on) — each proven (a value and the line that proves
it), or null. The top-level JSON fields of the same names are these values (`TOP_LEVEL`).

`false` needs positive evidence too: `crashed: false` only when the launch became ready or served
requests after its last traceback and no crash line follows; `server_ready: false` only when the
launch crashed while it was still starting. The evidence is collected while the judge is fed
(`observe`), next to the judge's own state, and read when it judges (`close_open_traceback`,
`worker_from_frames`, `build`). Frames (traceback, faulthandler, py-spy) are code that ran: they
outweigh flags and warnings, which say what was configured."""
from __future__ import annotations

import json
import shlex
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Optional

from dynspec_cli.evidence import frames as frame_rules
from dynspec_cli.evidence.commands import parse_flags
from dynspec_cli.evidence.lines import Line
from dynspec_cli.evidence.rules import Observation
from dynspec_cli.knowledge.sglang import Knowledge, WorkerChoice

if TYPE_CHECKING:
    from dynspec_cli.verdict.judge import Judge, Launch
    from dynspec_cli.verdict.workers import WorkerAnalysis

_NOT_WORKER_SUFFIX = "DraftWorker"
NAMES = ("crashed", "server_ready", "speculative_algorithm", "worker", "speculative")
TOP_LEVEL = ("crashed", "server_ready", "speculative_algorithm", "speculative")
_TROUBLE_KINDS = {"traceback", "exception"}


@dataclass
class Frame:
    path: str
    function: str
    line: Line
    form: str  # traceback | faulthandler | pyspy


@dataclass
class ClaimEvidence:
    """Per launch: what the claims rest on, beyond the judge's own state."""

    frames: list[Frame] = field(default_factory=list)
    constructors: list[tuple[str, Line]] = field(default_factory=list)  # class built in a frame's source line
    startup_line: Optional[Line] = None  # a frame or line only written while the server starts
    served_line: Optional[Line] = None  # the last line showing requests served
    trouble_line: Optional[Line] = None  # the last traceback, frame or crash line
    overlap_frame: Optional[Line] = None
    command_line: Optional[Line] = None
    requested: dict[str, tuple[Any, Line]] = field(default_factory=dict)
    last_log_offset: int = -1  # the last line that is not a launch command
    worker_line: Optional[Line] = None  # the frame that named the worker
    spec_line: Optional[Line] = None  # a line only a speculating server writes (draft CUDA graph, ...)
    accept_line: Optional[Line] = None  # a Decode batch line with `accept len`
    decode_line: Optional[Line] = None  # the last Decode batch line


# --- feeding -----------------------------------------------------------------------------------
def observe(judge: "Judge", la: "Launch", obs: Observation) -> bool:
    """Record what `obs` adds to the claims. True: the observation is the claims' own (a launch
    command, a faulthandler or py-spy frame, a served request) and the judge skips it."""
    ev = la.ev
    line = obs.line
    if obs.kind in ("command", "command-cont"):
        if obs.kind == "command" or ev.command_line is None:  # (flags on their own lines: the first one)
            ev.command_line = line
        for dest, value in obs.data.get("flags", {}).items():
            ev.requested[dest] = (value, line)
        return True
    ev.last_log_offset = line.offset
    if obs.kind == "launch":  # the DYNSPEC-LAUNCH header: the command dynspec itself started
        argv = _header_argv(obs.data.get("json"))
        if argv:
            ev.command_line = line
            for dest, value in parse_flags(shlex.join(argv)).items():
                ev.requested[dest] = (value, line)
        return False
    if obs.kind in _TROUBLE_KINDS:
        ev.trouble_line = line
        return False
    if obs.kind != "landmark":
        return False
    row = obs.landmark
    if row.implies.get("speculative") is True and ev.spec_line is None:
        ev.spec_line = line
    if row.crash:
        ev.trouble_line = line
        if row.startup_crash and ev.startup_line is None:
            ev.startup_line = line
        ov = frame_rules.overlap_of_line(row.id)
        if ov is not None:
            _frame_overlap(judge, la, ov, line)
        return False
    if row.id in ("ready", "decode-batch") or row.evidence == "served":
        ev.served_line = line
        if row.id == "decode-batch":
            ev.decode_line = line
            if obs.data.get("accept_len") is not None:
                ev.accept_line = line
        if row.evidence == "served":
            la.in_traceback = False  # the server went on serving: whatever traceback came before ended
            if la.crash is not None and not la.crash.decisive and line.offset > la.crash.line.offset:
                la.progress_after_crash = True  # as any later landmark does for the judge
        return row.evidence == "served"
    if row.evidence == "startup":  # a source line only start-up runs ("scheduler = Scheduler(...")
        ev.startup_line = ev.startup_line or line
        return True
    if row.evidence == "constructor":
        ev.constructors.append((obs.data.get("cls", ""), line))
        return True
    if row.id == "traceback-frame" or row.evidence == "frame":
        form = "pyspy" if row.id == "pyspy-frame" else "faulthandler" if row.id == "faulthandler-frame" else "traceback"
        path, function = obs.data.get("path") or "", obs.data.get("function") or ""
        if row.id == "traceback-frame-elided":
            path = line.msg.strip().split('"', 1)[0]
        ev.frames.append(Frame(path, function, line, form))
        if form != "pyspy":
            ev.trouble_line = line
        if ev.startup_line is None and frame_rules.is_startup(path, function):
            ev.startup_line = line
        ov = frame_rules.overlap_of(path, function)
        if ov is not None:
            _frame_overlap(judge, la, ov, line)
        if row.crash_start and row.id != "traceback-frame":
            la.in_traceback = True
            la.traceback_line = la.traceback_line or line
        return row.id != "traceback-frame"  # the judge reads traceback frames itself too
    return False


def adopt_command(old: "Launch", new: "Launch") -> None:
    """A command pasted right before a new launch's first lines is that launch's, not the old one's."""
    ev = old.ev
    if ev.command_line is not None and ev.command_line.offset > ev.last_log_offset:
        new.ev.command_line, new.ev.requested = ev.command_line, ev.requested
        ev.command_line, ev.requested = None, {}


def _header_argv(text: Optional[str]) -> Optional[list[str]]:
    try:
        head = json.loads(text or "")
    except ValueError:
        return None
    argv = head.get("argv") if isinstance(head, dict) else None
    return argv if isinstance(argv, list) and all(isinstance(a, str) for a in argv) else None


def _frame_overlap(judge: "Judge", la: "Launch", value: bool, line: Line) -> None:
    """A frame of the event loop is the loop that ran: it outweighs what flags and warnings said."""
    ev = la.ev
    if ev.overlap_frame is None or la.overlap != value:
        la.overlap, la.overlap_line = value, line
        ev.overlap_frame = line


# --- judging -----------------------------------------------------------------------------------
def close_open_traceback(la: "Launch", *, at_eof: bool, quiet_for: float) -> None:
    """A traceback that the file (or the excerpt) ends in, before its exception line, is a crash
    whose exception is unknown: the scheduler prints a traceback only on its way out."""
    from dynspec_cli.verdict.judge import Crash

    if la.crash is not None or not la.in_traceback or not (at_eof or quiet_for >= 1.0):
        return
    start = la.traceback_line or la.ev.trouble_line
    if start is None:
        return
    la.crash = Crash("Traceback", "traceback cut off before its exception line", start, decisive=False)
    la.progress_after_crash = False


def _classes_in(k: Knowledge, module: str, mask: int) -> list[str]:
    names = []
    for c in k.classes:
        if c.module == module and not c.name.endswith(_NOT_WORKER_SUFFIX) and k.mask(c.versions) & mask:
            if c.name not in names:
                names.append(c.name)
    return names


def _mro_any(k: Knowledge, name: str, mask: int) -> list[list[str]]:
    return [k.mro(v, name) for v in k.versions_in(mask & k.class_mask(name))] or [[name]]


def _subclasses(k: Knowledge, name: str, mask: int) -> list[str]:
    out = []
    for c in k.classes:
        if c.name != name and c.name not in out and k.mask(c.versions) & mask:
            if any(name in mro for mro in _mro_any(k, c.name, mask)):
                out.append(c.name)
    return out


def frame_worker(k: Knowledge, la: "Launch", mask: int) -> Optional[tuple[str, str, Line]]:
    """(class, module, line) of the worker whose code the frames show ran, if they single one out.
    A constructor frame (`self.draft_worker = EAGLEWorker(`) names the class; else the worker
    module's classes (modules.toml), the most derived when frames show several modules."""
    known = {c.module for c in k.classes}
    for cls, line in la.ev.constructors:
        mod = k.module_of_class(cls)
        if mod and k.class_mask(cls) & mask:
            return cls, mod, line
    seen: dict[str, Line] = {}
    for f in la.ev.frames:
        mod = frame_rules.worker_module(f.path, known)
        if mod:
            seen.setdefault(mod, f.line)
    picks = []
    for mod, line in seen.items():
        names = _classes_in(k, mod, mask)
        if len(names) == 1:
            picks.append((names[0], mod, line))
    if not picks:
        fam = frame_family(k, la, mask)
        if fam is not None and len(fam[0]) == 1:  # a module only one worker uses
            cls = next(iter(fam[0]))
            return cls, k.module_of_class(cls), fam[1]
        return None
    # The class whose MRO holds every other one (StandaloneWorker's frames also run EAGLEWorker's code).
    for cls, mod, line in picks:
        mros = _mro_any(k, cls, mask)
        if all(any(o in mro for mro in mros) for o, _, _ in picks):
            return cls, mod, line
    return None


def frame_family(k: Knowledge, la: "Launch", mask: int) -> Optional[tuple[set[str], Line]]:
    """The workers that can have run, by frames in speculative modules that only some workers use
    (frames.toml [[family]]), and the first such frame."""
    out, first = None, None
    for f in la.ev.frames:
        workers = frame_rules.family(f.path)
        if workers is None:
            continue
        here = {c for c in workers if k.class_mask(c) & mask}
        out = here if out is None else (out & here) or out
        first = first or f.line
    return (out, first) if out else None


def worker_from_frames(k: Knowledge, la: "Launch", mask: int, worker: dict[str, Any],
                       analysis: Optional["WorkerAnalysis"], patched: list[str]) -> Optional["WorkerAnalysis"]:
    """Frames outweigh the dispatch tables: name the worker they show (in `worker`, in place) and
    return the analysis the code-path findings read, with `patched_on_path` from that class."""
    from dynspec_cli.verdict.workers import WorkerAnalysis

    if not mask:
        return analysis
    found = frame_worker(k, la, mask)
    if found is None:
        fam = frame_family(k, la, mask)
        if fam is not None and not worker.get("class"):
            names, line = fam
            worker.update({"candidates": sorted(names), "basis": (
                f"a frame at line {line.no or '?'} is in a speculative module only {', '.join(sorted(names))} use")})
        return analysis
    cls, mod, line = found
    subs = _subclasses(k, cls, mask)
    form = next((f.form for f in la.ev.frames if f.line is line), "traceback")
    how = "constructor" if any(c == cls for c, _ in la.ev.constructors) else {
        "pyspy": "py-spy frame", "faulthandler": "faulthandler frame"}.get(form, "traceback frame")
    fname = next((f.path.replace("\\", "/").rsplit("/", 1)[-1] for f in la.ev.frames if f.line is line), f"{mod}.py")
    ran = f"{cls}'s code ran" if fname == f"{mod}.py" else f"only {cls} uses it"
    worker.update({"class": cls, "module": f"sglang.srt.speculative.{mod}",
                   "basis": f"{how} in {fname} at line {line.no or '?'}: {ran}" + (
                       f" (or a subclass: {', '.join(subs)})" if subs else ""),
                   "candidates": sorted({cls, *subs})})
    la.ev.worker_line = line
    on_path: Optional[bool] = None
    if patched:
        own = any(p in mro for mro in _mro_any(k, cls, mask) for p in patched)
        sub = any(p in mro for s in subs for mro in _mro_any(k, s, mask) for p in patched)
        on_path = True if own else None if sub else False
    choice = WorkerChoice(mod, cls)
    if analysis is None:
        return WorkerAnalysis({choice: mask}, choice, "", on_path)
    analysis.display, analysis.patched_on_path = choice, on_path
    return analysis


def _algorithms_of_class(k: Knowledge, cls: str, mask: int) -> set[str]:
    """The algorithms whose dispatch (dispatch.toml) builds `cls` or a subclass of it."""
    out: set[str] = set()
    for v in k.versions_in(mask):
        r = k.dispatch_rules(v)
        for rule in (r.rules if r else []):
            if rule.cls and cls in k.mro(v, rule.cls):
                out |= {k.canonical_algorithm(a) for a in rule.algorithms}
    return out


def requested_algorithms(k: Knowledge, la: "Launch") -> Optional[set[str]]:
    """The algorithm the launch command in the log asked for, when nothing sglang wrote says."""
    req = la.ev.requested.get("speculative_algorithm")
    if req is None:
        return None
    name = k.canonical_algorithm(str(req[0]).upper())
    return {name} if name else None


def narrow_by_loop(k: Knowledge, la: "Launch", mask: int, algos: Optional[set[str]],
                   version_text: Optional[str]) -> tuple[int, Optional[str]]:
    """A frame of the scheduler loop proves the overlap setting that argument resolution produced;
    with the algorithm known, only the releases whose resolution (overlap.toml) can produce it
    for that algorithm remain (EAGLE never runs event_loop_overlap on 0.5.3)."""
    if not mask or la.ev.overlap_frame is None or la.overlap is None or not algos:
        return mask, version_text
    keep = 0
    for v in k.versions_in(mask):
        if any(k.resolve_overlap(v, a, env=env, flags=flags, user_disable=ud, topk=t).overlap == la.overlap
               for a in algos for env, flags in _switch_settings(k, v) for ud in (False, True) for t in (1, 4)):
            keep |= k.mask_of(v)
    if not keep or keep == mask:
        return mask, version_text
    return keep, k.single(keep) or k.span(keep)


def _switch_settings(k: Knowledge, version: str) -> list[tuple[dict, set]]:
    r = k.overlap_range(version)
    if r is None or r.switch.kind == "none":
        return [({}, set())]
    if r.switch.kind == "env":
        return [({r.switch.name: "True"}, set()), ({r.switch.name: "False"}, set()), ({}, set())]
    return [({}, {r.switch.name}), ({}, set())]


def claim(value: Any, line: Optional[Line], basis: str) -> dict[str, Any]:
    if value is None:
        return {"value": None, "line": None, "text": None, "basis": basis or None}
    return {"value": value, "line": (line.no or None) if line else None,
            "text": line.text[:300] if line else None, "basis": basis}


def build(k: Knowledge, la: "Launch", mask: int, *, crashed: bool, worker: dict[str, Any],
          algorithm: Optional[str], spec_off: bool = False) -> dict[str, Any]:
    ev = la.ev
    # crashed
    if crashed and la.crash is not None:
        c_crashed = claim(True, la.crash.line, f"{la.crash.exception} at line {la.crash.line.no or '?'}")
    else:
        after = [x for x in (la.ready, ev.served_line) if x is not None and
                 (ev.trouble_line is None or x.offset > ev.trouble_line.offset)]
        if after and la.crash is None or after and la.progress_after_crash:
            proof = max(after, key=lambda x: x.offset)
            what = "the server became ready" if proof is la.ready else "the server served requests"
            c_crashed = claim(False, proof, f"{what} after the last traceback, and no crash line follows")
        else:
            c_crashed = claim(None, None, "no crash line, and no readiness or served request after the last traceback")
    # server_ready
    if la.ready is not None:
        c_ready = claim(True, la.ready, "the ready line")
    elif crashed and ev.served_line is None and (ev.startup_line is not None or la.flag_rejected is not None):
        start = ev.startup_line or la.flag_rejected
        c_ready = claim(False, start, "the launch crashed while it was starting (this line runs only before ready)")
    else:
        c_ready = claim(None, None, "")
    # speculative_algorithm: resolved (dump / probe) > warnings > the running worker's class > requested
    if algorithm:
        c_algo = claim(algorithm, la.algorithm_line, "server_args / probe (resolved by sglang)")
    elif la.algorithms and len(la.algorithms) == 1:
        line = next((o.line for o in la.warnings if o.warning.implies.algorithms), None)
        c_algo = claim(next(iter(la.algorithms)), line, "the launcher's warning")
    else:
        c_algo = claim(None, None, "")
        found = frame_worker(k, la, mask) if mask else None
        algos = _algorithms_of_class(k, found[0], mask) if found else set()
        if len(algos) == 1:
            c_algo = claim(next(iter(algos)), found[2], f"only {next(iter(algos))} runs {found[0]} (dispatch.toml)")
        elif "speculative_algorithm" in ev.requested:
            value, line = ev.requested["speculative_algorithm"]
            c_algo = claim(k.canonical_algorithm(str(value).upper()), line, "requested by the launch command in the log")
    # worker
    wline = None
    if str(worker.get("basis") or "").startswith("probe"):
        wline = la.probe.version_line
    elif worker.get("class") or worker.get("module"):
        wline = ev.worker_line
    if wline is None and worker.get("class"):
        wline = next((x for x in (la.overlap_line, la.algorithm_line) if x is not None), None)
    value = worker.get("class") or (worker.get("module") or "").rsplit(".", 1)[-1] or None
    c_worker = claim(value, wline, worker.get("basis") or "")
    return {"crashed": c_crashed, "server_ready": c_ready, "speculative_algorithm": c_algo, "worker": c_worker,
            "speculative": _speculative(la, spec_off, c_algo, wline)}


def _speculative(la: "Launch", spec_off: bool, c_algo: dict[str, Any], wline: Optional[Line]) -> dict[str, Any]:
    """On: an algorithm is known, a decode line carries `accept len`, a line only speculation writes,
    or a frame of the speculative package; off: the dump says speculative_algorithm=None, or decode
    lines carry no `accept len`."""
    if la.spec_off_line is not None:
        return claim(False, la.spec_off_line, "server_args shows speculative_algorithm=None")
    if spec_off:
        return claim(False, la.ev.decode_line, "'Decode batch' lines without 'accept len'")
    if c_algo["value"]:
        return {**c_algo, "value": True, "basis": f"the algorithm is known ({c_algo['basis']})"}
    frame = wline or next((f.line for f in la.ev.frames if frame_rules.rules().worker_dir in f.path.replace("\\", "/")), None)
    for line, basis in ((la.ev.accept_line, "a 'Decode batch' line carries 'accept len'"),
                        (la.ev.spec_line, "a line only a speculating server writes"),
                        (frame, "a frame of sglang/srt/speculative/ ran")):
        if line is not None:
            return claim(True, line, basis)
    return claim(None, None, "")


def empty() -> dict[str, Any]:
    return {k: claim(None, None, "") for k in NAMES}


def requested_vs_effective(la: "Launch") -> Optional[dict[str, Any]]:
    """The launch command's flags next to what sglang resolved (the server_args dump)."""
    ev = la.ev
    if ev.command_line is None and not ev.requested:
        return None
    flags = {}
    for dest, (value, line) in sorted(ev.requested.items()):
        row = {"requested": value, "requested_line": line.no or None}
        if dest in la.dump:
            row.update(effective=la.dump[dest], effective_line=la.dump_line.no if la.dump_line else None)
        flags[dest] = row
    line = ev.command_line
    return {"line": (line.no or None) if line else None, "text": line.text[:500] if line else None, "flags": flags}
