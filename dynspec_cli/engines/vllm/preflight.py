"""vLLM's preflight: before launch, which model runner and which proposer class the installed vllm
will run for the given `--speculative-config` and environment, whether the patch is on that path,
and which speculative_config keys this release ignores or rejects.

Facts come from inspector/ beside this file (stdlib only, run by the server's own python, never
importing vllm); conclusions from configs/vllm/ (VllmKnowledge). Verdicts and exit codes are
preflight's: reachable 0, dead 1, unknown 3; what every engine's preflight shares is
verdict/preflight.py."""
from __future__ import annotations

import json
import os
from typing import Any, Optional

import msgspec

from dynspec_cli import inject
from dynspec_cli.engines.vllm import hunks
from dynspec_cli.engines.vllm.knowledge import V2_ENV, VllmKnowledge, knowledge
from dynspec_cli.knowledge.features import Feature
from dynspec_cli.knowledge.findings import Finding
from dynspec_cli.verdict import acceptance
from dynspec_cli.verdict.codes import EXIT
from dynspec_cli.verdict.preflight import InputError, check_diff, decided, facts_of, judged, ordered
from dynspec_cli.verdict.result import where

INSPECTOR = "engines/vllm/inspector"  # the program run by the server's python (inject.program)


class SpecConfigError(InputError, ValueError):
    """--speculative-config is not a JSON object (one line, exit 2)."""


def server_settings(flags: list[str]) -> tuple[Optional[dict], dict]:
    """(--speculative-config as a dict or None, parallel settings) from a `vllm serve` argv tail."""
    spec, parallel = None, {}
    i = 0
    while i < len(flags):
        name, eq, val = flags[i].partition("=")
        norm = name.replace("_", "-")
        i += 1
        if norm not in ("--speculative-config", "--data-parallel-size", "-dp"):
            continue
        if not eq:
            if i >= len(flags):
                raise SpecConfigError(f"{name} needs a value")
            val, i = flags[i], i + 1
        if norm == "--speculative-config":
            try:
                spec = json.loads(val)
            except ValueError as e:
                raise SpecConfigError(f"--speculative-config is not valid JSON: {e}") from None
            if not isinstance(spec, dict):
                raise SpecConfigError("--speculative-config must be a JSON object")
        else:
            try:
                parallel["data_parallel_size"] = int(val)
            except ValueError:
                raise SpecConfigError(f"{name} expects an integer, got {val!r}") from None
    return spec, parallel


def custom_proposer_path(spec: Optional[dict]) -> Optional[str]:
    """The user's proposer class that --speculative-config names (vllm/config/speculative.py: method
    "custom_class" with the class path in "model", or no method and a "model" that is a dotted path)."""
    if not spec:
        return None
    model, method = spec.get("model"), spec.get("method")
    if not isinstance(model, str):
        return None
    if method == knowledge().custom_class.method:
        return model
    parts = model.split(".")
    dotted = (method is None and not model.startswith(("http://", "https://", "file://")) and "/" not in model
              and len(parts) >= 2 and all(p.isidentifier() for p in parts))
    return model if dotted else None


def inspect(host, python: str, feature: Feature, env: dict[str, str], *, vllm_path: Optional[str] = None,
            k: Optional[VllmKnowledge] = None, timeout: float = 60, dynamic: bool = False,
            flags: Optional[list[str]] = None, patch_diff: Optional[str] = None) -> dict[str, Any]:
    k = k or knowledge()
    classes = [{"module": p.module, "class": p.cls} for p in k.proposers]
    args = {"marker_literal": feature.marker.literal, "marker_pattern": feature.marker.pattern, "classes": classes,
            "env_names": [V2_ENV]}
    if feature.plugin is not None:
        fw = k.plugins
        args["plugin"] = {"entry_point": feature.plugin.entry_point, "group": fw.group, "allow_env": fw.allow_env,
                          "allow_strips": fw.allow_strips, "target": feature.plugin.target}
        args["env_names"] = [V2_ENV, fw.allow_env]
    custom = custom_proposer_path(server_settings(list(flags or []))[0])
    if custom:
        args["custom_class"] = {"path": custom, "framework_module": k.custom_class.module}
    if vllm_path:
        args["vllm_path"] = vllm_path
    if patch_diff is not None:  # each hunk mapped onto the installed files (the shared analysis)
        args["patch_diff"] = patch_diff
    if dynamic:
        args.update(dynamic=True, serve_flags=list(flags or []))
        timeout = max(timeout, 180)
    proc_env = {kk: v for kk, v in env.items() if v is not None}
    res = host.run_python(python, inject.program(INSPECTOR), [json.dumps(args)], env=proc_env or None,
                          timeout=timeout)
    return facts_of(res, python)


class Preflighting(msgspec.Struct):
    """One vLLM preflight in the making: the inspector's facts, the user's input, the result document
    (`out`) and the findings each step of STEPS adds. A step that settles the verdict sets `verdict`."""

    facts: dict[str, Any]
    feature: Feature
    spec: Optional[dict]  # --speculative-config
    env: dict[str, str]
    parallel: Optional[dict]
    k: VllmKnowledge
    out: dict[str, Any]
    version: Optional[str] = None
    verdict: Optional[str] = None
    findings: list[Finding] = msgspec.field(default_factory=list)
    pkg_hits: list[dict] = msgspec.field(default_factory=list)  # the marker in vllm's own files
    plugin_hits: list[dict] = msgspec.field(default_factory=list)  # ... in the plugin's code
    custom: Optional[dict] = None  # the custom proposer class, as the inspector found it
    choice: Any = None  # the runner (knowledge.RunnerChoice)
    # per scope of each hunk of --patch (None: no diff given); when its behaviour hunks decide, the
    # marker's DS601 (`marker_dead`, held back by step_proposer) does not
    hunk_entries: Optional[list[dict]] = None
    marker_dead: Optional[Finding] = None


def judge(facts: dict[str, Any], feature: Feature, spec: Optional[dict], env: dict[str, str],
          parallel: Optional[dict] = None, *, k: Optional[VllmKnowledge] = None) -> dict[str, Any]:
    vl = facts.get("vllm") or {}
    out: dict[str, Any] = {"engine": "vllm", "vllm": vl, "vllm_version": vl.get("version"), "runner": None,
                           "proposer": None, "patched": [], "patch_on_path": None, "knobs": []}
    p = Preflighting(facts, feature, spec, env, parallel, k or knowledge(), out, vl.get("version"))
    if not judged(p, STEPS):
        p.verdict = _decided(p.findings, "reachable" if out["patch_on_path"] else "unknown")
    if (facts.get("diff") or {}).get("given") and p.hunk_entries is None:  # (settled before the runner was known)
        p.hunk_entries = hunks.judge(facts["diff"], p.k, None, {}, None)
    # one entry per scope of each hunk of --patch (file, class, function, lines, role, reach, reason,
    # evidence: sglang's keys, read by run/patchfile.py and the reports); None when no diff was given
    out["hunks"] = p.hunk_entries
    return _result(p.verdict, out, p.findings)


def step_found(p: Preflighting) -> None:
    """The inspector ran and the server's python has vllm (DS608)."""
    vl = p.out["vllm"]
    if not p.facts.get("ok", False):
        p.findings.append(Finding("DS608", p.facts.get("error") or "the inspector could not run"))
        p.verdict = "unknown"
    elif not vl.get("found"):
        p.findings.append(Finding("DS608", f"{(p.facts.get('python') or {}).get('executable', 'this python')}: {vl.get('reason')}."))
        p.verdict = _decided(p.findings, "unknown")


def step_patch(p: Preflighting) -> None:
    """Where the patch is: the marker in vllm's files, in the plugin's code, in a custom proposer (DS609)."""
    facts, feature, out = p.facts, p.feature, p.out
    p.pkg_hits = (facts.get("marker") or {}).get("hits") or []
    out["patched"] = [{"file": h.get("file"), "line": h.get("line"), "class": h.get("class"), "function": h.get("function")}
                      for h in p.pkg_hits]
    p.custom = facts.get("custom_class")
    p.plugin_hits = plugin_findings(facts, feature, p.findings, out, p.k) if feature.plugin is not None else []
    if p.custom is not None:
        custom_findings(p.custom, p.version, p.findings, out)
    hits = p.pkg_hits + p.plugin_hits + ((p.custom or {}).get("marker_hits") or [])
    plugin_loaded = ((out.get("plugin") or {}).get("loaded") or {}).get("attr_found")
    if not hits and (feature.plugin is None or plugin_loaded):  # (a plugin never loaded has its own finding)
        where = out["vllm"].get("package_dir") if feature.plugin is None else "the plugin's module"
        p.findings.append(Finding("DS609", f"no {feature.marker.literal!r} in {where} ({(facts.get('marker') or {}).get('files_scanned')} files of vllm)."))


def step_release(p: Preflighting) -> None:
    """A release the tables know (DS606), a proposer configured (DS602), acceptance earned (DS114)."""
    k = p.k
    if not k.known(p.version):
        p.findings.append(Finding("DS606", f"vllm {p.version} is not in configs/vllm/releases.toml ({k.releases[0]} – {k.releases[-1]})."))
        p.verdict = _decided(p.findings, "unknown")
    elif p.spec is None:
        p.findings.append(Finding("DS602", "no --speculative-config: vLLM will run no proposer."))
        p.verdict = _decided(p.findings, "unknown")
    else:
        prov = acceptance.of("vllm", ["--speculative-config", json.dumps(p.spec)])
        if prov["provenance"] != "real":
            p.findings.append(Finding("DS114", f"acceptance will be {prov['provenance']}: {acceptance.describe(prov)}."))


def step_runner(p: Preflighting) -> None:
    """The model runner the release picks for this config and environment (Triton missing: V1, DS607);
    vLLM's own resolution when the dynamic route ran (its failure: DS304)."""
    from dynspec_cli.engines.vllm.knowledge import RunnerChoice

    k, version, facts, out = p.k, p.version, p.facts, p.out
    # the server's environment: the user's overrides over what the inspector saw
    eff_env = {kk: v for kk, v in (facts.get("env") or {}).items() if v is not None}
    eff_env.update({kk: v for kk, v in p.env.items() if v is not None})
    choice = k.runner(version, p.spec, eff_env)
    rng = k.runner_range(version)
    dyn = facts.get("dynamic")
    triton = (facts.get("triton") or {}).get("found")
    if choice.runner == "v2" and rng is not None and rng.selection == "auto" and V2_ENV not in eff_env and triton is False:
        w = "v2-needs-triton-lower" if rng.fallback_warning == "v2-unsupported-lower" else "v2-needs-triton"
        choice = RunnerChoice("v1", f"triton is not importable by this python: vllm {version} falls back to V1", warning=w)
        p.findings.append(Finding("DS607", choice.reason))
    if dyn:
        out["dynamic"] = dyn
        if dyn.get("ok") and isinstance(dyn.get("use_v2_model_runner"), bool):
            static = choice.runner
            r2 = "v2" if dyn["use_v2_model_runner"] else "v1"
            unsup = tuple(dyn.get("unsupported_v2") or ())
            choice = RunnerChoice(r2, "vLLM's own config resolution (EngineArgs.create_engine_config) chose "
                                  f"{r2.upper()}" + (f"; V2 does not support {', '.join(unsup)}" if unsup else ""),
                                  warning=(rng.fallback_warning if r2 == "v1" and unsup and rng else None), unsupported=unsup)
            out["dynamic"]["static_runner"] = static
            out["dynamic"]["static_agrees"] = static == r2
        elif not dyn.get("ok"):
            err = dyn.get("error") or {}
            p.findings.append(Finding("DS304", f"the dynamic route failed ({err.get('type')}: {str(err.get('message'))[:200]}); the static route decides."))
    out["runner"] = {"runner": choice.runner, "reason": choice.reason, "certain": choice.certain,
                     "log_line": k.line_by_id[choice.warning].text if choice.warning else None,
                     "unsupported": list(choice.unsupported)}
    p.choice = choice


def step_proposer(p: Preflighting) -> None:
    """The proposer class that runner builds for the method, and whether the patch is on its MRO (DS601)."""
    k, version, choice, out, custom = p.k, p.version, p.choice, p.out, p.custom
    method = p.spec.get("method")
    prop = k.proposer(version, choice.runner, method) if choice.runner and custom is None else None
    if custom is not None:
        out["proposer"] = {"class": custom.get("cls"), "module": custom.get("module_file"), "file": custom.get("module_file"),
                           "line": custom.get("line"), "mro": [custom.get("cls")] + list(custom.get("bases") or []),
                           "custom_class": custom.get("path")}
        out["patch_on_path"] = bool(custom.get("marker_hits")) and not custom.get("missing")
    elif prop is not None:
        entry = (p.facts.get("classes") or {}).get(f"{prop.module}:{prop.cls}") or {}
        out["proposer"] = {"class": prop.cls, "module": prop.module, "file": entry.get("file"), "line": entry.get("line"),
                           "mro": [m["class"] for m in entry.get("mro") or []]}
        on_path = [h for h in p.pkg_hits if any(h.get("file") == m["module"] and h.get("class") == m["class"]
                                               for m in (entry.get("mro") or [{"module": prop.module, "class": prop.cls}]))]
        out["patch_on_path"] = bool(on_path)
        if p.pkg_hits and not on_path:  # (step_hunks adds it unless the diff's behaviour hunks decide)
            p.marker_dead = _dead_runner(p, prop, method)
    elif choice.runner:
        p.findings.append(Finding("DS304", f"no table row for method {method!r} on the {choice.runner.upper()} runner of vllm {version}."))
    if p.feature.plugin is not None:
        out["patch_on_path"] = plugin_on_path(p.facts, out, p.findings, version, choice.runner) and bool(p.plugin_hits)


def _dead_runner(p: Preflighting, prop, method) -> Finding:
    """DS601: the patch is not in the class the chosen runner builds; the fix: the setting that runs
    the patched runner, or the class to port the patch to."""
    k, version, choice = p.k, p.version, p.choice
    other = k.proposer(version, "v2" if choice.runner == "v1" else "v1", method)
    where = ", ".join(f"{h['file']}:{h['line']} ({h.get('class') or 'module level'})" for h in p.pkg_hits)
    fix = None
    if choice.unsupported:
        fix = (f"V2 does not support {', '.join(choice.unsupported)} on vllm {version}: drop it to run V2, or port "
               f"the patch to {prop.cls} ({prop.module}).")
    elif other is not None and any(h.get("file") == other.module for h in p.pkg_hits):
        v2 = k.runner_of_module(other.module) == "v2"
        fix = (f"Set {V2_ENV}={'1' if v2 else '0'} to run the "
               f"{'V2' if v2 else 'V1'} runner, or port the patch to {prop.cls} ({prop.module}).")
    return Finding("DS601", f"vllm {version} will run the {choice.runner.upper()} model runner and {prop.cls} "
                            f"({prop.module}); the patch is in {where}: dead code. {choice.reason}.", fix=fix)


def step_knobs(p: Preflighting) -> None:
    """speculative_config keys this release ignores or rejects (DS603), or notes on them (DS604)."""
    for issue in p.k.knob_issues(p.version, p.spec, p.parallel):
        p.out["knobs"].append({"key": issue.key, "status": issue.status, "note": issue.note})
        if issue.status in ("dead", "rejected"):
            p.findings.append(Finding("DS603", f"speculative_config.{issue.key} on vllm {p.version}: {issue.status}. {issue.note}"))
        else:
            p.findings.append(Finding("DS604", f"speculative_config.{issue.key}: {issue.note}"))


def step_hunks(p: Preflighting) -> None:
    """The diff's behaviour hunks decide, not the class that logs the marker: none of them runs
    (DS618, dead), their reach is not known (DS620), or they run while the announcement cannot
    (DS619, a warning); without a behaviour hunk, the marker's DS601 stands."""
    diff = p.facts.get("diff") or {}
    if diff.get("given"):
        p.hunk_entries = hunks.judge(diff, p.k, running(p), p.facts.get("classes") or {}, _site(p.out))
    reach = hunks.summary(p.hunk_entries) if p.hunk_entries is not None else None
    if reach is None:
        if p.marker_dead is not None:
            p.findings.append(p.marker_dead)
        return
    run = running(p)
    behaviour = [e for e in p.hunk_entries if hunks.is_behaviour(e)]
    p.out["patch_on_path"] = {hunks.REACHABLE: True, hunks.NOT_REACHABLE: False}.get(reach)
    if reach == hunks.NOT_REACHABLE:
        p.findings.append(Finding(
            "DS618", "no hunk of the patch that acts can run: " + "; ".join(f"{where(e)}: {e['reason']}" for e in behaviour) + ".",
            fix=f"Put the behaviour in {run.proposer or 'the code'} of the {(run.runner or '?').upper()} runner, "
                "or change the settings (the runner's env var, the speculative method) so that the patched code runs."))
    elif reach == hunks.UNKNOWN:
        p.findings.append(Finding("DS620", "whether the patch's behaviour runs is not known: " + "; ".join(
            f"{where(e)}: {e['reason']}" for e in behaviour if e["reach"] == hunks.UNKNOWN) + "."))
    else:  # the behaviour runs; does the announcement?
        marks = [e for e in p.hunk_entries if e["marker"]]
        if marks and not any(m["reach"] == hunks.REACHABLE for m in marks):
            runs = next(e for e in behaviour if e["reach"] == hunks.REACHABLE)
            p.findings.append(Finding("DS619", f"the patch's behaviour runs ({where(runs)}) but its announcement "
                                               f"{p.feature.marker.literal!r} will be silent: "
                                               + "; ".join(f"{where(m)}: {m['reason']}" for m in marks) + "."))


def running(p: Preflighting) -> Optional[hunks.Running]:
    """What will run, for the hunks: the chosen runner and the proposer class with its static MRO."""
    if p.choice is None or p.version is None:
        return None
    prop = p.out.get("proposer") or {}
    entry = (p.facts.get("classes") or {}).get(f"{prop.get('module')}:{prop.get('class')}") or {}
    mro = [(m["module"], m["class"]) for m in entry.get("mro") or []]
    if not mro and prop.get("class") and prop.get("module"):
        mro = [(prop["module"], prop["class"])]
    return hunks.Running(p.version, p.choice.runner, p.choice.reason, (p.spec or {}).get("method"), prop.get("class"), mro)


def _site(out: dict) -> Optional[str]:
    pkg = (out.get("vllm") or {}).get("package_dir")
    return os.path.dirname(pkg) if pkg else None


STEPS = (step_found, step_patch, step_release, step_runner, step_proposer, step_hunks, step_knobs)


def plugin_findings(facts: dict[str, Any], feature: Feature, findings: list[Finding], out: dict[str, Any],
                    k: VllmKnowledge) -> list[dict]:
    """A patch shipped as a vLLM general plugin: discovered, allowed, loadable, its target present.
    Returns the marker hits in the plugin code vLLM will run."""
    p, fw = feature.plugin, k.plugins
    pl = facts.get("plugin") or {}
    cands = pl.get("candidates") or []
    loaded = cands[pl["loaded"]] if pl.get("loaded") is not None else None
    out["plugin"] = {"entry_point": p.entry_point, "group": fw.group, "target": p.target, "loaded": loaded,
                     "candidates": len(cands), "shadowed": pl.get("shadowed") or [], "allow": pl.get("allow"),
                     "target_found": pl.get("target"), "processes": list(p.processes)}
    if pl.get("error"):
        findings.append(Finding("DS613", f"the entry points of the server's python cannot be read ({pl['error']}): "
                                         "vLLM's entry_points() raises the same at start-up."))
        return []
    if loaded is None:
        others = pl.get("other_names") or []
        findings.append(Finding("DS610", f"no distribution on the server's sys.path declares entry point {p.entry_point!r} in "
                                         f"group {fw.group!r}" + (f" (it has: {', '.join(others)})" if others else "") + ": "
                                         "vLLM never loads it, and says nothing."))
        return []
    where = f"{loaded.get('distribution')} {loaded.get('version')} ({loaded.get('metadata')})"
    if len(cands) > 1:
        rest = ", ".join(f"{c.get('distribution')} {c.get('version')} ({c.get('metadata')})" for c in cands[:-1])
        findings.append(Finding("DS612", f"{len(cands)} distributions declare entry point {p.entry_point!r}: vLLM keeps the "
                                         f"last it discovers, {where}; not {rest}."))
    for sh in pl.get("shadowed") or []:
        findings.append(Finding("DS612", f"a second {sh.get('distribution')} {sh.get('version')} ({sh.get('metadata')}) also "
                                         f"declares {p.entry_point!r}; it is shadowed by {where}, earlier on sys.path."))
    if p.distribution and loaded.get("distribution") != p.distribution:
        findings.append(Finding("DS612", f"entry point {p.entry_point!r} comes from {where}, not from {p.distribution}."))
    if not loaded.get("module_file"):
        findings.append(Finding("DS613", f"the entry point vLLM loads, {loaded.get('value')} from {where}, names module "
                                         f"{loaded.get('module')}, which is not on the server's sys.path: vLLM logs "
                                         f"'{fw.failed_line.format(name=p.entry_point)}' and starts without it."))
    elif not loaded.get("attr_found"):
        findings.append(Finding("DS613", f"the entry point vLLM loads, {loaded.get('value')} from {where}: "
                                         f"{loaded.get('module_file')} defines no {loaded.get('attr')}: vLLM logs "
                                         f"'{fw.failed_line.format(name=p.entry_point)}' and starts without it."))
    allow = pl.get("allow") or {}
    if not allow.get("allowed", True):
        names = [n for n in allow.get("names") or [] if n]
        near = [n for n in names if n.strip() == p.entry_point]
        why = (f" ({', '.join(map(repr, near))} is not {p.entry_point!r}: vLLM splits {fw.allow_env} on commas and does "
               "not strip blanks)") if near else ""
        findings.append(Finding("DS611", f"{fw.allow_env}={allow.get('value')!r} does not list {p.entry_point!r}{why}: vLLM "
                                         "skips the plugin in every process, silently.",
                                fix=f"export {fw.allow_env}={','.join([n.strip() for n in names if n.strip() != p.entry_point] + [p.entry_point])} "
                                    f"(or unset {fw.allow_env})."))
    t = pl.get("target") or {}
    if t.get("missing"):
        findings.append(Finding("DS614", f"{p.target}: {t['missing']} (vllm {(facts.get('vllm') or {}).get('version')}): "
                                         "the plugin has nothing to patch in this release.", file=t.get("module_file")))
    return [{"file": h.get("file"), "line": h.get("line"), "class": h.get("class"), "function": h.get("function")}
            for h in loaded.get("marker_hits") or []] if loaded.get("attr_found") else []


def plugin_on_path(facts: dict[str, Any], out: dict[str, Any], findings: list[Finding], version, runner) -> bool:
    """Whether what the plugin patches is what runs: a target that is a proposer class the chosen
    runner does not use (or a base of it) is dead code, as a patch in the wrong file is."""
    t = (facts.get("plugin") or {}).get("target") or {}
    if t.get("missing") or not t.get("module"):
        return False
    cls = t.get("class")
    prop = out.get("proposer") or {}
    if not cls or not prop:
        return True
    module = t["module"].replace(".", "/") + ".py"
    known = {(p.module, p.cls) for p in knowledge().proposers}
    mro = prop.get("mro") or []
    if (module, cls) in known and cls not in mro:
        findings.append(Finding("DS601", f"the plugin patches {cls} ({module}), but vllm {version} will run the "
                                         f"{(runner or '?').upper()} runner's {prop.get('class')} ({prop.get('module')}): "
                                         "its patch is dead code.",
                                fix=f"Point the plugin at {prop.get('class')} ({prop.get('module')}), or change the "
                                    "settings so that vLLM runs the class it patches."))
        return False
    return True


def custom_findings(custom: dict[str, Any], version, findings: list[Finding], out: dict[str, Any]) -> None:
    """The user's proposer class (--speculative-config method custom_class), as vLLM will load it."""
    cc = knowledge().custom_class
    path = custom.get("path")
    if not custom.get("framework"):
        findings.append(Finding("DS615", f"vllm {version} has no {cc.module}: --speculative-config names proposer class "
                                         f"{path!r} (method {cc.method}), which this release cannot load."))
        return
    if custom.get("missing"):
        findings.append(Finding("DS615", f"custom proposer {path!r}: {custom['missing']}: vLLM raises at start-up "
                                         "('Cannot import module' / 'has no attribute').", file=custom.get("module_file")))
        return
    methods = custom.get("methods") or {}
    outside = custom.get("bases_outside")
    for name in cc.required_methods:
        if name not in methods and not outside:
            findings.append(Finding("DS615", f"custom proposer {path!r} ({custom.get('module_file')}:{custom.get('line')}) "
                                             f"defines no {name}() (nor does a base in its module): vLLM raises "
                                             f"\"must have a '{name}' method\" at start-up.", file=custom.get("module_file")))
    init = methods.get("__init__")
    if init and not init.get("varargs") and init.get("args", 0) < 2:
        findings.append(Finding("DS615", f"custom proposer {path!r}: {init.get('class')}.__init__ (line {init.get('line')}) "
                                         "takes no vllm_config: vLLM calls user_class(vllm_config) and fails to start.",
                                file=custom.get("module_file")))
    if not any(h.get("class") == custom.get("cls") or h.get("class") in {m.get("class") for m in methods.values()}
               for h in custom.get("marker_hits") or []):
        findings.append(Finding("DS609", f"the marker is not in proposer {path!r} ({custom.get('module_file')}): the "
                                         "patched code is elsewhere."))


_decided = decided  # (configs/findings.toml's policy: a dead finding makes it dead)


def _result(verdict: str, out: dict, findings: list[Finding]) -> dict[str, Any]:
    ordered(findings)
    out.update(verdict=verdict, exit_code=EXIT[verdict],
               findings=[{"code": f.code, "name": f.name, "severity": f.severity, "message": f.message, "fix": f.fix}
                         for f in findings])
    return out


def run(host, python: str, feature: Feature, flags: list[str], env: dict[str, str], *,
        vllm_path: Optional[str] = None, dynamic: bool = False, patch_diff: Optional[str] = None) -> dict[str, Any]:
    spec, parallel = server_settings(flags)
    facts = inspect(host, python, feature, env, vllm_path=vllm_path, dynamic=dynamic, flags=flags, patch_diff=patch_diff)
    vl = facts.get("vllm") or {}
    # a --patch that does not describe this install: one line, exit 2, as for every engine
    check_diff(facts.get("diff") or {}, "vllm", vl.get("version"), vl.get("package_dir"), plugin=feature.plugin is not None)
    return judge(facts, feature, spec, env, parallel)


def render(result: dict[str, Any]) -> str:
    """The plain-text report (no rich: the gate stays fast)."""
    lines = [f"vllm preflight: {result['verdict'].upper()} (exit {result['exit_code']})",
             f"  vllm {result.get('vllm_version') or '?'} at {(result.get('vllm') or {}).get('package_dir') or '?'}"]
    r = result.get("runner") or {}
    if r:
        lines.append(f"  runner: {(r.get('runner') or '?').upper()} — {r.get('reason')}")
    p = result.get("proposer") or {}
    if p:
        lines.append(f"  proposer: {p['class']} ({p['module']})")
    pl = result.get("plugin") or {}
    if pl:
        got = pl.get("loaded") or {}
        lines.append(f"  plugin: {pl['entry_point']} ({pl['group']}) -> " + (
            f"{got.get('value')} from {got.get('distribution')} {got.get('version')} ({got.get('metadata')})" if got
            else "not discovered") + f"; patches {pl['target']}")
    for h in result.get("patched") or []:
        lines.append(f"  patch: {h['file']}:{h['line']} {h.get('class') or ''}.{h.get('function') or ''}")
    if result.get("hunks"):
        lines.append(f"  hunks of --patch: {len(result['hunks'])} (the behaviour hunks decide; the marker's only announces)")
        for e in result["hunks"]:
            lines.append(f"    {e['reach']:13} {where(e)} {e['role']}")
            lines.append(f"                  {e['reason']}")
    for f in result.get("findings") or []:
        lines.append(f"  {f['severity'].upper():7} {f['code']} {f['message']}")
        if f.get("fix") and f["severity"] != "info":
            lines.append(f"          fix: {f['fix']}")
    return "\n".join(lines)
