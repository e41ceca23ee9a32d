"""From vLLM observations to the same Verdict (live / dead / inconclusive / crashed, same exit
codes) as sglang's judge. The engine-specific facts (which runner, which proposer class, which
knobs are dead) come from configs/vllm/ through VllmKnowledge; the verdict policy is the same:
dead outranks crashed, `live` needs the marker."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from dynspec_cli.evidence.lines import Line
from dynspec_cli.evidence.rules import Observation
from dynspec_cli.knowledge.features import Feature
from dynspec_cli.knowledge.findings import Finding, doc
from dynspec_cli.knowledge.vllm import VllmKnowledge
from dynspec_cli.verdict.result import Verdict, claim, clip_text, empty_message, no_claims


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


class VllmJudge:
    engine = "vllm"

    def __init__(self, knowledge: VllmKnowledge, feature: Feature, *, patched_classes: list[str] | None = None,
                 engine_version: str | None = None) -> None:
        self.k = knowledge
        self.feature = feature
        self.patch = list(feature.patch)
        self.patched = patched_classes or [p.cls for p in feature.patch]
        self.pinned = engine_version
        self.launches: list[VllmLaunch] = []
        self.earlier_markers: list[Observation] = []
        # which runner each patched location belongs to (the feature names vLLM files)
        self.patched_runners = {r for r in (self.k.runner_of_module(p.module) for p in self.patch) if r}
        for c in patched_classes or []:
            for row in self.k.proposer_rows_for_class(c):
                self.patched_runners.add(row.runner)

    # --- feeding ----------------------------------------------------------------------------
    def _current(self, line: Line) -> VllmLaunch:
        if not self.launches:
            self.launches.append(VllmLaunch(1, line))
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
            self.launches.append(la)
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

    # --- judging ------------------------------------------------------------------------------
    def verdict(self, *, at_eof: bool = True, quiet_for: float = 0.0, text_lines: int = 0) -> Verdict:
        la = self.launches[-1] if self.launches else None
        empty_marker = {"found": False, "line": None, "text": None, "fields": {}, "ranks": []}
        worker = {"class": None, "module": None, "basis": None, "candidates": []}
        if la is None:
            return self._make("inconclusive", None, None, worker, empty_marker,
                              [Finding("DS304", empty_message(text_lines, "a vLLM server"))],
                              ["any vLLM server line" if text_lines else "any log line"], None, None,
                              {"index": 0, "of": 0})
        k = self.k
        findings: list[Finding] = []
        missing: list[str] = []
        version = self.pinned or la.version
        known = k.known(version) if version else False
        if version and not known:
            findings.append(Finding("DS606", f"vllm {version} is not in configs/vllm/releases.toml ({k.releases[0]} – {k.releases[-1]}).",
                                    line=_no(la.version_line), text=clip_text(la.version_line.text) if la.version_line else None))
        spec = la.speculative
        method, method_line, method_basis = self._method(la)
        if spec is None:
            findings.append(Finding("DS602", "the engine config shows speculative_config=None: no proposer runs.",
                                    line=_no(la.config_line), text=clip_text(la.config_line.text)))
        # Which runner.
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
        worker["runner"] = runner
        if spec is not None and runner and self.patched_runners and runner not in self.patched_runners and not la.markers:
            ev = la.runner_line or la.first
            fix = None
            if la.fallback is not None:
                feats = la.fallback.data.get("features")
                fix = (f"V2 falls back to V1 because it does not support: {feats}. Remove that setting, or set "
                       f"VLLM_USE_V2_MODEL_RUNNER=1 to force V2 (at your own risk), or port the patch to "
                       f"{worker['class'] or 'the V1 proposer'} ({worker['module'] or 'vllm/v1/spec_decode/'}).")
            elif runner == "v1" and known and k.runner_range(version) and k.runner_range(version).selection == "env-opt-in":
                fix = f"vllm {version} runs V2 only with VLLM_USE_V2_MODEL_RUNNER=1; set it, or port the patch to {worker['class'] or 'the V1 proposer'}."
            findings.append(Finding(
                "DS601", f"this launch runs the {runner.upper()} model runner"
                + (f" ({worker['class']}, {worker['module']})" if worker["class"] else "")
                + f"; the patch is in the {'/'.join(sorted(r.upper() for r in self.patched_runners))} runner's "
                + f"{'/'.join(self.patched)}: dead code.", line=_no(ev), text=clip_text(ev.text), fix=fix))
        if la.fallback is not None and la.fallback.id.startswith("v2-needs-triton"):
            findings.append(Finding("DS607", "V2 needs Triton; vLLM runs V1.", line=_no(la.fallback.line), text=clip_text(la.fallback.line.text)))
        # Knobs this release ignores or rejects.
        if known and la.spec_args:
            for issue in k.knob_issues(version, la.spec_args, {"data_parallel_size": la.dp_size}):
                if issue.status in ("dead", "rejected"):
                    findings.append(Finding("DS603", f"speculative_config.{issue.key} on vllm {version}: {issue.status}. {issue.note}",
                                            line=_no(la.args_line), text=clip_text(la.args_line.text) if la.args_line else None))
        if la.dynamic_off is not None:
            why = "the method is not supported on Model Runner V1" if "Model Runner V1" in la.dynamic_off.msg else "data_parallel_size > 1"
            findings.append(Finding("DS604", f"dynamic speculation (num_speculative_tokens_per_batch_size) was switched off: {why}.",
                                    line=_no(la.dynamic_off), text=clip_text(la.dynamic_off.text)))
        if spec not in (None, "unknown") and la.gen_stats >= 2 and la.metrics == 0:
            findings.append(Finding("DS605", f"{la.gen_stats} engine stats lines show generation, none a SpecDecoding metrics line."))
        # The CUDA-graph mode (the verdict does not depend on it: a benchmark does).
        if la.graphs_off is not None:
            findings.append(Finding("DS617", "vLLM logged 'Cudagraph is disabled under eager mode' (--enforce-eager): "
                                             "the target decodes without CUDA graphs.", line=_no(la.graphs_off),
                                    text=clip_text(la.graphs_off.text)))
        for old_mode, new_mode, backend, line in la.mode_changes[:1]:
            by = f" because the {backend} attention backend cannot capture it" if backend else ""
            more = f" ({len(la.mode_changes)} such lines)" if len(la.mode_changes) > 1 else ""
            findings.append(Finding("DS616", f"vLLM changed cudagraph_mode from {old_mode} to {new_mode}{by}{more}: "
                                             f"decode does not run in the graphs the configuration asked for.",
                                    line=_no(line), text=clip_text(line.text)))
        compute_path = {
            "graphs_disabled": True if la.graphs_off is not None else None,
            "cudagraph_mode_changes": [{"from": a, "to": b, "backend": c, "line": _no(ln)} for a, b, c, ln in la.mode_changes],
            "graphs_captured": True if la.graphs_captured is not None else (False if la.graphs_off is not None else None),
        }
        # The marker.
        marker = dict(empty_marker)
        if la.markers:
            m0 = la.markers[0]
            marker.update(found=True, line=_no(m0.line), text=m0.line.text, fields=m0.data,
                          ranks=sorted({m.line.rank_label for m in la.markers if m.line.rank_label}))
            findings.append(Finding("DS302", f"marker logged by this launch ({len(la.markers)} time(s)).", line=_no(m0.line), text=m0.line.text))
        elif self.earlier_markers:
            o = self.earlier_markers[-1]
            findings.append(Finding("DS305", f"the marker was logged by an earlier launch (line {o.line.no}), not by launch {la.index}.", line=_no(o.line), text=o.line.text))
        if la.ready and not la.markers and spec is not None:
            findings.append(Finding("DS301", "the server is ready and the marker was never logged.", line=_no(la.ready), text=la.ready.text))
        # The crash. A traceback the file (or the excerpt) ends in, before its exception line, is a
        # crash whose exception is unknown, as for sglang.
        if la.crash is None and la.in_traceback and la.traceback_line is not None and (at_eof or quiet_for >= 1.0):
            la.crash = ("Traceback", "traceback cut off before its exception line", la.traceback_line)
        crash, crashed = None, False
        if la.crash is not None:
            exc, message, line = la.crash
            crash = {"exception": exc, "message": message[:500], "line": _no(line), "text": line.text[:500]}
            if at_eof or quiet_for >= 1.0 or exc in ("EngineCoreDied",):
                crashed = True
                findings.append(Finding("DS303", f"{exc}: {message[:300]}".rstrip(": "), line=_no(line), text=clip_text(line.text)))
        # the verdict policy is configs/findings.toml's (`verdict.log`), as for sglang
        dead = any(doc(f.code).verdict.get("log") == "dead" for f in findings)
        if dead:
            v = "dead"
        elif crashed:
            v = "crashed"
        elif la.markers:
            v = "live"
        else:
            v = "inconclusive"
            if not version:
                missing.append("the vLLM release (no 'Initializing a V1 LLM engine (v...)' line yet)")
            if runner is None:
                missing.append("which model runner runs (a fallback warning, the V2 EAGLE3 loader line, or a ready server)")
            missing.append(f"the marker ({self.feature.marker.literal!r}) or a ready server")
            findings.append(Finding("DS304", "missing: " + "; ".join(missing) + "."))
        findings.sort(key=lambda f: ({"error": 0, "warning": 1, "info": 2}[f.severity], f.code))
        launch = {"index": la.index, "of": len(self.launches), "first_line": _no(la.first), "first_offset": la.first.offset,
                  "phase": "ready" if la.ready else la.phase, "shards": None, "decode_lines": la.metrics,
                  "last_decode": {"accept_len": la.last_accept} if la.last_accept else None}
        return self._make(v, version, method, worker, marker, findings, missing, crash, crashed, launch,
                          ready=la.ready is not None, runner=runner,
                          claims=_claims(la, crashed, (method, method_line, method_basis), worker), compute_path=compute_path)

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

    def _make(self, v, version, method, worker, marker, findings, missing, crash, crashed, launch, *, ready=False,
              runner=None, claims=None, compute_path=None):
        return VllmVerdict(verdict=v, feature=self.feature.name, engine="vllm", engine_version=version,
                           speculative_algorithm=method, overlap_schedule=None, worker=worker, server_ready=ready,
                           crashed=bool(crashed), crash=crash, marker=marker, findings=findings, launch=launch,
                           missing=missing, probe=None, claims=claims or no_claims(), model_runner=runner,
                           compute_path=compute_path)

    def decided(self, v: Verdict, *, quiet_for: float = 0.0) -> bool:
        return v.verdict in ("dead", "crashed", "live")

    def exited(self, v: Verdict) -> Verdict:
        """The server process is gone before it became ready: the launch crashed."""
        la = self.launches[-1] if self.launches else None
        return v.died("ProcessExited", "the server process exited", la.last_line if la else None,
                      "the server process exited before it became ready.")


def _requested_method(flags: dict) -> Optional[str]:
    """The method a launch command asks for: --speculative-config's "method"; V0's
    --speculative-model "[ngram]"."""
    sc = flags.get("speculative_config")
    if isinstance(sc, dict) and isinstance(sc.get("method"), str):
        return sc["method"]
    return "ngram" if flags.get("speculative_model") == "[ngram]" else None


def _claims(la: VllmLaunch, crashed: bool, method_of: tuple, worker: dict[str, Any]) -> dict[str, Any]:
    """The claims of verdict/claims.py, from the vLLM launch: each proven with its line, or null."""
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
