"""Which worker class a launch runs, and whether a patched class is on its path.

Unknowns are expanded, not guessed: an unknown algorithm, overlap setting or multi-layer flag
makes every possibility a candidate, and a conclusion holds only if it holds for all of them."""
from __future__ import annotations

from typing import Iterable, Optional

import msgspec

from dynspec_cli.engines.sglang.knowledge import Knowledge, WorkerChoice

_NOT_WORKERS = {"TpModelWorker", "BaseSpecWorker", "BaseDraftWorker", "object"}


class WorkerAnalysis(msgspec.Struct, dict=True):
    candidates: dict[WorkerChoice, int]  # worker -> releases giving it
    display: Optional[WorkerChoice]  # the class to name (unique, or common base of all)
    display_note: str = ""
    patched_on_path: Optional[bool] = None  # True: every candidate has a patched class in its MRO
    errors: list[str] = []  # dispatch raises instead
    # candidate -> (patched class, method, the class whose override skips it): the patched
    # class is in its MRO, but the patched method never runs (configs/sglang/modules.toml overrides)
    method_blocked: dict[WorkerChoice, tuple[str, str, str]] = {}


def analyze(k: Knowledge, mask: int, algorithms: Iterable[str] | None, overlap: Optional[bool],
            multi_layer: Optional[bool], patched: list[str], fits=None,
            methods: Optional[dict[str, str]] = None) -> WorkerAnalysis:
    algos = sorted(set(algorithms)) if algorithms else list(k.algorithms)
    overlaps = [overlap] if overlap is not None else [True, False]
    mls_all = [multi_layer] if multi_layer is not None else [False, True]
    cands = k.workers_for(mask, algos, overlaps, mls_all, fits)
    errors = sorted({c.error for c in cands if c.error})
    cands = {c: m for c, m in cands.items() if c.cls}
    # What to name: the candidates under default multi-layer (off) when it is unknown.
    shown = cands if multi_layer is not None else {
        c: m for c, m in k.workers_for(mask, algos, overlaps, [False], fits).items() if c.cls}
    display, note = _display(k, shown)
    if multi_layer is None and display and any(c not in shown for c in cands):
        note = (note + "; " if note else "") + "assuming --enable-multi-layer-eagle is off"
    on_path: Optional[bool] = None
    if cands and patched:
        flags = [_has_patched(k, c, m, patched) for c, m in cands.items()]
        on_path = True if all(flags) else False if not any(flags) else None
    blocked = {c: b for c, m in cands.items() if (b := method_blocked(k, c.cls, m, patched, methods or {}))}
    return WorkerAnalysis(cands, display, note, on_path, errors, blocked)


def method_blocked(k: Knowledge, running: str, mask: int, patched: list[str],
                   methods: dict[str, str]) -> Optional[tuple[str, str, str]]:
    """(patched class, method, blocking class) when, on every release of `mask`, each patched
    class in `running`'s MRO has its patched method skipped by an override on the way (a
    subclass's method that never calls it); None when one of them runs or it is not known."""
    found = None
    for v in k.versions_in(mask):
        on_mro = [p for p in patched if p in k.mro(v, running) and p in methods]
        if not on_mro:
            return None
        for p in on_mro:
            reached, by = k.method_reaches(v, running, p, methods[p])
            if reached is not False:
                return None
            found = found or (p, methods[p], by)
    return found


def _has_patched(k: Knowledge, c: WorkerChoice, mask: int, patched: list[str]) -> bool:
    """A patched class in the worker's MRO, or in that of the draft worker it builds (modules.toml [[builds]])."""
    return any(p in k.on_path(v, c.cls) for v in k.versions_in(mask) for p in patched)


def _display(k: Knowledge, cands: dict[WorkerChoice, int]) -> tuple[Optional[WorkerChoice], str]:
    if not cands:
        return None, ""
    if len(cands) == 1:
        return next(iter(cands)), ""
    # A class every candidate is an instance of (e.g. StandaloneWorker is an EAGLEWorker).
    # Every release a candidate comes from counts: EAGLEWorkerV2 subclasses EAGLEWorker only in 0.5.3.post2-post3.
    mros = {c: [k.mro(v, c.cls) for v in k.versions_in(m)] for c, m in cands.items()}
    first = next(iter(mros.values()))[0]
    for name in first:
        if name in _NOT_WORKERS:
            continue
        if all(name in mro for per in mros.values() for mro in per):
            module = k.module_of_class(name)
            others = sorted(c.cls for c in cands if c.cls != name)
            return WorkerChoice(module, name), f"or its subclass {', '.join(others)}, depending on the algorithm"
    return None, ""


def _export(name: str, on: bool) -> str:
    return f"export {name}=True" if on else f"unset {name}"


def how_to_run(k: Knowledge, mask: int, algorithms: Iterable[str] | None, patched: list[str],
               env_step=_export) -> tuple[list[str], list[str]]:
    """Settings (env and flags) under which the releases in `mask` run a patched class, derived
    from overlap.toml and dispatch.toml. Returns (steps, exceptions): `exceptions` names the
    (release, algorithm) pairs no setting helps, which are left out of `steps`. `env_step(name,
    on)` says how to set an env switch where the server will see it (default: `export`)."""
    algos = sorted(set(algorithms)) if algorithms else ["EAGLE3"]
    pairs: dict[tuple[str, str], set] = {}
    for v in k.versions_in(mask):
        r = k.overlap_range(v)
        if r is None:
            continue
        switches = (True, False) if r.switch.kind in ("env", "flag") else (None,)
        for a in algos:
            pairs[(v, a)] = {(sw, ud, t) for sw in switches for ud in (False, True) for t in (4, 1)
                             if _works(k, v, a, sw, ud, t, patched)}
    hopeless = sorted({a for (v, a), ok in pairs.items() if not ok})
    exceptions = []
    for a in hopeless:
        m = 0
        for (v, a2), ok in pairs.items():
            if a2 == a and not ok:
                m |= k.mask_of(v)
        exceptions.append(f"{a} on {k.span(m)}")
    sets = [ok for ok in pairs.values() if ok]
    if not sets:
        return [], exceptions
    steps: list[str] = []
    r = k.overlap_range(k.versions_in(mask)[-1])
    if all({sw for sw, _, _ in ok} == {True} for ok in sets) and r and r.switch.name:
        steps.append(env_step(r.switch.name, True) if r.switch.kind == "env" else f"pass {r.switch.name}")
    elif all({sw for sw, _, _ in ok} == {False} for ok in sets) and r and r.switch.name:
        steps.append(env_step(r.switch.name, False) if r.switch.kind == "env" else f"do not pass {r.switch.name}")
    if all(not any(t == 4 for _, _, t in ok) for ok in sets):
        steps.append("pass --speculative-eagle-topk 1")
    if all(not any(not ud for _, ud, _ in ok) for ok in sets):
        steps.append("pass --disable-overlap-schedule")
    elif all(not any(ud for _, ud, _ in ok) for ok in sets):
        steps.append("do not pass --disable-overlap-schedule")
    return steps or ["(any setting runs it)"], exceptions


def _works(k: Knowledge, version: str, algo: str, switch: Optional[bool], user_disable: bool, topk: int,
           patched: list[str]) -> bool:
    r = k.overlap_range(version)
    env: dict[str, str] = {}
    flags: set[str] = set()
    if r.switch.kind == "env" and switch is not None:
        env[r.switch.name] = "True" if switch else "False"
    elif r.switch.kind == "flag" and switch:
        flags.add(r.switch.name)
    out = k.resolve_overlap(version, algo, env=env, flags=flags, user_disable=user_disable, topk=topk)
    if out.error or out.overlap is None:
        return False
    w = k.worker(version, algo, out.overlap, False)
    return bool(w and w.cls and any(p in k.mro(version, w.cls) for p in patched))
