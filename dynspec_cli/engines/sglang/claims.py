"""The claims a verdict makes about a launch — `crashed`, `server_ready`, `speculative_algorithm`,
`worker`, `speculative` (is speculative decoding on) — each proven (a value and the line that proves
it), or null. The top-level JSON fields of the same names are these values (result.TOP_LEVEL).

`false` needs positive evidence too: `crashed: false` only when the launch became ready or served
requests after its last traceback and no crash line follows; `server_ready: false` only when the
launch crashed while it was still starting. The evidence is collected while the launch is read
(claim_evidence.py) and read here when the judge judges (`worker_from_frames`, `build`). Frames (traceback, faulthandler, py-spy) are code that ran: they
outweigh flags and warnings, which say what was configured."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional

from dynspec_cli.engines.sglang import frames as frame_rules
from dynspec_cli.evidence.lines import Line
from dynspec_cli.engines.sglang.knowledge import Knowledge, WorkerChoice
from dynspec_cli.verdict.result import claim

if TYPE_CHECKING:
    from dynspec_cli.engines.sglang.launch import Launch
    from dynspec_cli.engines.sglang.workers import WorkerAnalysis

_NOT_WORKER_SUFFIX = "DraftWorker"


# --- judging -----------------------------------------------------------------------------------
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
        if cls.endswith(_NOT_WORKER_SUFFIX):  # a draft worker is built by the worker: the frames name that one
            continue
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
    from dynspec_cli.engines.sglang.workers import WorkerAnalysis

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
    la.ev.named_worker(line)
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
    if not mask or la.config.overlap_frame is None or la.config.overlap is None or not algos:
        return mask, version_text
    keep = 0
    for v in k.versions_in(mask):
        if any(k.resolve_overlap(v, a, env=env, flags=flags, user_disable=ud, topk=t).overlap == la.config.overlap
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


def build(k: Knowledge, la: "Launch", mask: int, *, crashed: bool, worker: dict[str, Any],
          algorithm: Optional[str], spec_off: bool = False) -> dict[str, Any]:
    ev = la.ev
    # crashed
    if crashed and la.life.crash is not None:
        c_crashed = claim(True, la.life.crash.line, f"{la.life.crash.exception} at line {la.life.crash.line.no or '?'}")
    else:
        after = [x for x in (la.life.ready, ev.served_line) if x is not None and
                 (ev.trouble_line is None or x.offset > ev.trouble_line.offset)]
        stop = la.life.stop
        if after and la.life.crash is None or after and la.life.progress_after_crash:
            proof = max(after, key=lambda x: x.offset)
            what = "the server became ready" if proof is la.life.ready else "the server served requests"
            c_crashed = claim(False, proof, f"{what} after the last traceback, and no crash line follows")
        elif stop is not None and (la.life.crash is None or la.life.progress_after_crash):
            # the lines after a stop (its children's exits, the launcher's SIGQUIT) are the stop's
            c_crashed = claim(False, stop.line, f"the server was stopped ({stop.signal} received), and no crash line "
                                                f"but the stop's own follows")
        else:
            c_crashed = claim(None, None, "no crash line, and no readiness or served request after the last traceback")
    # server_ready
    if la.life.ready is not None:
        c_ready = claim(True, la.life.ready, "the ready line")
    elif crashed and ev.served_line is None and (ev.startup_line is not None or la.life.flag_rejected is not None):
        start = ev.startup_line or la.life.flag_rejected
        c_ready = claim(False, start, "the launch crashed while it was starting (this line runs only before ready)")
    else:
        c_ready = claim(None, None, "")
    # speculative_algorithm: resolved (dump / probe) > warnings > the running worker's class > requested
    if algorithm:
        c_algo = claim(algorithm, la.config.algorithm_line, "server_args / probe (resolved by sglang)")
    elif la.config.algorithms and len(la.config.algorithms) == 1:
        line = next((o.line for o in la.config.warnings if o.warning.implies.algorithms), None)
        c_algo = claim(next(iter(la.config.algorithms)), line, "the launcher's warning")
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
        wline = next((x for x in (la.config.overlap_line, la.config.algorithm_line) if x is not None), None)
    value = worker.get("class") or (worker.get("module") or "").rsplit(".", 1)[-1] or None
    c_worker = claim(value, wline, worker.get("basis") or "")
    return {"crashed": c_crashed, "server_ready": c_ready, "speculative_algorithm": c_algo, "worker": c_worker,
            "speculative": _speculative(la, spec_off, c_algo, wline)}


def _speculative(la: "Launch", spec_off: bool, c_algo: dict[str, Any], wline: Optional[Line]) -> dict[str, Any]:
    """On: an algorithm is known, a decode line carries `accept len`, a line only speculation writes,
    or a frame of the speculative package; off: the dump says speculative_algorithm=None, or decode
    lines carry no `accept len`."""
    if la.config.spec_off_line is not None:
        return claim(False, la.config.spec_off_line, "server_args shows speculative_algorithm=None")
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


def requested_vs_effective(la: "Launch") -> Optional[dict[str, Any]]:
    """The launch command's flags next to what sglang resolved (the server_args dump)."""
    ev = la.ev
    if ev.command_line is None and not ev.requested:
        return None
    flags = {}
    for dest, (value, line) in sorted(ev.requested.items()):
        row = {"requested": value, "requested_line": line.no or None}
        if dest in la.config.dump:
            row.update(effective=la.config.dump[dest], effective_line=la.config.dump_line.no if la.config.dump_line else None)
        flags[dest] = row
    line = ev.command_line
    return {"line": (line.no or None) if line else None, "text": line.text[:500] if line else None, "flags": flags}
