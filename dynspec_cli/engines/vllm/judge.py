"""vLLM's judge: from vLLM observations to the same Verdict (live / dead / inconclusive / crashed,
same exit codes) as every engine's, through the one judge core (verdict/core.py: dead outranks
crashed, `live` needs the marker). The engine-specific facts (which runner, which proposer class,
which knobs are dead) come from configs/vllm/ through VllmKnowledge."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from dynspec_cli.engines.vllm.knowledge import VllmKnowledge
from dynspec_cli.evidence.lines import Line
from dynspec_cli.evidence.observation import Observation
from dynspec_cli.knowledge.features import Feature
from dynspec_cli.verdict import core
from dynspec_cli.verdict.result import Verdict, claim


@dataclass
class VllmLaunch:
    index: int
    first: Line
    version: Optional[str] = None
    version_line: Optional[Line] = None
    config_line: Optional[Line] = None
    speculative: Any = "unknown"  # dict | None (off) | "unknown"
    spec_args: dict = field(default_factory=dict)  # --speculative-config as given (non-default args)
    args_line: Optional[Line] = None
    dp_size: Optional[int] = None
    tp_size: Optional[int] = None
    runner: Optional[str] = None
    runner_line: Optional[Line] = None
    runner_basis: Optional[str] = None
    fallback: Optional[Observation] = None
    dynamic_off: Optional[Line] = None
    markers: list = field(default_factory=list)
    ready: Optional[Line] = None
    metrics: int = 0
    metrics_line: Optional[Line] = None
    last_accept: Optional[str] = None
    gen_stats: int = 0
    crash: Optional[tuple[str, str, Line]] = None
    in_traceback: bool = False
    traceback_line: Optional[Line] = None  # where the open traceback started
    trouble_line: Optional[Line] = None  # the last traceback, frame or crash line
    served_line: Optional[Line] = None  # the last line showing requests served
    startup_line: Optional[Line] = None  # a crash line or frame that runs only while the server starts
    spec_line: Optional[Line] = None  # a line only a speculating server writes (implies speculative)
    command_line: Optional[Line] = None  # a launch command in the log
    requested: dict = field(default_factory=dict)  # its flags (configs/vllm/launch_flags.toml)
    proposer: Optional[tuple[str, Line]] = None  # V0's proposer class, as logged
    method_hint: Optional[tuple[str, Line]] = None  # a method a line names (a V2 rejection)
    last_log_offset: int = -1  # the last line that is not a launch command
    frames: list = field(default_factory=list)
    past_config: bool = False
    graphs_off: Optional[Line] = None  # "Cudagraph is disabled under eager mode"
    mode_changes: list = field(default_factory=list)  # (from, to, backend or None, line): cudagraph_mode changed by vLLM
    graphs_captured: Optional[Line] = None  # "Graph capturing finished in N secs"
    phase: str = "args"
    last_line: Optional[Line] = None

    def steady(self, metrics_lines: int) -> bool:
        """Ready and serving: the big-file reader may jump to the file's tail."""
        return self.ready is not None and self.metrics >= metrics_lines


@dataclass
class VllmVerdict(Verdict):
    """Verdict plus the vLLM fact sglang has no word for: which model runner runs (V1 or V2)."""

    model_runner: Optional[str] = None

    def to_json(self) -> dict[str, Any]:
        return {**super().to_json(), "model_runner": self.model_runner}


class Judging(core.Judging):
    """What vLLM's steps find besides the core's findings, worker, marker and crash."""

    version: Optional[str] = None
    known: bool = False  # the release is in configs/vllm/releases.toml
    method: tuple = (None, None, "")  # (method, the line naming it, how it is known)
    runner: Optional[str] = None
    compute_path: Optional[dict[str, Any]] = None


class VllmJudge(core.Core):
    name = "vllm"
    version_key = None  # vLLM's verdicts carry engine_version only
    server_noun = "a vLLM server"
    server_line = "any vLLM server line"
    exited_finding = "the server process exited before it became ready."
    judging = Judging
    verdict_class = VllmVerdict

    def __init__(self, knowledge: VllmKnowledge, feature: Feature, *, patched_classes: list[str] | None = None,
                 engine_version: str | None = None) -> None:
        self.k = knowledge
        self.feature = feature
        self.patch = list(feature.patch)
        self.patched = patched_classes or [p.cls for p in feature.patch]
        self.pinned = engine_version
        self._launches: list[VllmLaunch] = []
        self.earlier_markers: list[Observation] = []
        # which runner each patched location belongs to (the feature names vLLM files)
        self.patched_runners = {r for r in (self.k.runner_of_module(p.module) for p in self.patch) if r}
        for c in patched_classes or []:
            for row in self.k.proposer_rows_for_class(c):
                self.patched_runners.add(row.runner)

    @property
    def launches(self) -> list[VllmLaunch]:
        return self._launches

    # --- feeding ----------------------------------------------------------------------------
    def _current(self, line: Line) -> VllmLaunch:
        if not self.launches:
            self._launches.append(VllmLaunch(1, line))
        return self.launches[-1]

    def feed(self, obs: Observation) -> None:
        la = self._current(obs.line)
        starts = obs.kind == "landmark" and obs.id in ("engine-config", "engine-config-v0", "api-version", "non-default-args")
        if starts and la.past_config:
            self.earlier_markers.extend(la.markers)
            prev, la = la, VllmLaunch(len(self.launches) + 1, obs.line)
            if prev.command_line is not None and prev.command_line.offset > prev.last_log_offset:
                # the command right before the new launch's first lines is the new launch's
                la.command_line, la.requested, prev.command_line, prev.requested = prev.command_line, prev.requested, None, {}
            self._launches.append(la)
        la.last_line = obs.line
        if not obs.kind.startswith("command"):
            la.last_log_offset = obs.line.offset
        getattr(self, f"_on_{obs.kind.replace('-', '_')}")(la, obs)

    def _on_command(self, la: VllmLaunch, obs: Observation) -> None:
        """A launch command pasted into the log: what was requested. It does not start a launch
        (people paste the crash, then the command): lines of a new launch's start-up do."""
        if obs.kind == "command":
            la.command_line, la.requested = obs.line, {}
        la.command_line = la.command_line or obs.line
        la.requested.update(obs.data.get("flags") or {})

    _on_command_cont = _on_command

    def _on_launch(self, la: VllmLaunch, obs: Observation) -> None:
        pass

    def _on_probe(self, la: VllmLaunch, obs: Observation) -> None:
        pass  # the in-server probe for vLLM is not built yet (see the report)

    def _on_marker(self, la: VllmLaunch, obs: Observation) -> None:
        la.markers.append(obs)

    def _on_traceback(self, la: VllmLaunch, obs: Observation) -> None:
        la.in_traceback = True
        la.traceback_line = la.traceback_line or obs.line
        la.trouble_line = obs.line

    def _on_exception(self, la: VllmLaunch, obs: Observation) -> None:
        if la.in_traceback:
            la.crash = (obs.data["exception"], obs.data["message"], obs.line)
            la.trouble_line = obs.line
            la.past_config = True

    def _on_frame(self, la: VllmLaunch, obs: Observation) -> None:
        la.in_traceback = True
        la.traceback_line = la.traceback_line or obs.line
        la.trouble_line = obs.line
        la.past_config = True  # a later engine config is another launch
        path = obs.data.get("path", "")
        la.frames.append(obs)
        if la.startup_line is None and self.k.is_startup_frame(path.replace("\\", "/"), obs.data.get("function", "")):
            la.startup_line = obs.line
        if la.spec_line is None and any(p in path for p in self.k.speculative_paths):
            la.spec_line = obs.line  # speculative-decoding code ran
        runner = self.k.runner_of_module(path.split("/vllm/", 1)[1]) if "/vllm/" in path else None
        if runner and la.runner is None:
            self._set_runner(la, runner, obs.line, f"traceback frame in {path.split('/vllm/', 1)[-1]}")

    @staticmethod
    def _set_runner(la: VllmLaunch, runner: str, line: Line, basis: str) -> None:
        la.runner, la.runner_line, la.runner_basis = runner, line, basis

    def _on_landmark(self, la: VllmLaunch, obs: Observation) -> None:
        d, line, rid = obs.data, obs.line, obs.id
        row = self.k.line_by_id.get(rid)
        if row is not None and row.implies.get("speculative") is True and la.spec_line is None:
            la.spec_line = line
        if row is not None and row.crash:
            la.crash = la.crash or (row.crash, line.msg, line)
            la.trouble_line = line
            if row.startup_crash and la.startup_line is None:
                la.startup_line = line
            la.past_config = True
            return
        if rid == "engine-config-dump" and la.config_line is not None:
            return  # dump_input's copy of a config already read
        if "config" in d:  # engine-config, its V0 wordings, dump_input's copy
            la.config_line = line
            la.version, la.version_line = d.get("version"), line
            if "speculative" in d:
                la.speculative = d["speculative"]
            la.dp_size = d.get("data_parallel_size", la.dp_size)
            la.tp_size = d.get("tensor_parallel_size", la.tp_size)
            la.phase = "config"
            return
        if rid in ("v0-proposer", "v0-proposer-wrapped"):
            cls = d.get("cls", "")
            row0 = self.k.v0_proposers.get(cls)
            if la.proposer is None or not (row0 and row0.wrapper):
                la.proposer = (cls, line)
            return
        if d.get("method") and la.method_hint is None:
            la.method_hint = (d["method"], line)
        if rid == "api-version":
            la.version, la.version_line = la.version or d["version"], la.version_line or line
            return
        if rid == "non-default-args":
            la.args_line = line
            sc = d["args"].get("speculative_config")
            if isinstance(sc, dict):
                la.spec_args = sc
            if isinstance(d["args"].get("data_parallel_size"), int):
                la.dp_size = d["args"]["data_parallel_size"]
            return
        if rid in ("v2-unsupported", "v2-unsupported-lower", "v2-needs-triton", "v2-needs-triton-lower"):
            la.fallback = obs
            self._set_runner(la, "v1", line, f"'{line.msg.strip()[:100]}'")
            return
        if rid in ("dynamic-sd-off-dp", "dynamic-sd-off-v1"):
            la.dynamic_off = line
            return
        if rid == "runner-source":
            if la.runner is None:
                self._set_runner(la, d["runner"], line, f"line logged by {d['src']}, a file of the {d['runner'].upper()} model runner")
            return
        if rid in ("cudagraph-eager", "cudagraph-mode-resolved", "cudagraph-mode-overridden", "graph-capture-finished"):
            self._on_graphs(la, rid, d, line)
            return
        if rid == "eagle3-aux-layers":
            if la.runner is None:
                self._set_runner(la, "v2", line, "'Using Eagle3 auxiliary layers ...' is logged only by the V2 runner's EAGLE3 loader")
            la.past_config = True
            return
        la.past_config = True
        served = rid in ("ready", "spec-metrics", "spec-metrics-v0") or (row is not None and row.evidence == "served") or (
            rid == "engine-stats" and d.get("gen", 0) > 0)
        if served:
            la.served_line = line
        if la.crash and line.offset > la.crash[2].offset and served:
            la.crash = None  # the server went on: the traceback was not fatal
        la.in_traceback = False
        la.traceback_line = None
        if row is not None and row.phase:
            la.phase = row.phase
        if rid == "ready":
            la.ready = line
        elif rid in ("spec-metrics", "spec-metrics-v0"):
            la.metrics += 1
            la.metrics_line = la.metrics_line or line
            la.last_accept = d.get("accept_len")
        elif rid == "engine-stats" and d.get("gen", 0) > 0:
            la.gen_stats += 1

    @staticmethod
    def _on_graphs(la: VllmLaunch, rid: str, d: dict, line: Line) -> None:
        """The CUDA-graph mode: turned off by --enforce-eager, changed by vLLM, captured."""
        la.past_config = True
        if rid == "cudagraph-eager":
            la.graphs_off = la.graphs_off or line
        elif rid == "graph-capture-finished":
            la.graphs_captured = la.graphs_captured or line
        else:
            la.mode_changes.append((d.get("mode_from"), d.get("mode_to"), d.get("backend"), line))

    # --- judging (verdict/core.py runs the steps, then decides) --------------------------------
    def steps(self):
        return [self.step_release, self.step_speculation, self.step_runner, self.step_knobs, self.step_graphs,
                self.step_marker, self.step_crash]

    def empty_version(self) -> Optional[str]:
        return None  # (an empty log names no release, pinned or not)

    def step_release(self, j: Judging) -> None:
        """Which vLLM release: --engine-version, else the engine config's line; DS606 when the tables lack it."""
        la, k = j.la, self.k
        j.version = self.pinned or la.version
        j.known = k.known(j.version) if j.version else False
        if j.version and not j.known:
            j.add("DS606", f"vllm {j.version} is not in configs/vllm/releases.toml ({k.releases[0]} – {k.releases[-1]}).",
                  line=la.version_line)

    def step_speculation(self, j: Judging) -> None:
        """Is a proposer configured at all, and which method."""
        la = j.la
        j.method = self._method(la)
        if la.speculative is None:
            j.add("DS602", "the engine config shows speculative_config=None: no proposer runs.", line=la.config_line)

    def step_runner(self, j: Judging) -> None:
        """Which model runner runs (V1 or V2) and its proposer; a patch in the other runner is dead (DS601)."""
        la, k, version, known, worker = j.la, self.k, j.version, j.known, j.worker
        method = j.method[0]
        runner, basis = la.runner, la.runner_basis
        if runner is None and known:
            r = k.runner_range(version)
            if r is not None and r.selection == "v2-only":
                runner, basis = "v2", f"vllm {version} has only the V2 model runner"
            elif r is not None and r.selection == "auto" and not r.model_gated and la.past_config and la.fallback is None \
                    and (la.ready or la.metrics):
                runner, basis = "v2", f"vllm {version} defaults to V2 and logged no fallback warning before serving"
        if runner and method and known:
            p = k.proposer(version, runner, method)
            if p is not None:
                worker.update({"class": p.cls, "module": p.module, "basis": basis, "candidates": [p.cls]})
        elif runner:
            worker["basis"] = basis
        if la.proposer is not None and worker["class"] is None:
            cls, line = la.proposer
            worker.update({"class": cls, "basis": f"V0's SpecDecodeWorker proposer at line {line.no or '?'}", "candidates": [cls]})
        worker["runner"] = j.runner = runner
        if la.speculative is not None and runner and self.patched_runners and runner not in self.patched_runners and not la.markers:
            ev = la.runner_line or la.first
            fix = None
            if la.fallback is not None:
                feats = la.fallback.data.get("features")
                fix = (f"V2 falls back to V1 because it does not support: {feats}. Remove that setting, or set "
                       f"VLLM_USE_V2_MODEL_RUNNER=1 to force V2 (at your own risk), or port the patch to "
                       f"{worker['class'] or 'the V1 proposer'} ({worker['module'] or 'vllm/v1/spec_decode/'}).")
            elif runner == "v1" and known and k.runner_range(version) and k.runner_range(version).selection == "env-opt-in":
                fix = f"vllm {version} runs V2 only with VLLM_USE_V2_MODEL_RUNNER=1; set it, or port the patch to {worker['class'] or 'the V1 proposer'}."
            j.add("DS601", f"this launch runs the {runner.upper()} model runner"
                  + (f" ({worker['class']}, {worker['module']})" if worker["class"] else "")
                  + f"; the patch is in the {'/'.join(sorted(r.upper() for r in self.patched_runners))} runner's "
                  + f"{'/'.join(self.patched)}: dead code.", line=ev, fix=fix)
        if la.fallback is not None and la.fallback.id.startswith("v2-needs-triton"):
            j.add("DS607", "V2 needs Triton; vLLM runs V1.", line=la.fallback.line)

    def step_knobs(self, j: Judging) -> None:
        """speculative_config keys this release ignores or rejects, dynamic speculation switched off,
        generation without a SpecDecoding metrics line."""
        la, k, version = j.la, self.k, j.version
        if j.known and la.spec_args:
            for issue in k.knob_issues(version, la.spec_args, {"data_parallel_size": la.dp_size}):
                if issue.status in ("dead", "rejected"):
                    j.add("DS603", f"speculative_config.{issue.key} on vllm {version}: {issue.status}. {issue.note}",
                          line=la.args_line)
        if la.dynamic_off is not None:
            why = "the method is not supported on Model Runner V1" if "Model Runner V1" in la.dynamic_off.msg else "data_parallel_size > 1"
            j.add("DS604", f"dynamic speculation (num_speculative_tokens_per_batch_size) was switched off: {why}.",
                  line=la.dynamic_off)
        if la.speculative not in (None, "unknown") and la.gen_stats >= 2 and la.metrics == 0:
            j.add("DS605", f"{la.gen_stats} engine stats lines show generation, none a SpecDecoding metrics line.")

    def step_graphs(self, j: Judging) -> None:
        """The CUDA-graph mode (the verdict does not depend on it: a benchmark does)."""
        la = j.la
        if la.graphs_off is not None:
            j.add("DS617", "vLLM logged 'Cudagraph is disabled under eager mode' (--enforce-eager): "
                           "the target decodes without CUDA graphs.", line=la.graphs_off)
        for old_mode, new_mode, backend, line in la.mode_changes[:1]:
            by = f" because the {backend} attention backend cannot capture it" if backend else ""
            more = f" ({len(la.mode_changes)} such lines)" if len(la.mode_changes) > 1 else ""
            j.add("DS616", f"vLLM changed cudagraph_mode from {old_mode} to {new_mode}{by}{more}: "
                           f"decode does not run in the graphs the configuration asked for.", line=line)
        j.compute_path = {
            "graphs_disabled": True if la.graphs_off is not None else None,
            "cudagraph_mode_changes": [{"from": a, "to": b, "backend": c, "line": _no(ln)} for a, b, c, ln in la.mode_changes],
            "graphs_captured": True if la.graphs_captured is not None else (False if la.graphs_off is not None else None),
        }

    def step_marker(self, j: Judging) -> None:
        """The feature's marker: in this launch, or only in an earlier one; a ready server without it."""
        la, marker = j.la, j.marker
        if la.markers:
            m0 = la.markers[0]
            marker.update(found=True, line=_no(m0.line), text=m0.line.text, fields=m0.data,
                          ranks=sorted({m.line.rank_label for m in la.markers if m.line.rank_label}))
            j.add("DS302", f"marker logged by this launch ({len(la.markers)} time(s)).", line=m0.line, clip=False)
        elif self.earlier_markers:
            o = self.earlier_markers[-1]
            j.add("DS305", f"the marker was logged by an earlier launch (line {o.line.no}), not by launch {la.index}.",
                  line=o.line, clip=False)
        if la.ready and not la.markers and la.speculative is not None:
            j.add("DS301", "the server is ready and the marker was never logged.", line=la.ready, clip=False)

    def step_crash(self, j: Judging) -> None:
        """The crash. A traceback the file (or the excerpt) ends in, before its exception line, is a
        crash whose exception is unknown, as for sglang."""
        la = j.la
        final = j.at_eof or j.quiet_for >= 1.0
        if la.crash is None and la.in_traceback and la.traceback_line is not None and final:
            la.crash = ("Traceback", "traceback cut off before its exception line", la.traceback_line)
        if la.crash is not None:
            exc, message, line = la.crash
            j.crash = {"exception": exc, "message": message[:500], "line": _no(line), "text": line.text[:500]}
            if final or exc in ("EngineCoreDied",):
                j.crashed = True
                j.add("DS303", f"{exc}: {message[:300]}".rstrip(": "), line=line)

    def is_live(self, j: Judging) -> bool:
        return bool(j.la.markers)

    def missing_evidence(self, j: Judging) -> list[str]:
        missing = []
        if not j.version:
            missing.append("the vLLM release (no 'Initializing a V1 LLM engine (v...)' line yet)")
        if j.runner is None:
            missing.append("which model runner runs (a fallback warning, the V2 EAGLE3 loader line, or a ready server)")
        missing.append(f"the marker ({self.feature.marker.literal!r}) or a ready server")
        return missing

    def assemble(self, j: Judging) -> Verdict:
        la = j.la
        launch = {"index": la.index, "of": len(self.launches), "first_line": _no(la.first), "first_offset": la.first.offset,
                  "phase": "ready" if la.ready else la.phase, "shards": None, "decode_lines": la.metrics,
                  "last_decode": {"accept_len": la.last_accept} if la.last_accept else None}
        return self.make(verdict=j.verdict, engine_version=j.version, speculative_algorithm=j.method[0],
                         overlap_schedule=None, worker=j.worker, server_ready=la.ready is not None,
                         crashed=bool(j.crashed), crash=j.crash, marker=j.marker, findings=j.findings, launch=launch,
                         missing=j.missing, probe=None, claims=_claims(la, j.crashed, j.method, j.worker),
                         model_runner=j.runner, compute_path=j.compute_path)

    def _method(self, la: VllmLaunch) -> tuple[Optional[str], Optional[Line], str]:
        """The speculative method and the line that names it: the engine config, the arguments vLLM
        parsed, V0's proposer (when only one method builds it), a line naming it, the launch command."""
        if isinstance(la.speculative, dict) and la.speculative.get("method"):
            return la.speculative["method"], la.config_line, "the engine config"
        if la.spec_args.get("method"):
            return la.spec_args["method"], la.args_line, "the arguments vLLM parsed (non-default args)"
        if la.proposer is not None:
            row = self.k.v0_proposers.get(la.proposer[0])
            if row is not None and len(row.methods) == 1:
                return row.methods[0], la.proposer[1], f"only {row.methods[0]} builds V0's {row.cls} (proposers.toml)"
        if la.method_hint is not None:
            return la.method_hint[0], la.method_hint[1], "named by vLLM's message"
        requested = _requested_method(la.requested)
        if requested:
            return requested, la.command_line, "requested by the launch command in the log"
        return None, None, ""


def _requested_method(flags: dict) -> Optional[str]:
    """The method a launch command asks for: --speculative-config's "method"; V0's
    --speculative-model "[ngram]"."""
    sc = flags.get("speculative_config")
    if isinstance(sc, dict) and isinstance(sc.get("method"), str):
        return sc["method"]
    return "ngram" if flags.get("speculative_model") == "[ngram]" else None


def _claims(la: VllmLaunch, crashed: bool, method_of: tuple, worker: dict[str, Any]) -> dict[str, Any]:
    """The claims of engines/sglang/claims.py, from the vLLM launch: each proven with its line, or null."""
    if crashed and la.crash is not None:
        c_crashed = claim(True, la.crash[2], f"{la.crash[0]} at line {la.crash[2].no or '?'}")
    else:
        proof = max((x for x in (la.ready, la.served_line) if x is not None and
                     (la.trouble_line is None or x.offset > la.trouble_line.offset)), key=lambda x: x.offset, default=None)
        c_crashed = claim(False, proof, "the server became ready or served requests after the last traceback, "
                                        "and no crash line follows") if proof is not None and la.crash is None else claim(None, None, "")
    if la.ready is not None:
        c_ready = claim(True, la.ready, "the ready line")
    elif crashed and la.served_line is None and la.startup_line is not None:
        c_ready = claim(False, la.startup_line, "the launch crashed while it was starting (this line runs only before ready)")
    else:
        c_ready = claim(None, None, "")
    method, method_line, method_basis = method_of
    c_algo = claim(method, method_line, method_basis) if method else claim(None, None, "")
    wline = la.proposer[1] if la.proposer is not None and worker.get("class") == la.proposer[0] else la.runner_line
    c_worker = claim(worker.get("class"), wline, worker.get("basis") or "") if worker.get("class") else claim(None, None, "")
    requested = la.requested.get("speculative_config") or la.requested.get("speculative_model")
    if la.speculative is None:
        c_spec = claim(False, la.config_line, "the engine config shows speculative_config=None")
    elif isinstance(la.speculative, dict):
        c_spec = claim(True, la.config_line, "the engine config carries a speculative_config")
    elif la.spec_args:
        c_spec = claim(True, la.args_line, "the arguments vLLM parsed carry a speculative_config")
    elif la.metrics or la.spec_line is not None:
        c_spec = claim(True, la.metrics_line or la.spec_line, "a line only a speculating server writes")
    elif requested:
        c_spec = claim(True, la.command_line, "requested by the launch command in the log")
    else:
        c_spec = claim(None, None, "")
    return {"crashed": c_crashed, "server_ready": c_ready, "speculative_algorithm": c_algo, "worker": c_worker,
            "speculative": c_spec}


def _no(line: Optional[Line]) -> Optional[int]:
    return (line.no or None) if line is not None else None
