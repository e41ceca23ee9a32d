"""sglang's preflight: before launch, from the installed sglang, the env and the flags, which worker
class will run and whether the patched code is on its path.

Facts come from the inspector (inspector/ beside this file, run by the server's own python on the
target host); conclusions come from the knowledge tables (static route) and, when the inspector
could import sglang, from sglang's own argument resolution (dynamic route). The judging is the
steps of `STEPS`, each adding to one `Preflighting`; what every engine's preflight shares (errors,
the order of findings, the policy) is verdict/preflight.py."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Optional

from dynspec_cli import inject
from dynspec_cli.engines.sglang import compute_path, flagvalues, hunks, plugins, support, workers
from dynspec_cli.engines.sglang.knowledge import V2_SWITCH_ENV, Knowledge, knowledge
from dynspec_cli.evidence.argv import flag_values
from dynspec_cli.knowledge.features import Feature
from dynspec_cli.knowledge.findings import Finding, forced_verdict
from dynspec_cli.verdict import acceptance
from dynspec_cli.verdict.codes import EXIT
from dynspec_cli.verdict.preflight import InterpreterError, PatchError, facts_of, judged, ordered
from dynspec_cli.verdict.preflight import check_diff as shared_check_diff

INSPECTOR = "engines/sglang/inspector"  # the program run by the server's python (inject.program)


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
    payload = inject.stdin(inject.program(INSPECTOR), json.dumps(args).encode("utf-8"), proc_env)
    res = host.run(inject.command(python), input=payload, timeout=timeout)
    if not res.stdout and res.exit_code in (126, 127):  # sh's exec: not found / not executable
        err = res.stderr.decode("utf-8", "replace").strip().splitlines()
        raise InterpreterError(f"{python} on {host.name}: " + ("no such interpreter" if res.exit_code == 127 else
                               "not an executable interpreter") + (f" ({err[-1]})" if err else ""))
    return facts_of(res, python)


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


@dataclass
class Preflighting:
    """One preflight in the making: the inspector's facts, the user's input, and what each step of
    `STEPS` found. A step that settles the verdict early sets `verdict` (the rest are skipped)."""

    facts: dict[str, Any]
    feature: Feature
    flags: list[str]
    env: dict[str, str]
    patched: Optional[list[str]]  # --patched-class / the profile's
    k: Knowledge
    env_fix: "_EnvFix"
    sg: dict[str, Any] = field(default_factory=dict)  # the inspector's `sglang` facts
    version: Optional[str] = None
    verdict: Optional[str] = None  # set early: nothing more to judge
    findings: list[Finding] = field(default_factory=list)
    worker: dict[str, Any] = field(default_factory=lambda: {"class": None, "module": None, "file": None, "basis": None,
                                                            "mro": None})
    patched_out: list[dict] = field(default_factory=list)  # where the patch is (marker hits, a plugin's code)
    overlap: Optional[bool] = None
    hunk_entries: Optional[list[dict]] = None  # per scope of each hunk of --patch (None: no diff given)
    running_path: Optional[hunks.Running] = None
    path: Optional[dict[str, Any]] = None  # the decode graphs predicted
    hooked: list[str] = field(default_factory=list)  # a plugin's hooked classes, and their methods
    hooked_methods: dict[str, str] = field(default_factory=dict)
    fv: dict[str, Any] = field(default_factory=dict)  # the flags' values
    classes: list[str] = field(default_factory=list)  # the patched classes to find on the worker path
    algo: Optional[str] = None
    overlap_note: Optional[str] = None  # how sglang got to the overlap setting (a warning it logs)
    mr: Optional[int] = None  # max_running_requests as it will be
    choice: Any = None  # the worker the tables give (knowledge.WorkerChoice)
    mro: list[str] = field(default_factory=list)
    draft_mro: list[str] = field(default_factory=list)

    @property
    def speculating(self) -> bool:
        """A known release and an algorithm: the worker can be worked out."""
        return bool(self.version and self.algo and self.k.known(self.version))

    @property
    def diff(self) -> dict[str, Any]:
        return self.facts.get("diff") or {}


def _judge(facts, feature, flags, env, patched, k, env_fix) -> dict[str, Any]:
    p = Preflighting(facts, feature, flags, env, patched, k, env_fix)
    if judged(p, STEPS):  # (settled before the worker could be worked out)
        return _result(p.verdict, facts, p.version, p.worker, p.patched_out, p.overlap, p.findings)
    result = _result(_verdict(p), facts, p.version, p.worker, p.patched_out, p.overlap, p.findings, p.hunk_entries)
    result["compute_path"] = p.path
    return result


def step_found(p: Preflighting) -> None:
    """The inspector ran, and the server's python imports sglang (DS210 otherwise)."""
    facts = p.facts
    p.sg = sg = facts.get("sglang") or {}
    p.version = sg.get("version")
    if not facts.get("ok", False) and not sg.get("found"):
        p.findings.append(Finding("DS210", facts.get("error") or "the inspector could not run"))
        p.verdict = "unknown" if not sg else "dead"
    elif not sg.get("found"):
        p.findings.append(Finding("DS210", f"{(facts.get('python') or {}).get('executable', 'this python')} cannot import sglang."))
        p.verdict = forced_verdict(p.findings, "preflight") or "unknown"


def step_patch(p: Preflighting) -> None:
    """Where the patch is: the marker's hits, a plugin's code; the files' syntax and bytecode; more
    than one sglang install."""
    facts, sg, feature = p.facts, p.sg, p.feature
    for h in (facts.get("marker") or {}).get("hits", []):
        p.patched_out.append({"file": h.get("file"), "class": h.get("class"), "function": h.get("function"),
                              "line": h.get("line"), "bases": h.get("bases")})
    other = (facts.get("marker") or {}).get("hits_in_other_installs") or []
    if feature.plugin is not None:  # the patch is the plugin's code, not sglang's files
        found, p.patched_out = plugins.findings(facts, feature, p.version, p.k)
        p.findings += found
        p.hooked, p.hooked_methods = plugins.target_classes(facts, p.k)
    elif not p.patched_out and other:
        p.findings.append(Finding("DS208", f"the marker is in {other[0].get('file')}, not under {sg.get('package_dir')}."))
    elif not p.patched_out and not p.diff.get("given"):
        p.findings.append(Finding("DS204", f"no file under {sg.get('package_dir')}/srt holds {feature.marker.literal!r}."))
    for f in facts.get("files") or []:
        if f.get("syntax_error"):
            se = f["syntax_error"]
            p.findings.append(Finding("DS205", f"{f.get('file')}:{se.get('line')}: {se.get('message') or se.get('msg')}"))
        if f.get("stale_code_runs"):  # a stale timestamp pyc is just recompiled; a checked-hash one runs
            p.findings.append(Finding("DS207", f"{f.get('file')}: its cached bytecode does not match the source and is what runs"))
    if sg.get("multiple_installs"):
        dirs = [i.get("package_dir") for i in sg.get("installs", [])]
        p.findings.append(Finding("DS206", "importable sglang installs: " + ", ".join(map(str, dirs))))


def step_flags(p: Preflighting) -> None:
    """The feature's flag defined, the user's flags accepted, their values valid (as argparse reads them)."""
    fl, feature, version = p.facts.get("flags") or {}, p.feature, p.version
    ff = fl.get("feature_flag") or {}
    if feature.flag and ff and not ff.get("defined", True):  # (argparse would also accept a prefix of another flag)
        p.findings.append(Finding("DS101", f"{feature.flag.name} is not defined by sglang {version} at {p.sg.get('package_dir')}: server_args.py was not patched."))
    for uf in fl.get("user_flags") or []:
        if not uf.get("accepted", True) and uf.get("flag") != (feature.flag.name if feature.flag else None):
            p.findings.append(Finding("DS109", f"{uf.get('flag')} is not a flag of sglang {version}."))
    for message in flagvalues.invalid(p.flags, fl.get("user_flags") or [], version):
        p.findings.append(Finding("DS110", message))


def step_release(p: Preflighting) -> None:
    """The patched classes to look for, the algorithm, and whether the release is one the tables know
    (DS307) and speculates at all (DS102)."""
    k, version = p.k, p.version
    p.fv = fv = flag_values(p.flags)
    classes = list(p.patched or p.hooked or p.feature.runs_in)
    if not classes:
        classes = [x["class"] for x in p.patched_out if x.get("class")] or [x.cls for x in p.feature.patch]
    p.classes = list(dict.fromkeys(classes))
    algo = fv.get("--speculative-algorithm")
    p.algo = k.canonical_algorithm(algo) if isinstance(algo, str) else None
    if version and not k.known(version):
        p.findings.append(Finding("DS307", f"sglang {version} is not in dynspec's tables ({k.releases[0]} – {k.releases[-1]})."))
    elif version and p.algo is None:
        p.findings.append(Finding("DS102", "no --speculative-algorithm: speculative decoding is off, no speculative worker runs."))


def step_draft(p: Preflighting) -> None:
    """A draft made for another algorithm (DS113); acceptance not earned by the draft (DS114)."""
    if not p.speculating:
        return
    draft = p.facts.get("draft") or {}
    hit = p.k.draft_mismatch(p.version, p.algo, draft.get("architectures") or []) if draft.get("found") else None
    if hit is not None:
        row, arch = hit
        p.findings.append(Finding("DS113", f"--speculative-algorithm {p.fv.get('--speculative-algorithm')} with a draft "
                                           f"whose config.json architecture is {arch} ({draft.get('config')}), made "
                                           f"for {row.expected}: sglang loads it without a word and accepts nothing.",
                                  file=draft.get("config"), params={"expected": row.expected}))
    prov = acceptance.of("sglang", p.flags)
    if prov["provenance"] != "real":
        p.findings.append(Finding("DS114", f"acceptance will be {prov['provenance']}: {acceptance.describe(prov)}."))


def step_overlap(p: Preflighting) -> None:
    """The overlap scheduler as sglang will resolve it from the flags and the environment, and what
    the switches do on this release (DS107/DS111 it raises, DS104 ignored, DS105 back on, DS106 V1)."""
    if not p.speculating:
        return
    k, version, env, fv = p.k, p.version, p.env, p.fv
    user_disable = bool(fv.get("--disable-overlap-schedule"))
    out = k.resolve_overlap(version, p.algo, env=dict(env), flags={f for f, v in fv.items() if v is True},
                            user_disable=user_disable, topk=_int(fv.get("--speculative-eagle-topk")),
                            device=fv.get("--device") if isinstance(fv.get("--device"), str) else None)
    p.overlap = out.overlap
    rng = k.overlap_range(version)
    if out.error:
        p.findings.append(Finding("DS107" if "topk" in out.error else "DS111",
                                  f"sglang {version} will raise at start-up: {out.error}"))
    if rng is not None and V2_SWITCH_ENV in env and rng.switch.kind in ("removed", "ignored"):
        p.findings.append(Finding("DS104", f"{V2_SWITCH_ENV}={env[V2_SWITCH_ENV]} does nothing on sglang {version}."))
    if rng is not None and rng.switch.overrides_user_disable and user_disable and out.switch_value and p.overlap:
        p.findings.append(Finding("DS105", f"on sglang {version} {V2_SWITCH_ENV}=True turns the overlap scheduler back on."))
    if out.reason and "topk" in out.reason:
        p.findings.append(Finding("DS106", f"sglang {version} falls back to the V1 worker: {out.reason}."))
    p.overlap_note = out.warning


def step_worker(p: Preflighting) -> None:
    """The worker the tables give for this release, algorithm and overlap setting (the static route),
    its MRO and the draft worker it builds; the patched classes this release lacks (DS202)."""
    if not p.speculating or p.overlap is None:
        return
    k, version, algo = p.k, p.version, p.algo
    choice = k.worker(version, algo, bool(p.overlap), bool(p.fv.get("--enable-multi-layer-eagle")))
    if choice is None or not choice.cls:
        return
    p.choice, p.mro = choice, k.mro(version, choice.cls)
    note = p.overlap_note
    p.worker = {"class": choice.cls, "module": f"sglang.srt.speculative.{choice.module}",
                "file": f"{p.sg.get('package_dir')}/srt/speculative/{choice.module.replace('.', '/')}.py",
                "basis": f"static: sglang {version}, {algo}, overlap {'on' if p.overlap else 'off'}"
                         f"{' (' + note + ')' if note else ''}; configs/sglang/dispatch.toml",
                "mro": p.mro}
    mask = k.mask_of(version)
    absent = [c for c in p.classes if k.class_mask(c) and not k.class_mask(c) & mask]
    if p.feature.runs_in and len(absent) < len(p.classes):
        absent = []  # (runs_in names alternatives: one of them existing is enough)
    for c in absent:
        p.findings.append(Finding("DS202", f"{c} does not exist in sglang {version}."))
    p.running_path = hunks.running(k, version, choice.cls, p.worker["basis"])
    # the draft worker the running worker builds runs too: a patch (or a hook) on
    # EagleDraftWorker.draft is on the path of EAGLEWorkerV2 and StandaloneWorkerV2
    p.draft_mro = k.mro(version, p.running_path.draft) if p.running_path.draft else []


def step_reach(p: Preflighting) -> None:
    """Is the patch on that path: the diff's behaviour hunks decide (DS226/DS227/DS225), else the
    patched class in the running worker's MRO (DS201), else an override that skips the patched
    method (DS211); a diff only of flags acts on nothing while decoding (DS228)."""
    if p.choice is None:
        return
    k, version, feature, choice, run = p.k, p.version, p.feature, p.choice, p.running_path
    classes, mro, dmro = p.classes, p.mro, p.draft_mro
    if p.diff.get("given"):
        p.hunk_entries = hunks.judge(p.diff, k, run, plugin=feature.plugin is not None,
                                     hook=next(iter(p.hooked_methods.items()), None))
    if p.hunk_entries is not None and hunks.summary(p.hunk_entries) is not None:
        # the diff's behaviour hunks decide, not the class that logs the marker
        p.findings += hunk_findings(k, run, p.hunk_entries, p.facts, feature)
    elif p.hunk_entries is not None and hunks.only_flags(p.hunk_entries, (p.facts.get("marker") or {}).get("hits") or []):
        p.findings.append(Finding("DS228", f"every hunk of the patch is in server_args.py (flags, argument "
                                           f"handling{', the announcement' if p.patched_out else ''}): nothing in "
                                           f"{run.worker}" + (f" or {run.draft}" if run.draft else "")
                                           + " acts on the flag while decoding."))
    elif (classes or feature.plugin is None) and not any(c in mro or c in dmro for c in classes):
        p.findings.append(_dead_class(p))
    elif not feature.runs_in:  # (a runs_in class runs the feature from its own code)
        runner = run.draft if not any(c in mro for c in classes) else choice.cls
        p.findings += method_findings(k, version, runner, classes, p.patched_out, feature, p.hooked_methods)


def _dead_class(p: Preflighting) -> Finding:
    """DS201: the worker that will run has none of the patched classes in its MRO; the fix: the
    settings that run one, or the class to port the patch (or point the hook) to."""
    k, version, feature, choice, classes = p.k, p.version, p.feature, p.choice, p.classes
    steps, exceptions = workers.how_to_run(k, k.mask_of(version), [p.algo], classes, env_step=p.env_fix)
    fix = []
    if steps:
        fix.append(f"To run {'/'.join(classes)} on sglang {version}: " + "; ".join(steps) + ".")
    if exceptions:
        fix.append("No setting runs it for " + ", ".join(exceptions) + ".")
    if feature.plugin is not None:
        attr = p.hooked_methods.get(classes[0])
        fix.append(f"Or hook {choice.cls}{'.' + attr if attr else ''} instead (target = "
                   f"\"sglang.srt.speculative.{choice.module}.{choice.cls}{'.' + attr if attr else ''}\").")
        return Finding("DS201", f"sglang {version} will run {choice.cls}, not {'/'.join(classes)}: "
                                f"the {feature.plugin.hook.upper()} hook on {feature.plugin.target} never runs.",
                       fix=" ".join(fix))
    fix.append(f"Or port the patch to {choice.cls} ({choice.module}.py).")
    return Finding("DS201", f"sglang {version} will run {choice.cls}, not {'/'.join(classes)}.", fix=" ".join(fix))


def step_support(p: Preflighting) -> None:
    """The feature's own support rules on these flags (configs/features: sglang switches it off)."""
    if p.speculating:
        p.findings += support.predict(p.k, p.feature, p.version, p.fv, p.algo, p.overlap)


def step_threshold(p: Preflighting) -> None:
    """A threshold the running batch can never exceed (DS103): max_running_requests as it will be."""
    if not p.speculating:
        return
    k, fv = p.k, p.fv
    th = _int(fv.get(p.feature.flag.name)) if p.feature.flag else None
    mr = _int(fv.get("--max-running-requests"))
    reset = k.max_running_reset
    if mr is None and p.algo in reset.algorithms and k.mask(reset.versions) & k.mask_of(p.version):
        mr = reset.value
    p.mr = mr
    if th is not None and mr is not None and th >= mr:
        p.findings.append(Finding("DS103", f"threshold={th} but max_running_requests will be {mr}: the batch can never exceed it.",
                                  params=threshold_fix(th, mr)))


def step_compute_path(p: Preflighting) -> None:
    """The decode compute path: graphs captured, and the running batch above which decode runs eager."""
    if p.speculating:
        p.path, found = compute_path.predict(p.k, p.version, p.flags, p.algo, p.mr)
        p.findings += found


def step_dynamic(p: Preflighting) -> None:
    """sglang's own argument resolution, when the dynamic route ran: it outweighs the tables (DS209)."""
    dyn, worker = p.facts.get("dynamic"), p.worker
    if isinstance(dyn, dict) and dyn.get("ok") and dyn.get("worker"):
        dw = dyn["worker"]
        dcls = dw.get("class") if isinstance(dw, dict) else str(dw).rsplit(".", 1)[-1]
        if worker["class"] and dcls and dcls != worker["class"]:
            p.findings.append(Finding("DS209", f"static route: {worker['class']}; sglang's own resolution: {dcls}."))
        if not worker["class"] and dcls:
            worker.update({"class": dcls, "basis": "dynamic: sglang's own argument resolution and create_worker"})
    if p.diff.get("given") and p.hunk_entries is None:  # (no worker known: every hunk's reach is unknown)
        p.hunk_entries = hunks.judge(p.diff, p.k, None, plugin=p.feature.plugin is not None)


STEPS = (step_found, step_patch, step_flags, step_release, step_draft, step_overlap, step_worker, step_reach,
         step_support, step_threshold, step_compute_path, step_dynamic)


def _verdict(p: Preflighting) -> str:
    """Dead by the registry's policy; else the diff's hunks' reach; else the patched code on the
    running worker's path; else unknown."""
    worker, classes = p.worker, p.classes
    patch_reach = hunks.summary(p.hunk_entries) if p.hunk_entries is not None else None
    forced = forced_verdict(p.findings, "preflight")
    if forced == "dead":
        return "dead"
    if patch_reach == hunks.UNKNOWN:
        return "unknown"
    if patch_reach == hunks.REACHABLE and worker["class"]:
        return "ineffective" if forced == "ineffective" else "reachable"
    if forced == "ineffective" and worker["class"] and p.patched_out:
        return "ineffective"  # the patched code is reachable; speculation will accept nothing
    if worker["class"] and p.patched_out or worker["class"] and classes and any(c in (worker.get("mro") or []) for c in classes):
        return "reachable"
    return "unknown"


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
    findings = ordered(list({(f.code, f.message): f for f in findings}.values()))
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
        "compute_path": None,  # the decode graphs predicted (compute_path.py predict)
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
    """Refuse (PatchError: one line, exit 2) a --patch that does not describe the installed sglang
    (verdict/preflight.py check_diff: every engine refuses alike)."""
    sg = facts.get("sglang") or {}
    shared_check_diff(facts.get("diff") or {}, "sglang", sg.get("version"), sg.get("package_dir"), plugin=plugin)


# --- prove's receipt: the files the gate pins (engines/protocol.py patched_files) --------------------
def patched_files(host, python: str, feature: Feature, flags: list[str], *, given: list[tuple[str, str]] = (),
                  diff_path: Optional[str] = None) -> tuple[list[tuple[str, str]], str]:
    """(path, source) of every file the gate pins, and how they were found: the run's diff's
    installed files (`given`, source "diff"), the files holding the marker ("marker-search") and the
    files that differ from the released distribution's RECORD ("record"), as the inspector reads the
    sglang `python` imports; a plugin's code and metadata ("plugin")."""
    given = list(given)
    facts = inspect(host, python, feature, list(flags), {})
    if feature.plugin is not None:
        files, note = _plugin_files(facts, feature)
        return _merged(given, [(p, "plugin") for p in files]), note
    hits = (facts.get("marker") or {}).get("hits") or []
    marked = [(f, "marker-search") for f in sorted({h["file"] for h in hits if h.get("file")})]
    cf = changed_files(facts) or {}
    changed = [(f, "record") for f in cf.get("files") or []]
    files = _merged(given, marked, changed)
    if files:
        parts = ([f"the {len(given)} installed file(s) of the diff {diff_path}"] if given else []) + \
                ([f"marker {feature.marker.literal!r} found by the inspector under "
                  f"{(facts.get('sglang') or {}).get('package_dir')}"] if marked else []) + \
                ([f"{len(changed)} file(s) that differ from {cf.get('record')}"] if changed else [])
        return files, "; ".join(parts)
    if not (facts.get("sglang") or {}).get("found"):
        why = facts.get("error") or f"{python} on {host.name} cannot import sglang"
        return [], f"no patched file found ({why}); pass --patched-file PATH"
    return [], f"no file under the imported sglang holds {feature.marker.literal!r}; pass --patched-file PATH"


def _merged(*lists: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """One entry per path, the first source naming it."""
    out: dict[str, str] = {}
    for lst in lists:
        for p, src in lst:
            out.setdefault(p, src)
    return list(out.items())


def _plugin_files(facts: dict, feature) -> tuple[list[str], str]:
    """A plugin's code and the metadata that makes sglang load it: what the entry point resolves to."""
    disc = (facts.get("plugin") or {}).get("discovery") or {}
    if disc.get("loaded") is None:
        return [], f"no distribution declares entry point {feature.plugin.entry_point!r}; pass --patched-file PATH"
    c = disc["candidates"][disc["loaded"]]
    files = sorted(set(c.get("files") or []) | set(c.get("metadata_files") or []))
    return files, f"plugin {feature.plugin.entry_point!r}: {c.get('distribution')} {c.get('version')} ({c.get('metadata')}), " \
                  "its code and metadata"
