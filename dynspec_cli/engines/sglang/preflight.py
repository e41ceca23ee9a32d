"""Preflight: before launch, from the installed sglang, the env and the flags, which worker
class will run and whether the patched code is on its path.

Facts come from the inspector (dynspec_cli/inject/inspector/, run by the server's own python
on the target host); conclusions come from the knowledge tables (static route) and, when the
inspector could import sglang, from sglang's own argument resolution (dynamic route)."""
from __future__ import annotations

import json
from typing import Any, Optional

from dynspec_cli import inject
from dynspec_cli.evidence.argv import flag_values
from dynspec_cli.verdict import acceptance
from dynspec_cli.knowledge.features import Feature
from dynspec_cli.knowledge.findings import Finding, forced_verdict
from dynspec_cli.knowledge.sglang import V2_SWITCH_ENV, Knowledge, knowledge
from dynspec_cli.verdict import compute_path, flagvalues, hunks, plugins, support, workers
from dynspec_cli.verdict.codes import EXIT


class InterpreterError(Exception):
    """The `python` preflight was given cannot be run on the host (bad input: one line, exit 2)."""


class PatchError(Exception):
    """The `--patch` diff does not describe the installed engine (bad input: one line, exit 2)."""


def inspect(host, python: str, feature: Feature, flags: list[str], env: dict[str, str], *,
            patch_diff: Optional[str] = None, dynamic: bool = False, sglang_path: Optional[str] = None,
            timeout: float = 120) -> dict[str, Any]:
    args = {"marker_literal": feature.marker.literal, "marker_pattern": feature.marker.pattern,
            "flag": feature.flag.name if feature.flag else None, "flags": flags, "env": env, "dynamic": dynamic,
            "env_vars": knowledge().env_switches}
    if feature.plugin is not None:  # the plugin's entry point, allow-list and target are looked up too
        args["plugin"] = plugins.inspector_input(feature, knowledge())
        args["env_vars"] = [*args["env_vars"], *plugins.env_vars(knowledge())]
    if patch_diff is not None:
        args["patch_diff"] = patch_diff
    if sglang_path:
        args["sglang_path"] = sglang_path
    # the inspector runs with the server's own environment (PYTHONPATH, venv variables, ...); that
    # env, the program and its input all go on stdin: values like HF_TOKEN stay off command lines
    proc_env = {k: v for k, v in env.items() if v is not None}
    payload = inject.stdin(inject.program("inspector"), json.dumps(args).encode("utf-8"), proc_env)
    res = host.run(inject.command(python), input=payload, timeout=timeout)
    if not res.stdout and res.exit_code in (126, 127):  # sh's exec: not found / not executable
        err = res.stderr.decode("utf-8", "replace").strip().splitlines()
        raise InterpreterError(f"{python} on {host.name}: " + ("no such interpreter" if res.exit_code == 127 else
                               "not an executable interpreter") + (f" ({err[-1]})" if err else ""))
    try:
        return json.loads(res.stdout)
    except ValueError:
        err = res.stderr.decode("utf-8", "replace").strip().splitlines()
        return {"ok": False, "error": f"{python} did not run the inspector: {err[-1] if err else f'exit {res.exit_code}'}"}


def judge(facts: dict[str, Any], feature: Feature, flags: list[str], env: dict[str, str], *,
          patched: Optional[list[str]] = None, k: Optional[Knowledge] = None,
          base: str = "the host's environment", exportable: bool = False) -> dict[str, Any]:
    """`env` holds dynspec's overrides (profile [env], --env); what the server really gets is
    `base` (where the host's processes get their environment, in words) with them applied, as the
    inspector saw it (`environ`). `exportable`: an `export` in this shell reaches the server."""
    k = k or knowledge()
    env, environment = _environment(facts, env, base)
    result = _judge(facts, feature, flags, env, patched, k, _EnvFix(environment, exportable))
    result["environment"] = environment
    if feature.plugin is not None:
        result["plugin"] = plugins.summary(facts, feature)
    return result


def _environment(facts: dict[str, Any], overrides: dict[str, str], base: str) -> tuple[dict[str, str], dict]:
    """The server's environment for the switches the tables read, and where each value came from."""
    seen = facts.get("environ")
    env = {n: v for n, v in overrides.items() if v is not None}
    if not isinstance(seen, dict):  # (an inspector that did not look: the overrides are all we know)
        seen = {n: v for n, v in env.items() if n in knowledge().env_switches}
    for n, v in seen.items():
        if v is None:
            env.pop(n, None)
        else:
            env[n] = v
    names = {n: {"value": v, "from": None if v is None else "--env/[env]" if n in overrides else base}
             for n, v in sorted(seen.items())}
    return env, {"base": base, "overrides": sorted(overrides), "vars": names}


class _EnvFix:
    """A fix step for an environment variable that, done literally, reaches the server."""

    def __init__(self, environment: dict, exportable: bool):
        self.overridden, self.exportable = set(environment["overrides"]), exportable

    def __call__(self, name: str, on: bool) -> str:
        if self.exportable and name not in self.overridden:
            return f"export {name}=True" if on else f"unset {name}"
        return f"pass --env {name}={'True' if on else 'False'}"


def _judge(facts, feature, flags, env, patched, k, env_fix) -> dict[str, Any]:
    findings: list[Finding] = []
    sg = facts.get("sglang") or {}
    version = sg.get("version")
    worker = {"class": None, "module": None, "file": None, "basis": None, "mro": None}
    patched_out: list[dict] = []
    overlap = None
    diff = facts.get("diff") or {}
    hunk_entries: Optional[list[dict]] = None  # per scope of each hunk of --patch (None: no diff given)
    running_path: Optional[hunks.Running] = None
    path = None
    if not facts.get("ok", False) and not sg.get("found"):
        findings.append(Finding("DS210", facts.get("error") or "the inspector could not run"))
        return _result("unknown" if not sg else "dead", facts, version, worker, patched_out, overlap, findings)
    if not sg.get("found"):
        findings.append(Finding("DS210", f"{(facts.get('python') or {}).get('executable', 'this python')} cannot import sglang."))
        return _result(forced_verdict(findings, "preflight") or "unknown", facts, version, worker, patched_out, overlap,
                       findings)
    # Where the patch is.
    for h in (facts.get("marker") or {}).get("hits", []):
        patched_out.append({"file": h.get("file"), "class": h.get("class"), "function": h.get("function"),
                            "line": h.get("line"), "bases": h.get("bases")})
    other = (facts.get("marker") or {}).get("hits_in_other_installs") or []
    hooked, hooked_methods = [], {}
    if feature.plugin is not None:  # the patch is the plugin's code, not sglang's files
        found, patched_out = plugins.findings(facts, feature, version, k)
        findings += found
        hooked, hooked_methods = plugins.target_classes(facts, k)
    elif not patched_out and other:
        findings.append(Finding("DS208", f"the marker is in {other[0].get('file')}, not under {sg.get('package_dir')}."))
    elif not patched_out and not (facts.get("diff") or {}).get("given"):
        findings.append(Finding("DS204", f"no file under {sg.get('package_dir')}/srt holds {feature.marker.literal!r}."))
    for f in facts.get("files") or []:
        if f.get("syntax_error"):
            se = f["syntax_error"]
            findings.append(Finding("DS205", f"{f.get('file')}:{se.get('line')}: {se.get('message') or se.get('msg')}"))
        if f.get("stale_code_runs"):  # a stale timestamp pyc is just recompiled; a checked-hash one runs
            findings.append(Finding("DS207", f"{f.get('file')}: its cached bytecode does not match the source and is what runs"))
    if sg.get("multiple_installs"):
        dirs = [i.get("package_dir") for i in sg.get("installs", [])]
        findings.append(Finding("DS206", "importable sglang installs: " + ", ".join(map(str, dirs))))
    # Flags.
    fl = facts.get("flags") or {}
    ff = fl.get("feature_flag") or {}
    if feature.flag and ff and not ff.get("defined", True):  # (argparse would also accept a prefix of another flag)
        findings.append(Finding("DS101", f"{feature.flag.name} is not defined by sglang {version} at {sg.get('package_dir')}: server_args.py was not patched."))
    for uf in fl.get("user_flags") or []:
        if not uf.get("accepted", True) and uf.get("flag") != (feature.flag.name if feature.flag else None):
            findings.append(Finding("DS109", f"{uf.get('flag')} is not a flag of sglang {version}."))
    for message in flagvalues.invalid(flags, fl.get("user_flags") or [], version):
        findings.append(Finding("DS110", message))
    # Which worker, by the tables (static route).
    fv = flag_values(flags)
    classes = list(patched or hooked or feature.runs_in)
    if not classes:
        classes = [p["class"] for p in patched_out if p.get("class")] or [p.cls for p in feature.patch]
    classes = list(dict.fromkeys(classes))
    algo = k.canonical_algorithm(fv.get("--speculative-algorithm")) if isinstance(fv.get("--speculative-algorithm"), str) else None
    if version and not k.known(version):
        findings.append(Finding("DS307", f"sglang {version} is not in dynspec's tables ({k.releases[0]} – {k.releases[-1]})."))
    elif version and algo is None:
        findings.append(Finding("DS102", "no --speculative-algorithm: speculative decoding is off, no speculative worker runs."))
    elif version and algo:
        draft = facts.get("draft") or {}
        hit = k.draft_mismatch(version, algo, draft.get("architectures") or []) if draft.get("found") else None
        if hit is not None:
            row, arch = hit
            findings.append(Finding("DS113", f"--speculative-algorithm {fv.get('--speculative-algorithm')} with a draft "
                                             f"whose config.json architecture is {arch} ({draft.get('config')}), made "
                                             f"for {row.expected}: sglang loads it without a word and accepts nothing.",
                                    file=draft.get("config"), params={"expected": row.expected}))
        prov = acceptance.of("sglang", flags)
        if prov["provenance"] != "real":
            findings.append(Finding("DS114", f"acceptance will be {prov['provenance']}: {acceptance.describe(prov)}."))
        topk = _int(fv.get("--speculative-eagle-topk"))
        user_disable = bool(fv.get("--disable-overlap-schedule"))
        env_eff = dict(env)
        sw_flags = {f for f, v in fv.items() if v is True}
        out = k.resolve_overlap(version, algo, env=env_eff, flags=sw_flags, user_disable=user_disable,
                                topk=topk, device=fv.get("--device") if isinstance(fv.get("--device"), str) else None)
        overlap = out.overlap
        rng = k.overlap_range(version)
        if out.error:
            findings.append(Finding("DS107" if "topk" in out.error else "DS111",
                                    f"sglang {version} will raise at start-up: {out.error}"))
        if rng is not None and V2_SWITCH_ENV in env and rng.switch.kind in ("removed", "ignored"):
            findings.append(Finding("DS104", f"{V2_SWITCH_ENV}={env[V2_SWITCH_ENV]} does nothing on sglang {version}."))
        if rng is not None and rng.switch.overrides_user_disable and user_disable and out.switch_value and overlap:
            findings.append(Finding("DS105", f"on sglang {version} {V2_SWITCH_ENV}=True turns the overlap scheduler back on."))
        if out.reason and "topk" in out.reason:
            findings.append(Finding("DS106", f"sglang {version} falls back to the V1 worker: {out.reason}."))
        multi = bool(fv.get("--enable-multi-layer-eagle"))
        choice = k.worker(version, algo, bool(overlap), multi) if overlap is not None else None
        if choice is not None and choice.cls:
            mro = k.mro(version, choice.cls)
            file = f"{sg.get('package_dir')}/srt/speculative/{choice.module.replace('.', '/')}.py"
            worker = {"class": choice.cls, "module": f"sglang.srt.speculative.{choice.module}", "file": file,
                      "basis": f"static: sglang {version}, {algo}, overlap {'on' if overlap else 'off'}"
                               f"{' (' + out.warning + ')' if out.warning else ''}; configs/sglang/dispatch.toml",
                      "mro": mro}
            mask = k.mask_of(version)
            absent = [c for c in classes if k.class_mask(c) and not k.class_mask(c) & mask]
            if feature.runs_in and len(absent) < len(classes):
                absent = []  # (runs_in names alternatives: one of them existing is enough)
            for c in absent:
                findings.append(Finding("DS202", f"{c} does not exist in sglang {version}."))
            running_path = hunks.running(k, version, choice.cls, worker["basis"])
            # the draft worker the running worker builds runs too: a patch (or a hook) on
            # EagleDraftWorker.draft is on the path of EAGLEWorkerV2 and StandaloneWorkerV2
            dmro = k.mro(version, running_path.draft) if running_path.draft else []
            if diff.get("given"):
                hunk_entries = hunks.judge(diff, k, running_path, plugin=feature.plugin is not None,
                                           hook=next(iter(hooked_methods.items()), None))
            if hunk_entries is not None and hunks.summary(hunk_entries) is not None:
                # the diff's behaviour hunks decide, not the class that logs the marker
                findings += hunk_findings(k, running_path, hunk_entries, facts, feature)
            elif hunk_entries is not None and hunks.only_flags(hunk_entries, (facts.get("marker") or {}).get("hits") or []):
                findings.append(Finding("DS228", f"every hunk of the patch is in server_args.py (flags, argument "
                                                 f"handling{', the announcement' if patched_out else ''}): nothing in "
                                                 f"{running_path.worker}" + (f" or {running_path.draft}" if running_path.draft else "")
                                                 + " acts on the flag while decoding."))
            elif (classes or feature.plugin is None) and not any(c in mro or c in dmro for c in classes):
                steps, exceptions = workers.how_to_run(k, mask, [algo], classes, env_step=env_fix)
                fix = []
                if steps:
                    fix.append(f"To run {'/'.join(classes)} on sglang {version}: " + "; ".join(steps) + ".")
                if exceptions:
                    fix.append("No setting runs it for " + ", ".join(exceptions) + ".")
                if feature.plugin is not None:
                    attr = hooked_methods.get(classes[0])
                    fix.append(f"Or hook {choice.cls}{'.' + attr if attr else ''} instead (target = "
                               f"\"sglang.srt.speculative.{choice.module}.{choice.cls}{'.' + attr if attr else ''}\").")
                    findings.append(Finding("DS201", f"sglang {version} will run {choice.cls}, not {'/'.join(classes)}: "
                                                     f"the {feature.plugin.hook.upper()} hook on {feature.plugin.target} never runs.",
                                            fix=" ".join(fix)))
                else:
                    fix.append(f"Or port the patch to {choice.cls} ({choice.module}.py).")
                    findings.append(Finding("DS201", f"sglang {version} will run {choice.cls}, not {'/'.join(classes)}.", fix=" ".join(fix)))
            elif not feature.runs_in:  # (a runs_in class runs the feature from its own code)
                runner = running_path.draft if not any(c in mro for c in classes) else choice.cls
                findings += method_findings(k, version, runner, classes, patched_out, feature, hooked_methods)
        findings += support.predict(k, feature, version, fv, algo, overlap)
        # Threshold reachability.
        th = _int(fv.get(feature.flag.name)) if feature.flag else None
        mr = _int(fv.get("--max-running-requests"))
        reset = k.max_running_reset
        if mr is None and algo in reset.algorithms and k.mask(reset.versions) & k.mask_of(version):
            mr = reset.value
        if th is not None and mr is not None and th >= mr:
            findings.append(Finding("DS103", f"threshold={th} but max_running_requests will be {mr}: the batch can never exceed it.",
                                    params=threshold_fix(th, mr)))
        # The decode compute path: graphs captured, and the running batch above which decode runs eager.
        path, found = compute_path.predict(k, version, flags, algo, mr)
        findings += found
    # The dynamic route, when it ran.
    dyn = facts.get("dynamic")
    if isinstance(dyn, dict) and dyn.get("ok") and dyn.get("worker"):
        dw = dyn["worker"]
        dcls = dw.get("class") if isinstance(dw, dict) else str(dw).rsplit(".", 1)[-1]
        if worker["class"] and dcls and dcls != worker["class"]:
            findings.append(Finding("DS209", f"static route: {worker['class']}; sglang's own resolution: {dcls}."))
        if not worker["class"] and dcls:
            worker.update({"class": dcls, "basis": "dynamic: sglang's own argument resolution and create_worker"})
    if diff.get("given") and hunk_entries is None:  # (no worker known: every hunk's reach is unknown)
        hunk_entries = hunks.judge(diff, k, None, plugin=feature.plugin is not None)
    patch_reach = hunks.summary(hunk_entries) if hunk_entries is not None else None
    forced = forced_verdict(findings, "preflight")
    if forced == "dead":
        v = "dead"
    elif patch_reach == hunks.UNKNOWN:
        v = "unknown"
    elif patch_reach == hunks.REACHABLE and worker["class"]:
        v = "ineffective" if forced == "ineffective" else "reachable"
    elif forced == "ineffective" and worker["class"] and patched_out:
        v = "ineffective"  # the patched code is reachable; speculation will accept nothing
    elif worker["class"] and patched_out or worker["class"] and classes and any(c in (worker.get("mro") or []) for c in classes):
        v = "reachable"
    else:
        v = "unknown"
    result = _result(v, facts, version, worker, patched_out, overlap, findings, hunk_entries)
    result["compute_path"] = path
    return result


def hunk_findings(k: Knowledge, run: hunks.Running, entries: list[dict], facts: dict, feature: Feature) -> list[Finding]:
    """The findings of a diff with behaviour hunks: none of them runs (DS226, dead), their reach is
    not known (DS227), or they run while the announcement cannot (DS225: never dead)."""
    behaviour = [e for e in entries if hunks.is_behaviour(e)]
    reach = hunks.summary(entries)
    if reach == hunks.NOT_REACHABLE:
        return [Finding("DS226", f"no hunk of the patch that acts can run on sglang {run.version}, which runs "
                                 f"{run.worker}" + (f" and {run.draft}" if run.draft else "") + ": "
                                 + "; ".join(f"{hunks.where(e)}: {e['reason']}" for e in behaviour) + ".",
                        fix=f"Put the behaviour in a method of {run.worker}" + (f" or {run.draft}" if run.draft else "")
                            + " that runs, or change the flags so that the patched class runs.")]
    if reach == hunks.UNKNOWN:
        return [Finding("DS227", "whether the patch's behaviour runs is not known: " + "; ".join(
            f"{hunks.where(e)}: {e['reason']}" for e in behaviour if e["reach"] == hunks.UNKNOWN) + ".")]
    # the behaviour runs; does the announcement?
    marks = [e for e in entries if e["marker"]]
    if not marks:  # the marker is not in the diff: where the inspector found it
        marks = [dict(e, reach=hunks.reach_of(k, run, e["class"], e["function"])[0],
                      reason=hunks.reach_of(k, run, e["class"], e["function"])[1])
                 for e in ({"class": h.get("class"), "function": hunks.method_of(h), "file": h.get("file"),
                            "lines": [h.get("line"), h.get("line")]} for h in (facts.get("marker") or {}).get("hits", []))]
    if any(m["reach"] == hunks.REACHABLE for m in marks):
        return []
    runs = next(e for e in behaviour if e["reach"] == hunks.REACHABLE)
    why = ("no hunk of the patch and no file of this install logs it" if not marks else
           "; ".join(f"{hunks.where(m)}: {m['reason']}" for m in marks))
    return [Finding("DS225", f"the patch's behaviour runs ({hunks.where(runs)}) but its announcement "
                             f"{feature.marker.literal!r} will be silent: {why}.")]


def method_findings(k: Knowledge, version: str, running: str, classes: list[str], patched_out: list[dict],
                    feature: Feature, hooked: Optional[dict[str, str]] = None) -> list[Finding]:
    """DS211 when the patched class is in the MRO but an override skips the patched method (the
    method is where the marker was found, else the feature's usual location; for a plugin, the
    method its hook wraps: a hook on Base.method runs only when Base.method is called)."""
    methods = {p.cls: p.function for p in feature.patch}
    methods.update({p["class"]: p["function"] for p in patched_out if p.get("class") and p.get("function")})
    methods.update(hooked or {})
    b = workers.method_blocked(k, running, k.mask_of(version), classes, methods)
    if b is None:
        return []
    patched, method, by = b
    if feature.plugin is not None:
        return [Finding("DS211", f"sglang {version} will run {running}, whose {by}.{method} does not call {patched}.{method}: "
                                 f"the {feature.plugin.hook.upper()} hook on {feature.plugin.target} never runs.",
                        fix=f"Hook {by}.{method} instead (or a method {by} does call).")]
    return [Finding("DS211", f"sglang {version} will run {running}, whose {by}.{method} does not call {patched}.{method}: the patch in it never runs.",
                    fix=f"Put the patch in {by}.{method} (or in a method {by} does call).")]


def threshold_fix(threshold: int, max_running: int) -> dict[str, int]:
    """The numbers of DS103's fix: a max_running_requests the threshold can be exceeded under."""
    return {"suggest": max(threshold * 2, threshold + 1), "threshold": threshold, "max_running": max_running}


def _int(v) -> Optional[int]:
    try:
        return int(v) if v is not None and v is not True else None
    except (TypeError, ValueError):
        return None


def _result(verdict, facts, version, worker, patched, overlap, findings, hunk_entries=None) -> dict[str, Any]:
    sg = facts.get("sglang") or {}
    # one finding per code and message: a flag passed twice, a class named by two marker hits
    findings = list({(f.code, f.message): f for f in findings}.values())
    findings.sort(key=lambda f: ({"error": 0, "warning": 1, "info": 2}[f.severity], f.code))
    return {
        "verdict": verdict, "exit_code": EXIT[verdict], "sglang_version": version,
        "sglang_path": sg.get("package_dir"), "editable": sg.get("editable"), "worker": worker,
        "patched": patched, "overlap_schedule": overlap,
        # one entry per scope of each hunk of --patch (file, class, function, lines, role, reach,
        # reason, evidence); None when no diff was given
        "hunks": hunk_entries,
        "findings": [f.to_json() for f in findings],
        # the package's .py files whose sha256 differs from its dist-info RECORD ("you changed
        # these files"); None when the inspector did not look (sglang not found)
        "changed_files": changed_files(facts),
        "timings": facts.get("timings"),
        # the same keys in every document (cli/preflight.py fills them for a patch that was found)
        "environment": None, "probe_command": None, "probe_command_needs": None, "probe_dir": None, "probe_copy": None, "plugin": None,
        "compute_path": None,  # the decode graphs predicted (verdict/compute_path.py predict)
    }


def changed_files(facts: dict[str, Any]) -> Optional[dict[str, Any]]:
    cf = (facts.get("sglang") or {}).get("changed_files")
    if not isinstance(cf, dict):
        return None
    return {"checked": bool(cf.get("checked")), "reason": cf.get("reason"), "record": cf.get("record"),
            "files": [c["path"] for c in cf.get("changed") or []], "sha256": {c["path"]: c["sha256"] for c in cf.get("changed") or []},
            "missing": list(cf.get("missing") or []), "files_hashed": cf.get("files_hashed"), "seconds": cf.get("seconds")}


def run(host, python: str, feature: Feature, flags: list[str], env: dict[str, str], *,
        patched: Optional[list[str]] = None, patch_diff: Optional[str] = None, dynamic: bool = False,
        sglang_path: Optional[str] = None) -> dict[str, Any]:
    facts = inspect(host, python, feature, flags, env, patch_diff=patch_diff, dynamic=dynamic, sglang_path=sglang_path)
    check_diff(facts, plugin=feature.plugin is not None)
    return judge(facts, feature, flags, env, patched=patched, base=host.environment, exportable=host.inherits_this_shell)


def check_diff(facts: dict[str, Any], *, plugin: bool = False) -> None:
    """Refuse (PatchError: one line, exit 2) a --patch that does not describe the installed sglang:
    a file outside the package, a file this release lacks, a hunk whose text is not there (another
    release or checkout), a hunk still not applied. With a plugin feature, files outside sglang are
    the plugin's own."""
    diff = facts.get("diff") or {}
    sg = facts.get("sglang") or {}
    if not diff.get("given"):
        return
    release = f"sglang {sg.get('version') or '?'} at {sg.get('package_dir')}"
    if diff.get("parse_errors"):
        raise PatchError(f"--patch: {diff['parse_errors'][0]}")
    files = diff.get("files") or []
    outside = [f for f in files if not f.get("installed_path")]
    if outside and not plugin:
        raise PatchError(f"--patch: {outside[0].get('diff_path')!r} is not a file of the sglang package ({release}): "
                         "preflight judges a diff of sglang's own files (as `git diff` in an sglang checkout writes it)")
    engine = [f for f in files if f.get("installed_path")]
    hunks_ = [(f, h) for f in engine for h in f.get("hunks") or []]
    missing = [f for f in engine if not f.get("present") and not f.get("deleted")]
    differs = [(f, h) for f, h in hunks_ if h.get("applied") == "differs"]
    if missing and not missing[0].get("new_file"):
        f = missing[0]
        raise PatchError(f"--patch: {f['diff_path']}: no such file in {release}: the diff was made against another "
                         "sglang release or checkout")
    applied = [h for _, h in hunks_ if h.get("applied") in ("exact", "offset")]
    if differs and not applied and len(hunks_) > 1:  # not one hunk's text is here: another release's diff
        f, h = differs[0]
        raise PatchError(f"--patch: none of its {len(hunks_)} hunks matches {release} ({len(differs)} match neither "
                         f"side, first {h['header']} in {f['diff_path']}{_mismatch(h)}): the diff was made against "
                         "another sglang release or checkout")
    if differs:
        f, h = differs[0]
        raise PatchError(f"--patch: hunk {h['header']} does not apply to {f['installed_path']}{_mismatch(h)}: "
                         f"neither its new text nor its old text is in {release}")
    if missing:  # a file the diff creates, not in this install
        raise PatchError(f"--patch: {missing[0]['diff_path']} (a file the diff creates) is not in {release}: "
                         "the patch is not applied to this install")
    for f, h in hunks_:
        if h.get("applied") == "not-applied":
            raise PatchError(f"--patch: hunk {h['header']} is not applied to {f['installed_path']} (it still has the "
                             "old text): apply the patch to this install first, or give the diff of what is installed")


def _mismatch(h: dict) -> str:
    m = h.get("mismatch")
    if not m:
        return ""
    have = "end of file" if m.get("installed") is None else repr(m["installed"].strip())
    return f"; line {m['line']}: the diff has {m['diff'].strip()!r}, the installed file {have}"
