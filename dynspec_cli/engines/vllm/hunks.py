"""Each hunk of the user's diff, judged for vLLM: does the model runner that will run, or the
proposer class it builds, reach the code the hunk changes?

vLLM's split is the runner (V1: vllm/v1/worker/gpu_model_runner.py and vllm/v1/spec_decode/; V2:
vllm/v1/worker/gpu/) and the proposer class per speculative method and runner. Both are data
(configs/vllm/runner.toml [paths], proposers.toml); the inspector maps each hunk onto the installed
file's AST (its scopes: file, class, function) and reports the static MRO of every proposer class.
A scope is judged, first match wins:

1. a class on the running proposer's static MRO: reachable (the class the runner builds, or a base);
2. a class on the static MRO of another proposer of this release (another method, the other
   runner), not on the running one's: not reachable;
3. a file of the runner that does not run: not reachable; a file of the runner that runs:
   reachable (dynspec does not follow calls inside the runner: the file's code is that runner's);
4. anything else (a model file, a config module): unknown.

The entries carry the keys of sglang's (engines/sglang/hunks.py `_entry`), so the run record's
patch.hunks and the reports read both engines' alike."""
from __future__ import annotations

import os
from typing import Any, Optional

from dynspec_cli.engines.vllm.knowledge import VllmKnowledge
# what every engine's entries share (verdict/hunks.py), named here too: callers read `hunks.REACHABLE`
from dynspec_cli.verdict.hunks import NOT_REACHABLE, REACHABLE, UNKNOWN, is_behaviour, summary  # noqa: F401
from dynspec_cli.verdict.hunks import entry as _entry
from dynspec_cli.verdict.hunks import scope_role as role


class Running:
    """What will run: the runner (v1 | v2 | None), why (the env var, the release's default), the
    proposer class and its static MRO as [(module, class)] (module: path under site-packages)."""

    def __init__(self, version: str, runner: Optional[str], reason: str, method: Optional[str],
                 proposer: Optional[str], mro: list[tuple[str, str]]):
        self.version, self.runner, self.reason, self.method = version, runner, reason, method
        self.proposer, self.mro = proposer, mro

    def says(self) -> str:
        """`vllm 0.33.0 runs the V1 model runner and EagleProposer; VLLM_USE_V2_MODEL_RUNNER=0 decides ...`"""
        what = f"vllm {self.version} runs the {(self.runner or '?').upper()} model runner"
        if self.proposer:
            what += f" and {self.proposer}"
        return f"{what}; {self.reason}"


def judge(diff: dict, k: VllmKnowledge, run: Optional[Running], classes: dict[str, Any],
          site: Optional[str]) -> list[dict[str, Any]]:
    """One entry per scope of each hunk (file, class, function, lines, role, reach, reason,
    evidence). `classes`: the inspector's static MROs ("module:Class" -> {present, mro[]});
    `site`: the folder holding the vllm package, to name an installed file as vllm/... ."""
    others = _other_proposers(k, run, classes)
    out = []
    for f in diff.get("files") or []:
        path = f.get("diff_path") or ""
        installed = f.get("installed_path")
        module = os.path.relpath(installed, site).replace(os.sep, "/") if installed and site else path
        for h in f.get("hunks") or []:
            scopes = h.get("scopes") or []
            if not scopes:  # a deletion, a non-Python file
                out.append(_entry(path, h, None, "behaviour", UNKNOWN,
                                  "no added Python line dynspec can place in a function (a deletion, or not a .py file)",
                                  h.get("header"), installed))
                continue
            for sc in scopes:
                reach, reason, evidence = reach_of(k, run, others, module, sc.get("class"))
                out.append(_entry(path, h, sc, role(sc), reach, reason, evidence, installed))
    return out


def _other_proposers(k: VllmKnowledge, run: Optional[Running], classes: dict[str, Any]) -> dict[tuple[str, str], str]:
    """(module, class) -> words, for every class on the static MRO of a proposer of this release
    that is not on the running proposer's MRO."""
    if run is None:
        return {}
    running = set(run.mro)
    out: dict[tuple[str, str], str] = {}
    for row in k.proposers:
        if not k.in_range(run.version, row.versions):
            continue
        mro = [(m["module"], m["class"]) for m in (classes.get(f"{row.module}:{row.cls}") or {}).get("mro") or []]
        for i, key in enumerate(mro or [(row.module, row.cls)]):
            if key in running or key in out:
                continue
            what = f"the {row.runner.upper()} runner's proposer for {'/'.join(row.methods)}"
            out[key] = what if i == 0 else f"a base of {row.cls}, {what}"
    return out


def reach_of(k: VllmKnowledge, run: Optional[Running], others: dict[tuple[str, str], str], module: str,
             cls: Optional[str]) -> tuple[str, str, str]:
    """(reach, reason, evidence) of a scope in `module` (vllm/...py), class `cls` (None: a function
    or code of the module)."""
    if run is None or run.runner is None:
        return UNKNOWN, "the model runner that will run is not known (see the findings)", ""
    tables = "configs/vllm/proposers.toml, the inspector's static MRO"
    if cls is not None and (module, cls) in run.mro:
        what = "the proposer" if run.mro[0] == (module, cls) else f"a base of the proposer {run.proposer}"
        return (REACHABLE, f"{cls} is {what} the {run.runner.upper()} runner builds for method {run.method!r}: "
                           f"{run.says()}", tables)
    if cls is not None and (module, cls) in others:
        return NOT_REACHABLE, f"{cls} is {others[(module, cls)]}, not what runs: {run.says()}", tables
    owner = k.runner_of_module(module)
    if owner is not None and owner != run.runner:
        return (NOT_REACHABLE, f"{module} is the {owner.upper()} model runner's code, which does not run: {run.says()}",
                "configs/vllm/runner.toml [paths]")
    if owner == run.runner:
        return (REACHABLE, f"{module} is the {owner.upper()} model runner's code, which runs: {run.says()} (dynspec "
                           "does not follow calls inside the runner)", "configs/vllm/runner.toml [paths]")
    return (UNKNOWN, f"{module} is neither model runner's code nor a proposer class of configs/vllm/: whether "
                     f"the {run.runner.upper()} runner calls it is not known", "")
