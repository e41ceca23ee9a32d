"""Each hunk of the user's diff, judged: does a worker that will run reach the function it changes?

A patch is more than its announcement. The marker hunk says "I am here"; the behaviour hunks (a
draft worker's `draft`, a verify method) do the work, often in another class than the one that
logs. Each scope a hunk adds lines to (file, class, function: the inspector's AST of the installed
file) is judged against the classes that run: the speculative worker dispatch.toml names, the
draft worker it builds (modules.toml [[builds]]), both MROs, and the overrides that never call the
base's method (modules.toml [[override]])."""
from __future__ import annotations

from typing import Any, Optional

import msgspec

from dynspec_cli.engines.sglang.knowledge import Knowledge
# what every engine's entries share (verdict/hunks.py), named here too: callers read `hunks.REACHABLE`
from dynspec_cli.verdict.hunks import NOT_REACHABLE, REACHABLE, UNKNOWN, is_behaviour, method_of, scope_role, summary  # noqa: F401
from dynspec_cli.verdict.hunks import entry as _entry
from dynspec_cli.verdict.result import where  # noqa: F401 - (hunks.where: the findings name scopes so)
FLAG_FILE = "server_args.py"


class Running(msgspec.Struct, frozen=True):
    """What will run: the speculative worker and the draft worker it builds (None: itself/none)."""
    version: str
    worker: str
    draft: Optional[str]
    basis: str  # how dynspec knows, in words


def running(k: Knowledge, version: str, worker: str, basis: str) -> Running:
    return Running(version, worker, k.draft_of(version, worker), basis)


def judge(diff: dict, k: Knowledge, run: Optional[Running], *, plugin: bool = False,
          hook: Optional[tuple[str, str]] = None) -> list[dict[str, Any]]:
    """One entry per scope of each hunk (a hunk spanning two functions gives two): file, class,
    function, lines, role, reach, reason, evidence. With a plugin feature, the files outside sglang
    are the plugin's own: their code runs when the hooked method (`hook`: class, method) does; the
    plugin findings (loading, allow-list, processes) decide the verdict."""
    out = []
    for f in diff.get("files") or []:
        path = f.get("diff_path") or ""
        if plugin and not f.get("installed_path"):
            if hook:
                reach, why, evidence = reach_of(k, run, *hook)
                why = f"the plugin's own code, run by its hook on {hook[0]}.{hook[1]}: {why}"
            else:
                reach, why, evidence = UNKNOWN, "the plugin's own code: it runs when its hook runs (judged by the plugin findings)", ""
            if not path.endswith(".py"):  # its dist-info: what load_plugins() reads, not code that runs
                reach, why, evidence = UNKNOWN, "the plugin's metadata (entry points), read by load_plugins(): judged by the plugin findings", ""
            for h in f.get("hunks") or []:
                out.append(_entry(path, h, None, "plugin", reach, why, evidence))
            continue
        for h in f.get("hunks") or []:
            scopes = h.get("scopes") or []
            if not scopes:  # a deletion, a non-Python file, a file the inspector could not parse
                out.append(_entry(path, h, None, "behaviour", UNKNOWN,
                                  "no added Python line dynspec can place in a function (a deletion, or not a .py file)",
                                  h.get("header")))
                continue
            for sc in scopes:
                what = role(path, sc)
                if what == "flag":
                    reach, reason, evidence = (REACHABLE, "server_args.py: every launch builds ServerArgs and parses "
                                               "its flags (judged as flags: DS101, DS109, DS110)", path)
                else:
                    reach, reason, evidence = reach_of(k, run, sc.get("class"), method_of(sc))
                out.append(_entry(path, h, sc, what, reach, reason, evidence, f.get("installed_path")))
    return out


def in_flag_file(path: str) -> bool:
    """A hunk of server_args.py: flags and their handling, judged as flags."""
    return path.replace("\\", "/").rsplit("/", 1)[-1] == FLAG_FILE


def role(path: str, sc: dict) -> str:
    return "flag" if in_flag_file(path) else scope_role(sc)


def reach_of(k: Knowledge, run: Optional[Running], cls: Optional[str], method: Optional[str]) -> tuple[str, str, str]:
    """(reach, reason, evidence) of `cls.method` for what will run."""
    if run is None:
        return UNKNOWN, "the worker that will run is not known (see the findings)", ""
    if cls is None:
        what = f"module-level function {method}()" if method else "module top-level code"
        return UNKNOWN, f"{what}: dynspec does not follow calls into it from the workers", ""
    if method is None:
        return UNKNOWN, f"the body of class {cls}, outside its methods: runs when its module is imported", ""
    v = run.version
    roles = [(run.worker, "the speculative worker")] + ([(run.draft, "the draft worker it builds")] if run.draft else [])
    evidence = run.basis + (f"; {run.worker} builds {run.draft} (configs/sglang/modules.toml [[builds]])" if run.draft else "")
    blocked = []
    for r, what in roles:
        mro = k.mro(v, r)
        if cls not in mro:
            continue
        reached, by = k.method_reaches(v, r, cls, method)
        if reached is True:
            return (REACHABLE, f"{cls}.{method} runs: {r} is {what} (MRO {' > '.join(_workers(mro))}) and no "
                               f"class before {cls} overrides {method} without calling it", evidence)
        if reached is False:
            blocked.append(f"{r} is {what}, but {by}.{method} overrides {cls}.{method} without calling it")
        else:
            return (UNKNOWN, f"{r} is {what}; {by}.{method} calls {cls}.{method} only under a condition", evidence)
    if blocked:
        return NOT_REACHABLE, "; ".join(blocked), evidence + "; configs/sglang/modules.toml [[override]]"
    if k.class_row(v, cls) is not None:
        path = f"{run.worker} (MRO {' > '.join(_workers(k.mro(v, run.worker)))})"
        if run.draft:
            path += f" and its draft worker {run.draft} (MRO {' > '.join(_workers(k.mro(v, run.draft)))})"
        return NOT_REACHABLE, f"{cls} is not on the running path: sglang {v} runs {path}", evidence
    return (UNKNOWN, f"{cls} is not a class of dynspec's tables for sglang {v} (configs/sglang/modules.toml): "
                     "whether the running workers call it is not known", evidence)


def _workers(mro: list[str]) -> list[str]:
    return [c for c in mro if c not in ("ABC", "object")]


def only_flags(entries: list[dict], marker_hits: list[dict]) -> bool:
    """The whole patch is in server_args.py (flags, argument handling, perhaps the announcement):
    it runs at start-up and nothing of it acts while decoding."""
    return (any(e["role"] == "flag" for e in entries) and all(e["role"] in ("flag", "comment") for e in entries)
            and all(str(h.get("file", "")).endswith(FLAG_FILE) for h in marker_hits))


