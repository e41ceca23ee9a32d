"""Preflight for a patch delivered as a plugin: from the inspector's `plugin` facts (run by the
server's python), whether the engine will discover, allow, load and apply it, and in which
processes. Whether the hooked class is on the worker path is the worker analysis' (preflight.py):
`target_classes` hands it the class and method the hook is on."""
from __future__ import annotations

import re
from typing import Any, Optional

from dynspec_cli.knowledge.features import Feature
from dynspec_cli.knowledge.findings import Finding
from dynspec_cli.engines.sglang.knowledge import Knowledge


def inspector_input(feature: Feature, k: Knowledge) -> Optional[dict[str, Any]]:
    """What the inspector needs to look (the newest framework row: the inspector says whether the
    installed release has the framework at all)."""
    p = feature.plugin
    if p is None:
        return None
    fw = k.plugins.framework[-1]
    return {"entry_point": p.entry_point, "group": fw.group, "allow_env": fw.allow_env,
            "platform_group": fw.platform_group, "platform_env": fw.platform_env, "target": p.target,
            "framework_module": fw.module,
            "processes": [{"name": x.name, "module": x.module, "function": x.function} for x in k.plugins.process]}


def env_vars(k: Knowledge) -> list[str]:
    fw = k.plugins.framework[-1]
    return [n for n in (fw.allow_env, fw.platform_env) if n]


def _where(c: dict) -> str:
    return f"{c.get('distribution')} {c.get('version')} ({c.get('metadata')})"


def findings(facts: dict[str, Any], feature: Feature, version: Optional[str], k: Knowledge) -> tuple[list[Finding], list[dict]]:
    """(findings, where the patch is: the marker hits in the code sglang will load)."""
    p = feature.plugin
    pl = facts.get("plugin") or {}
    out: list[Finding] = []
    fw = k.plugin_framework(version)
    if not (pl.get("framework") or {}).get("file") or fw is None:
        out.append(Finding("DS212", f"sglang {version} has no {k.plugins.framework[-1].module} (plugins start in 0.5.11): "
                                    f"entry point {p.entry_point!r} is never loaded."))
        return out, []
    disc = pl.get("discovery") or {}
    cands = disc.get("candidates") or []
    loaded = cands[disc["loaded"]] if disc.get("loaded") is not None else None
    if disc.get("engine_error"):
        bad = "; ".join(f"{u.get('metadata')}: {u.get('error')}" for u in disc.get("unreadable") or [])
        out.append(Finding("DS220", f"importlib.metadata.entry_points() raises in the server's python "
                                    f"({disc['engine_error']}){' reading ' + bad if bad else ''}: load_plugins() "
                                    "raises at start-up and the server does not start."))
        return out, []
    if loaded is None:
        others = disc.get("other_names") or []
        out.append(Finding("DS213", f"no distribution on the server's sys.path declares entry point {p.entry_point!r} in group "
                                    f"{fw.group!r}" + (f" (it has: {', '.join(others)})" if others else "") + "."))
        return out, []
    if p.distribution and loaded.get("distribution") != p.distribution:
        out.append(Finding("DS216", f"entry point {p.entry_point!r} comes from {_where(loaded)}, not from {p.distribution}."))
    if len(cands) > 1:
        rest = [c for c in cands if c is not loaded]
        out.append(Finding("DS215", f"{len(cands)} declare entry point {p.entry_point!r}: sglang loads {_where(loaded)}; "
                                    "not " + ", ".join(_where(c) for c in rest) + "."))
    if not loaded.get("module_file"):
        out.append(Finding("DS216", f"the entry point sglang loads, {loaded.get('value')} from {_where(loaded)}, names module "
                                    f"{loaded.get('module')}, which is not on the server's sys.path: ep.load() fails "
                                    "('Failed to load plugin') and the server starts without it."))
    elif not loaded.get("attr_found"):
        out.append(Finding("DS216", f"the entry point sglang loads, {loaded.get('value')} from {_where(loaded)}: "
                                    f"{loaded.get('module_file')} defines no {loaded.get('attr')}."))
    elif not loaded.get("marker_hits"):
        out.append(Finding("DS216", f"the plugin code sglang loads ({loaded.get('module_file')}, from {_where(loaded)}) does not hold "
                                    f"{feature.marker.literal!r}."))
    allow = pl.get("allow") or {}
    if not allow.get("allowed", True):
        out.append(Finding("DS214", f"{allow.get('env')}={allow.get('value')} does not list {p.entry_point!r}: sglang logs "
                                    f"'{fw.skipped_line.format(name=p.entry_point)}'.",
                           fix=f"export {allow.get('env')}={','.join([*(allow.get('names') or []), p.entry_point])} "
                               f"(or unset {allow.get('env')})."))
    plat = allow.get("platform") or {}
    if plat.get("excluded"):
        out.append(Finding("DS214", f"{plat.get('env')}={plat.get('value')} selects another platform: the general plugins of "
                                    f"{loaded.get('distribution')} (a platform package) are skipped."))
    t = pl.get("target") or {}
    if t.get("missing"):
        out.append(Finding("DS217", f"{p.target}: {t['missing']} (sglang {version}).",
                           file=t.get("module_file")))
    elif t.get("kind") == "class" and p.hook != "replace":
        out.append(Finding("DS218", f"{p.target} is a class: a {p.hook.upper()} hook on it raises TypeError in apply_hooks "
                                    "('Failed to apply hooks'); only REPLACE can target a class."))
    for proc in pl.get("processes") or []:
        if proc.get("name") in p.processes and proc.get("loads") is False:
            where = f"{proc.get('file')}:{proc.get('line')}"
            out.append(Finding("DS219", f"the {proc['name']} process never loads plugins in sglang {version}: "
                                        f"{proc.get('function') or 'the module'} ({where}) does not call load_plugins().",
                               file=proc.get("file")))
    patched = [{"file": h.get("file"), "class": None, "function": h.get("function"), "line": h.get("line"), "bases": None}
               for h in loaded.get("marker_hits") or []]
    return out, patched


def target_classes(facts: dict[str, Any], k: Knowledge) -> tuple[list[str], dict[str, str]]:
    """The speculative worker class the hook is on (and its method), when it is one dynspec's
    tables know: the worker analysis then says whether the running worker reaches it."""
    t = (facts.get("plugin") or {}).get("target") or {}
    cls = t.get("class")
    if not cls or t.get("missing") or not k.class_mask(cls):
        return [], {}
    return [cls], ({cls: t["attr"]} if t.get("attr") else {})


def summary(facts: dict[str, Any], feature: Feature) -> dict[str, Any]:
    """The plugin's facts in the report's words: which distribution, which target, which processes load it."""
    p, pl = feature.plugin, facts.get("plugin") or {}
    disc = pl.get("discovery") or {}
    cands = disc.get("candidates") or []
    loaded = cands[disc["loaded"]] if disc.get("loaded") is not None else None
    procs = ", ".join(f"{x['name']} {'yes' if x.get('loads') else 'no' if x.get('loads') is False else '?'}"
                      f" ({str(x.get('file') or '').rsplit('/sglang/', 1)[-1]}:{x.get('line')})"
                      for x in pl.get("processes") or [] if x.get("name") in p.processes)
    return {"entry_point": p.entry_point, "group": pl.get("group"), "hook": p.hook, "target": p.target,
            "target_kind": (pl.get("target") or {}).get("kind"), "loaded": _where(loaded) if loaded else None,
            "distribution": loaded, "candidates": len(cands), "allow": pl.get("allow"), "processes": procs,
            "process_loads": pl.get("processes")}


def check_plugin(feature: Feature) -> None:
    """The feature's [plugin] section against what sglang's plugin framework can do
    (configs/sglang/plugins.toml); ConfigError naming the feature file. The hook type is lowered."""
    from dynspec_cli.engines.sglang.knowledge import knowledge
    from dynspec_cli.knowledge.tables import ConfigError

    p = feature.plugin
    k = knowledge()
    fw = k.plugins.framework[-1]

    def bad(message: str) -> ConfigError:
        return ConfigError(f"{feature.source or feature.name}: {message}")

    if not re.fullmatch(r"[^\s,]+", p.entry_point):
        # sglang splits SGLANG_PLUGINS on commas and strips blanks: such a name could never be allowed
        raise bad(f"plugin.entry_point {p.entry_point!r}: must be one name, without blanks or commas")
    parts = p.target.split(".")
    if len(parts) < 2 or not all(x.isidentifier() for x in parts):
        raise bad(f"plugin.target {p.target!r}: must be a dotted path module.attribute "
                  "(e.g. sglang.srt.speculative.eagle_worker_v2.EAGLEWorkerV2.__init__)")
    if parts[0] != "sglang":
        raise bad(f"plugin.target {p.target!r}: must be inside the sglang package (start with 'sglang.')")
    if p.hook.lower() not in fw.hook_types:
        raise bad(f"plugin.hook {p.hook!r}: must be one of {', '.join(fw.hook_types)}")
    p.hook = p.hook.lower()
    names = [x.name for x in k.plugins.process]
    if not p.processes:
        raise bad(f"plugin.processes is empty: name at least one of {', '.join(names)}")
    for name in p.processes:
        if name not in names:
            raise bad(f"plugin.processes: unknown process {name!r}: choose from {', '.join(names)}")
