"""sglang's judge: from a launch's state to a verdict.

`Reader` (launch.py) splits the log into launches and keeps each launch's state; the judge judges
the newest one with the steps below, run by the one judge core (verdict/core.py). The verdict is
recomputed cheaply after every batch of lines, so `--follow` can stop the moment it is decided."""
from __future__ import annotations

from typing import Any, Optional

from dynspec_cli.engines.sglang import claims, compute_path, workers
from dynspec_cli.engines.sglang.knowledge import Knowledge
from dynspec_cli.engines.sglang.launch import Launch, Reader
from dynspec_cli.evidence.lines import Line
from dynspec_cli.evidence.observation import Observation
from dynspec_cli.knowledge.features import Feature
from dynspec_cli.knowledge.findings import Finding, forced_verdict
from dynspec_cli.verdict import core
from dynspec_cli.verdict.codes import ACCEPT_EPS
from dynspec_cli.verdict.result import Verdict, clip_text

# Decode batch lines served with the probe watching the diff's behaviour hunks and none of them ever
# executed (nor its function called) before the verdict is dead (DS325). A behaviour hunk in a draft or
# verify method runs on every speculative decode pass, and its `hunk` line is written by the scheduler
# itself before that pass's Decode batch line (same process, same fd 2), so one line would do for one
# rank; 3 lines (120 decode passes at sglang's default --decode-log-interval 40) leave room for the
# lines of other ranks interleaving and match INEFFECTIVE_LINES.
DEAD_HUNK_DECODE_LINES = 3
INEFFECTIVE_LINES = 3  # Decode batch lines where speculation should be on, all at ~1.00, before DS314


class Judging(core.Judging):
    """What sglang's steps find besides the core's findings, worker, marker and crash."""

    mask: int = 0
    version_text: Optional[str] = None
    algos: Optional[set] = None
    spec_off: bool = False
    analysis: Optional[workers.WorkerAnalysis] = None
    probe: Optional[dict[str, Any]] = None
    stopped: Optional[dict[str, Any]] = None
    effect: Any = None  # decision.Effect: what the Decode batch lines say of the feature at work
    silent: bool = False  # the announcement was silent and the effect speaks for it (DS322 added)
    behaviour_runs: Optional[str] = None  # a behaviour hunk of the run's diff found reachable
    compute_path: Optional[dict[str, Any]] = None


class Judge(core.Core):
    """Fed observations in log order; judges the newest launch."""

    name = "sglang"
    version_key = "sglang_version"
    server_noun = "an sglang server"
    server_line = "any sglang server line"
    exited_finding = "the server process exited before it was ready."
    judging = Judging

    def __init__(self, knowledge: Knowledge, feature: Feature, *, patched_classes: list[str] | None = None,
                 sglang_version: str | None = None, diff: Optional[dict] = None) -> None:
        self.k = knowledge
        self.feature = feature
        # the diff given for this log (engines/protocol.py Engine.judge): {"hunks": [...]}, the run record's,
        # as preflight judged each hunk on the server's own interpreter (file, class, function, lines, role,
        # reach); or {"text": ...} (`verify --patch`), placed here against the worker the log shows
        self.hunks = (diff or {}).get("hunks") or None
        self.diff_text = (diff or {}).get("text")
        self.patched = patched_classes or [p.cls for p in feature.patch]
        self.patched_methods = {p.cls: p.function for p in feature.patch}  # class -> the patched method
        self.pinned = sglang_version
        self.pinned_mask = knowledge.mask_of(sglang_version) if sglang_version else None
        self.reader = Reader(knowledge, feature)

    def feed(self, obs: Observation) -> None:
        self.reader.feed(obs)

    @property
    def launches(self) -> list[Launch]:
        return self.reader.launches

    # --- judging (verdict/core.py runs the steps, then decides) ------------------------------
    def steps(self):
        return [self.step_release, self.step_speculation, self.step_flag, self.step_worker,
                self.step_effect_evidence, self.step_patch, self.step_method, self.step_settings, self.step_feature_dead,
                self.step_marker, self.step_probe, self.step_threshold, self.step_effect, self.step_compute_path,
                self.step_ready, self.step_crash]

    def assemble(self, j: "Judging") -> Verdict:
        la = j.la
        return self.make(
            verdict=j.verdict, engine_version=j.version_text,
            speculative_algorithm=la.config.algorithm, overlap_schedule=la.config.overlap, worker=j.worker,
            server_ready=la.life.ready is not None, crashed=j.crashed, crash=j.crash, marker=j.marker,
            findings=j.findings, missing=j.missing, probe=j.probe,
            launch={"index": la.index, "of": len(self.launches), "first_line": la.first.no or None,
                    "first_offset": la.first.offset, "phase": "ready" if la.life.ready else la.life.phase,
                    "shards": la.life.shards, "decode_lines": la.decoding.lines,
                    "last_decode": la.decoding.last or None},
            claims=claims.build(self.k, la, j.mask, crashed=j.crashed, worker=j.worker, algorithm=la.config.algorithm,
                                spec_off=j.spec_off),
            requested=claims.requested_vs_effective(la), stopped=j.stopped, evidence=self._evidence(j),
            compute_path=j.compute_path,
        )

    # --- the steps of a verdict (each reads the launch, adds to `j`) ----------------------
    def step_release(self, j: "Judging") -> None:
        """Which sglang releases the evidence allows: the log's lines, --sglang-version, the probe."""
        k, la = self.k, j.la
        mask = la.release.mask
        if self.pinned is not None:
            if self.pinned_mask == 0:
                j.add("DS307", f"sglang {self.pinned} is not in dynspec's tables ({k.releases[0]} – {k.releases[-1]}); version-specific conclusions are withheld.")
                mask = 0
            else:
                if la.release.mask & self.pinned_mask == 0:
                    j.add("DS308", f"--sglang-version {self.pinned} contradicts the log, whose lines come from {k.span(la.release.mask)}.", line=la.release.notes[-1][0] if la.release.notes else None, text=False)
                mask = self.pinned_mask
        if self.pinned is None and la.probe.version and k.mask_of(la.probe.version):
            mask = k.mask_of(la.probe.version)  # the server's own process said which sglang it imported
        if la.release.conflict is not None:
            j.add("DS308", f"this line does not fit the releases the earlier lines point to ({k.span(la.release.mask)}).", line=la.release.conflict, clip=False)
        j.mask = mask
        version = k.single(mask) if mask else None
        j.version_text = version or (k.span(mask) if mask and mask != k.all else None)

    def step_speculation(self, j: "Judging") -> None:
        """Is speculative decoding on at all?"""
        la = j.la
        j.algos = {la.config.algorithm} if la.config.algorithm else la.config.algorithms
        j.algos = j.algos or claims.requested_algorithms(self.k, la)  # nothing sglang wrote says: the pasted command
        j.mask, j.version_text = claims.narrow_by_loop(self.k, la, j.mask, j.algos, j.version_text)  # the loop that ran
        j.spec_off = la.config.spec_off_line is not None or (la.decoding.lines >= 2 and la.decoding.with_accept == 0 and not j.algos)
        if la.config.spec_off_line is not None:
            j.add("DS102", "server_args shows speculative_algorithm=None: speculative decoding is off, so no speculative worker runs.", line=la.config.spec_off_line)
        elif j.spec_off:
            j.add("DS102", f"{la.decoding.lines} 'Decode batch' lines carry no 'accept len': speculative decoding is off.", line=la.last_line, text=False)
        elif la.decoding.lines >= 2 and la.decoding.with_accept == 0:
            j.add("DS309", f"{la.decoding.lines} 'Decode batch' lines carry no 'accept len'.")

    def step_flag(self, j: "Judging") -> None:
        """Did sglang accept the feature's flag?"""
        la = j.la
        if la.life.flag_rejected is not None:
            j.add("DS101", f"sglang rejected {self.feature.flag.name}: this sglang does not have the patch to server_args.", line=la.life.flag_rejected, clip=False)

    def step_worker(self, j: "Judging") -> None:
        """Which worker class runs, and is a patched class (or a subclass of one) among it?"""
        k, la, mask = self.k, j.la, j.mask
        worker = j.worker
        analysis = None
        patched_absent = []
        if mask and not j.spec_off:
            for p in self.patched:
                if k.class_mask(p) and not (k.class_mask(p) & mask):
                    patched_absent.append(p)
            if la.config.overlap is not None or j.algos:
                seen = {o.id for o in la.config.warnings}
                analysis = workers.analyze(k, mask, j.algos, la.config.overlap, la.config.multi_layer, self.patched,
                                           fits=lambda v, a: all(k.warning_fits(v, a, w) for w in seen),
                                           methods=self.patched_methods)
                worker["candidates"] = sorted({c.cls for c in analysis.candidates})
                if analysis.display:
                    worker["class"] = analysis.display.cls
                    worker["module"] = f"sglang.srt.speculative.{analysis.display.module}"
                    worker["basis"] = self._basis(la, mask, analysis)
        j.analysis = analysis
        if la.frames and not worker["class"]:
            mods = sorted(la.frames)
            classes = [c.name for c in k.classes if c.module in mods and not c.name.endswith("DraftWorker")]
            if len(mods) == 1 and classes:
                first = la.frames[mods[0]]
                worker.update({"class": classes[0] if len(classes) == 1 else None, "module": f"sglang.srt.speculative.{mods[0]}",
                               "basis": f"traceback frame in {mods[0]}.py at line {first.no or '?'}",
                               "candidates": classes})
        # frames are code that ran: they outweigh the dispatch tables
        analysis = j.analysis = claims.worker_from_frames(k, la, 0 if j.spec_off else mask, worker, analysis, self.patched)
        for p in patched_absent:
            mod = k.module_of_class(p)
            j.add("DS202", f"{p} ({mod}.py) does not exist in sglang {j.version_text or k.span(mask)}; the patch cannot run.", line=la.first, text=False)
        if analysis is not None and analysis.patched_on_path is False and not la.markers:
            steps, exceptions = workers.how_to_run(k, mask, j.algos, self.patched)
            running = worker["class"] or " / ".join(worker["candidates"])
            fix_parts = []
            if steps:
                fix_parts.append("To run " + "/".join(self.patched) + f" on {j.version_text or k.span(mask)}: " + "; ".join(steps) + ".")
            if exceptions:
                fix_parts.append("No setting runs it for " + ", ".join(exceptions) + ".")
            if worker["class"]:
                fix_parts.append(f"Or port the patch to {worker['class']} ({worker['module'].rsplit('.', 1)[-1]}.py).")
            ev = la.config.overlap_line or la.config.algorithm_line or la.first
            j.add("DS201",
                  f"this launch runs {running}{' (or a subclass)' if worker['class'] and len(worker['candidates']) > 1 else ''}, "
                  f"not {' / '.join(self.patched)}: the patch is dead code.",
                  line=ev, fix=" ".join(fix_parts) or None)
        elif analysis is not None and analysis.patched_on_path is None and not la.markers:
            j.add("DS203", f"candidates so far: {', '.join(worker['candidates']) or 'none'}.")

    def step_settings(self, j: "Judging") -> None:
        """Settings that silently change the outcome."""
        la = j.la
        if "SGLANG_ENABLE_SPEC_V2" in la.config.env_set:
            line = la.config.env_set["SGLANG_ENABLE_SPEC_V2"]
            if "spec-v2-env-removed" in {o.id for o in la.config.warnings}:
                j.add("DS104", "sglang logged that SGLANG_ENABLE_SPEC_V2 has been removed; it changes nothing here.", line=line)
        for o in la.config.warnings:
            if o.id == "spec-v1-used" and "topk" in (o.data.get("reason") or ""):
                j.add("DS106", "sglang fell back to the V1 worker because speculative_eagle_topk > 1.", line=o.line)
            if o.id == "spec-v2-topk-error":
                j.add("DS107", "argument resolution raised: spec v2 supports only topk = 1 on this release.", line=o.line)

    def step_patch(self, j: "Judging") -> None:
        """The run's diff decides, not the marker's method (issue 29): every hunk in server_args.py
        (DS228) or every behaviour hunk out of reach (DS226) is dead whatever the marker says; a
        reachable behaviour hunk keeps an overridden announcement from calling the patch dead."""
        entries = self.hunks or self._placed(j)
        if not entries:
            return
        from dynspec_cli.engines.sglang import hunks

        behaviour = [h for h in entries if hunks.is_behaviour(h)]
        line = j.la.config.algorithm_line or j.la.first
        if all(hunks.in_flag_file(str(h.get("file") or "")) for h in entries):
            j.add("DS228", "every hunk of the run's diff is in server_args.py (flags, argument handling, perhaps the "
                           "announcement): nothing in the workers acts on the flag while decoding, so the marker proves "
                           "only that the flag was parsed.", line=line, text=False)
        elif hunks.summary(entries) == hunks.NOT_REACHABLE:  # (None: no behaviour hunk, the marker decides)
            j.add("DS226", "no hunk of the run's diff that acts is on the path of the workers this launch runs (each hunk's "
                           "class and function against them, their draft worker and overrides): " + "; ".join(hunks.where(h) for h in behaviour) + ".", line=line, text=False)
        else:
            j.behaviour_runs = next((hunks.where(h) for h in behaviour if h.get("reach") == hunks.REACHABLE), None)
            marks = [h for h in entries if h.get("role") == "marker"]
            if j.behaviour_runs and marks and all(h.get("reach") == hunks.NOT_REACHABLE for h in marks):
                j.add("DS225", f"the patch's behaviour runs ({j.behaviour_runs}) but its announcement will be silent: "
                               + "; ".join(hunks.where(h) + (f": {h['reason']}" if h.get("reason") else " is not on the path of "
                                                       "the workers this launch runs") for h in marks) + ".",
                      line=j.la.config.overlap_line or line, clip=False)

    def _placed(self, j: "Judging") -> Optional[list[dict]]:
        """verify --patch: each hunk of the diff, mapped onto the sglang this interpreter imports, against
        the worker the log shows; with no sglang here, the hunks from the text alone."""
        if self.diff_text is None:
            return None
        from dynspec_cli.engines.sglang import hunks
        from dynspec_cli.engines.sglang.diffclasses import analysed
        from dynspec_cli.verdict.diffclasses import unjudged

        diff = analysed(self.diff_text, self.feature.marker.literal)
        if diff is None:
            return unjudged(self.diff_text)
        version = self.k.single(j.mask) if j.mask else None
        worker = j.worker.get("class")
        run = hunks.running(self.k, version, worker, j.worker.get("basis") or "the log") if version and worker else None
        return hunks.judge(diff, self.k, run, plugin=self.feature.plugin is not None)

    def step_method(self, j: "Judging") -> None:
        """The patched class is in the MRO, but an override on the way never calls the patched method."""
        a = j.analysis
        if a is None or not a.candidates or j.la.markers or len(a.method_blocked) != len(a.candidates):
            return
        patched, method, by = next(iter(a.method_blocked.values()))
        running = " / ".join(sorted({c.cls for c in a.method_blocked}))
        if j.behaviour_runs:  # the announcement's method is skipped; the diff's behaviour is not (case c)
            if any(f.code == "DS225" for f in j.findings):
                return
            j.add("DS225", f"the patch's behaviour runs ({j.behaviour_runs}) but its announcement will be silent: this "
                           f"launch runs {running}, whose {by}.{method} does not call {patched}.{method}.",
                  line=j.la.config.overlap_line or j.la.config.algorithm_line or j.la.first)
            return
        if self._effect_visible(j):  # the method that announces never runs; the behaviour does
            self._silent(j, f"this launch runs {running}: {by}.{method} does not call {patched}.{method}, so the "
                            f"marker logged there never runs")
            return
        j.add("DS211", f"this launch runs {running}: {by}.{method} does not call {patched}.{method} "
                       f"(sglang {j.version_text or self.k.span(j.mask)}), so the patch in it never runs.",
              line=j.la.config.overlap_line or j.la.config.algorithm_line or j.la.first,
              fix=f"Put the patch in {by}.{method} (or in a method {by} does call).")

    def step_feature_dead(self, j: "Judging") -> None:
        """sglang switched the feature off itself (a `dead_when` line of the feature file)."""
        if j.la.feature_dead:
            o = j.la.feature_dead[0]
            why = o.data.get("reason")
            j.add("DS112", f"sglang disabled {self.feature.name}" + (f": {why}." if why else "."), line=o.line, clip=False)

    def step_marker(self, j: "Judging") -> None:
        """The feature's marker: in this launch, on every rank, or only in an earlier launch."""
        la, marker = j.la, j.marker
        if la.markers:
            m0 = la.markers[0]
            marker.update(found=True, line=m0.line.no or None, text=m0.line.text, fields=m0.data,
                          ranks=sorted({o.line.rank_label for o in la.markers if o.line.rank_label}))
            j.add("DS302", f"marker logged by this launch ({len(la.markers)} time(s)).", line=m0.line, clip=False)
            if la.config.tp_size and la.config.tp_size > 1 and marker["ranks"] and len(marker["ranks"]) < la.config.tp_size and la.life.ready:
                j.add("DS306", f"marker seen on {len(marker['ranks'])} of {la.config.tp_size} TP ranks ({', '.join(marker['ranks'])}).")
        elif self.reader.earlier_markers:
            o = self.reader.earlier_markers[-1]
            j.add("DS305", f"the marker was logged by an earlier launch (line {o.line.no}), not by launch {la.index}.", line=o.line, clip=False)

    def step_probe(self, j: "Judging") -> None:
        """The in-server probe: the strongest evidence there is."""
        j.probe = self._probe_findings(j.la, j.findings, j.worker, version=self.k.single(j.mask) if j.mask else None)

    def step_threshold(self, j: "Judging") -> None:
        self._threshold(j.la, j.marker, j.findings)

    def step_effect_evidence(self, j: "Judging") -> None:
        """The feature's behaviour in the Decode batch lines: speculation on/off by running batch against the
        threshold, decided as `prove` decides it (verdict/decision.py). Speculating above the threshold on a
        decided batch contradicts the feature, whatever the marker says (DS321)."""
        la, f = j.la, self.feature
        if j.spec_off or not la.decoding.by_rank:
            return
        th, source = self._threshold_value(la)
        e = j.effect = la.decoding.effect(th, f.expect.speculate_at_or_below_threshold, source)
        if e.state != "contradicted":
            return
        lb, g, lines = max(e.against, key=lambda x: (len(x[2]), x[1].running))
        nos = [d.no for d in lines if d.no is not None]
        shown = ", ".join(map(str, nos[:5])) + (f", … (lines {nos[0]}–{nos[-1]})" if len(nos) > 5 else "")
        where = f"{len(lines)} steady Decode batch lines at running batch {g.running} (> threshold {th}, from the " \
                f"{source}){' on ' + lb if lb else ''}" + (f", lines {shown}," if nos else "")
        others = [f"{o.running} ({len(ds)} lines)" for _, o, ds in e.against if o is not g]
        if others:
            where += f" and at running batch {', '.join(others)}"
        ran = "the marker ran, but the behaviour did not" if la.markers else "the behaviour did not run"
        j.add("DS321", f"{where} show accept len {g.accept_len:.2f}: speculation stayed on where the feature turns it "
                       f"off, so {ran} (its hunk sits in a class or method this launch does not run, or its condition "
                       f"never holds).", line=(_line_of(lines[0]) if lines else None) or la.last_line)

    def step_effect(self, j: "Judging") -> None:
        """The feature's code runs (its marker) but speculation accepts nothing: accept len ~1.00 on
        every Decode batch line at a running batch where speculation should be on (at or below the
        marker's threshold, for a feature that promises speculation there; every batch otherwise).
        (Not prove's on/off decision, on purpose: this asks whether any draft token was accepted at all, so
        one line that accepted some keeps it live; step_effect_evidence asks what prove asks.)"""
        la, f = j.la, self.feature
        if not la.markers or not la.decoding.accept_by_batch:
            return
        th = None
        if f.threshold is not None:
            try:
                th = int(la.markers[0].data.get(f.threshold.field))
            except (TypeError, ValueError):
                th = None
        if th is not None and not f.expect.speculate_at_or_below_threshold:
            return  # no promise of speculation anywhere
        on = {b: v for b, v in la.decoding.accept_by_batch.items() if th is None or b <= th}
        lines = sum(n for n, _ in on.values())
        top = max((m for _, m in on.values()), default=0.0)
        if lines >= INEFFECTIVE_LINES and top <= 1 + ACCEPT_EPS:
            where = f"at running batch {_batches(sorted(on))} (<= threshold {th})" if th is not None else \
                f"at every running batch ({_batches(sorted(on))})"
            j.add("DS314", f"{lines} Decode batch lines {where} show accept len <= {top:.2f}: the feature's code "
                           f"runs, but speculation accepts no draft token.", line=la.last_line, text=False)

    def step_compute_path(self, j: "Judging") -> None:
        """CUDA graphs captured and used, by running batch (compute_path.py): findings of
        their own, the verdict unchanged."""
        if j.spec_off and not j.la.decoding.graph_by_batch:
            return
        j.compute_path = compute_path.judge(self.k, j.la, j.mask, j.add, speculative=bool(j.la.config.algorithm or j.algos))

    def step_ready(self, j: "Judging") -> None:
        """A ready server that never logged the marker ran other code."""
        la = j.la
        if la.life.ready and not la.markers and not j.spec_off and la.life.flag_rejected is None:
            if self._effect_visible(j):
                if not j.silent:
                    self._silent(j, "the server is ready and the marker was never logged")
                return
            if j.behaviour_runs and any(f.code == "DS225" for f in j.findings):
                return  # the announcement cannot log (DS225 says why); the diff's behaviour and the probe decide
            j.add("DS301", "the server is ready and the marker was never logged.", line=la.life.ready, clip=False)

    def step_crash(self, j: "Judging") -> None:
        """A crash counts once it is final: a decisive line, the end of the file, or a quiet log."""
        la, at_eof, quiet_for = j.la, j.at_eof, j.quiet_for
        la.life.close_open_traceback(la.ev.trouble_line, at_eof=at_eof, quiet_for=quiet_for)
        if la.life.crash and not la.life.progress_after_crash:
            c = la.life.crash
            j.crash = {"exception": c.exception, "message": c.message[:500], "line": c.line.no or None,
                       "text": c.line.text[:500]}
            if c.decisive or at_eof or quiet_for >= 1.0:
                j.crashed = True
                j.add("DS303", f"{c.exception}: {c.message[:300]}".rstrip(": "), line=c.line)
        stop = la.life.stop
        if stop is not None:  # a stop is no crash: the verdict stays what the rest of the log says
            j.stopped = stop.to_json()
            ended = "; ".join(e.describe() for e in stop.exits)
            j.add("DS320", f"the server was stopped: {stop.signal} received (sglang drains its requests and shuts down)"
                           + (f"; {ended}: the stop, not a crash." if ended else "."), line=stop.line, clip=False)

    def is_live(self, j: "Judging") -> bool:
        """`live` needs the marker (and, with the probe on, its proof from every scheduler rank), or
        the probe's proof that the diff's behaviour ran, or the behaviour in the Decode batch lines."""
        la = j.la
        if la.markers and (j.probe is None or j.probe["proven"]):
            return True
        if j.probe is not None and (j.probe.get("hunks") or {}).get("live"):
            return True  # the diff's behaviour ran on every scheduler rank, the marker silent (DS323)
        # the behaviour, seen in the Decode batch lines, with the announcement silent
        return j.silent and (j.probe is None or j.probe["proven"] or not j.probe["instrumented"])

    def missing_evidence(self, j: "Judging") -> list[str]:
        la, k, mask = j.la, self.k, j.mask
        missing = []
        if mask == 0 or mask == k.all:
            missing.append("the sglang release (no version-specific line yet; pass --sglang-version)")
        if j.analysis is None or j.analysis.display is None:
            missing.append("which worker class runs (the launcher's speculative warnings or the server_args= line)")
        if la.markers and j.probe is not None and not j.probe["proven"]:
            missing.append("the probe's proof that the patched code ran on every scheduler rank")
        else:
            missing.append(f"the marker ({self.feature.marker.literal!r}) or a ready server")
        return missing

    def decided(self, v: Verdict, *, quiet_for: float = 0.0) -> bool:
        """True when more log lines cannot change the verdict of this launch: a live marker on
        fewer TP ranks than the launch has waits for the ready line."""
        if v.verdict in ("dead", "crashed"):
            return True
        if v.verdict in ("live", "ineffective"):  # ineffective: live code that accepts nothing
            la = self.launches[-1]
            if la.config.tp_size and la.config.tp_size > 1 and len(v.marker["ranks"]) < la.config.tp_size and v.marker["ranks"]:
                return la.life.ready is not None
            return True
        return False

    def _threshold_value(self, la: Launch) -> tuple[Optional[int], Optional[str]]:
        """The feature's threshold, from the code that ran (its marker), else the resolved server_args, else
        the command dynspec launched (prove reads the same two, evidence/argv.py int_flag)."""
        th = self.feature.threshold
        if th is None:
            return None, None
        for value, source in ((la.markers[0].data.get(th.field) if la.markers else None, "marker"),
                              (la.config.dump.get(th.arg), "server_args line")):
            try:
                if value is not None:
                    return int(value), source
            except (TypeError, ValueError):
                pass
        argv = la.config.header.get("argv") if isinstance(la.config.header, dict) else None
        if self.feature.flag and isinstance(argv, list):
            from dynspec_cli.evidence.argv import int_flag

            try:
                n = int_flag(argv, self.feature.flag.name)
            except ValueError:
                n = None
            if n is not None:
                return n, "launch command"
        return None, None

    def _effect_visible(self, j: "Judging") -> bool:
        return j.effect is not None and j.effect.state == "visible"

    def _silent(self, j: "Judging", why: str) -> None:
        e = j.effect
        j.silent = True
        j.add("DS322", f"{why}; yet the Decode batch lines show the feature at work: speculation on at running batch "
                       f"{_batches([b for b in e.on if b <= e.threshold])} and off at "
                       f"{_batches([b for b in e.off if b > e.threshold])} (threshold {e.threshold}, from the "
                       f"{e.source}). The announcement is silent: judge this patch by its effect (prove) or the probe.",
              line=j.la.life.ready or j.la.last_line, clip=False)

    def _evidence(self, j: "Judging") -> dict[str, Any]:
        """The kinds of evidence the verdict rests on, each with what it says."""
        la = j.la
        marker = "logged" if la.markers else "earlier launch" if self.reader.earlier_markers else "not logged"
        e = j.effect
        effect = e.to_json() if e is not None else {"state": "none", "threshold": None, "threshold_from": None}
        basis = []
        if j.verdict == "live":
            basis = (["marker"] if la.markers else []) + (["effect"] if e is not None and e.state == "visible" else [])
            if j.probe is not None and j.probe["proven"] and j.probe["instrumented"]:
                basis.append("probe")
        elif j.verdict == "dead" and e is not None and e.state == "contradicted":
            basis = ["effect"]
        return {"marker": marker, "effect": effect, "verdict_from": basis}

    def _drafts_patched(self, w: dict, version: Optional[str]) -> bool:
        """Whether a patched class the probe reported outside the worker's MRO is in the MRO of the
        draft worker that worker builds (case a of issue 29: the patch in `EagleDraftWorker.draft`,
        which `EAGLEWorkerV2.__init__` builds, is on the path though no worker class holds it)."""
        running = (w.get("class") or "").rsplit(".", 1)[-1]
        if version is None or not running:
            return False
        draft = self.k.draft_of(version, running)  # (the worker's own MRO: the probe's, as it ran)
        mro = set(self.k.mro(version, draft)) if draft else set()
        return any(x.get("class") in mro for x in w.get("patched_in_mro") or [])

    def _probe_findings(self, la: Launch, findings: list[Finding], worker: dict[str, Any],
                        version: Optional[str] = None) -> Optional[dict[str, Any]]:
        pr = la.probe
        if not pr.seen:
            return None
        ranks = []
        for p in sorted(pr.procs.values(), key=lambda p: (str(p["rank"]), p["pid"] or 0)):
            if p["role"] in ("scheduler",) or p["worker"] or p["hits"]:
                ranks.append({"pid": p["pid"], "role": p["role"], "rank": p["rank"],
                              "worker": (p["worker"] or {}).get("class"), "hits": p["hits"], "loaded": p["loaded"]})
        if pr.unpatched_worker is not None and not self._drafts_patched(pr.unpatched_worker[0], version):
            w, line = pr.unpatched_worker
            findings.append(Finding("DS310", f"process reported {w.get('class')} ({w.get('module')}); MRO {' > '.join(w.get('mro') or [])} holds no patched class.",
                                    line=line.no or None, text=clip_text(line.text)))
            worker.update({"class": (w.get("class") or "").rsplit(".", 1)[-1] or worker["class"], "module": w.get("module"),
                           "basis": "probe: the server's own process"})
        elif any(r["worker"] for r in ranks):
            w = next(p["worker"] for p in pr.procs.values() if p["worker"])
            worker.update({"class": (w.get("class") or "").rsplit(".", 1)[-1], "module": w.get("module"),
                           "basis": "probe: the server's own process"})
        if pr.other_file is not None:
            t, line = pr.other_file
            findings.append(Finding("DS311", f"target {t.get('function') or t.get('target')}: patch in {t.get('file')}, module loaded from {t.get('module_file')}.",
                                    line=line.no or None, text=clip_text(line.text)))
        scheds = [r for r in ranks if r["role"] == "scheduler" or r["worker"]]
        without = [r for r in scheds if not r["hits"]]
        proven = bool(pr.instrumented and scheds and not without) or (not pr.instrumented and bool(la.markers))
        hunks = self._hunk_findings(la, findings, scheds) if pr.behaviour_hunks else None
        if hunks is not None:  # the diff's behaviour hunks decide, not the marker's method
            proven = hunks["live"]
            without = []
        skipped = [r for r in scheds if r["worker"] and not r["loaded"]]
        if self.feature.plugin is not None and pr.targets and skipped:
            # (load_plugins() runs first in run_scheduler_process: a built worker without the plugin's
            # module imported means sglang did not load the plugin in that process)
            findings.append(Finding("DS315", f"plugin {self.feature.plugin.entry_point!r} not loaded in " + ", ".join(
                f"pid {r['pid']}" + (f" rank {r['rank']}" if r["rank"] else "") for r in skipped) + "."))
        if not pr.instrumented and (pr.errors or la.life.ready is not None or la.markers) and forced_verdict(findings, "log") != "dead":
            # Not news on a dead path (nothing patched is loaded) or before the worker was built
            # (a launch that crashed in weight loading never imported the patched module).
            findings.append(Finding("DS313", f"no patched target was instrumented ({pr.errors} probe error line(s)); the marker decides."))
        elif without and la.life.ready is not None:
            findings.append(Finding("DS312", "no execution of the patched code on " + ", ".join(
                f"pid {r['pid']}" + (f" rank {r['rank']}" if r["rank"] else "") for r in without) + "."))
        out = {"proven": proven, "version": pr.version, "ranks": ranks, "instrumented": pr.instrumented, "errors": pr.errors}
        if hunks is not None:
            out["hunks"] = hunks
        return out

    def _hunk_findings(self, la: Launch, findings: list[Finding], scheds: list[dict]) -> dict[str, Any]:
        """The probe watched every hunk of the diff (schema v2): live when a behaviour hunk executed on
        every scheduler rank (DS323, the marker or not), dead when DEAD_HUNK_DECODE_LINES Decode batch
        lines were served and no behaviour hunk ever ran nor its function was called (DS325)."""
        pr = la.probe
        procs = {p["pid"]: p for p in pr.procs.values()}

        def where(r):
            return f"pid {r['pid']}" + (f" rank {_rank(r['rank'])}" if r["rank"] else "")

        ran = [r for r in scheds if procs[r["pid"]]["behaviour_ran"]]
        missing = [r for r in scheds if not procs[r["pid"]]["behaviour_ran"]]
        called = [r for r in missing if procs[r["pid"]]["behaviour_called"]]
        decode = la.decoding.lines
        live = bool(scheds) and not missing
        # every rank of a ready server called a function holding a behaviour hunk (sglang's warm-up
        # request drafts once), its branch not taken yet (DS326): the patched code is on the path, as
        # sure as a marker logged there; whether it acts is prove's question
        reached = bool(scheds) and len(ran) + len(called) == len(scheds) and la.life.ready is not None
        if live:
            line = pr.first_hunk
            findings.append(Finding("DS323", f"behaviour hunk(s) of the diff executed on every scheduler rank ({len(ran)}: "
                                    + ", ".join(where(r) for r in ran) + ")" + ("" if la.markers else "; the marker never logged") + ".",
                                    line=line.no if line else None, text=clip_text(line.text) if line else None))
        elif ran:
            findings.append(Finding("DS324", f"behaviour hunk(s) ran on {len(ran)} of {len(scheds)} scheduler ranks; none on "
                                    + ", ".join(where(r) for r in missing) + "."))
        elif called and la.life.ready is not None:
            findings.append(Finding("DS326", "the functions holding the behaviour hunks were called on " + ", ".join(
                where(r) for r in called) + f", but no line of a behaviour hunk executed ({decode} Decode batch lines)."))
        elif decode >= DEAD_HUNK_DECODE_LINES:
            findings.append(Finding("DS325", f"{decode} Decode batch lines served (>= {DEAD_HUNK_DECODE_LINES}, N of DS325) and none of the "
                                    f"{pr.behaviour_hunks} behaviour hunk(s) of the diff executed, nor was its function called, on any process."))
        return {"behaviour_hunks": pr.behaviour_hunks, "live": live or reached, "branch_taken": live, "decode_lines": decode,
                "ranks": [{"pid": r["pid"], "rank": r["rank"], "ran": sorted(map(str, procs[r["pid"]]["behaviour_ran"]))} for r in scheds]}

    def _basis(self, la: Launch, mask: int, a: workers.WorkerAnalysis) -> str:
        k = self.k
        parts = []
        if la.config.overlap_line is not None:
            src = "server_args" if la.config.overlap_line is la.config.dump_line else f"'{la.config.overlap_line.msg.strip()[:90]}'"
            parts.append(f"overlap scheduler {'on' if la.config.overlap else 'off'} per line {la.config.overlap_line.no} ({src})")
        if la.config.algorithm:
            parts.append(f"algorithm {la.config.algorithm}")
        parts.append(f"sglang {k.span(mask)} dispatch (configs/sglang/dispatch.toml)")
        if a.display_note:
            parts.append(a.display_note)
        return "; ".join(parts)

    def _threshold(self, la: Launch, marker: dict, findings: list[Finding]) -> None:
        th = self.feature.threshold
        if th is None:
            return
        value = marker["fields"].get(th.field) if marker["found"] else None
        if value is None:
            value = la.config.dump.get(th.arg)
        try:
            value = int(value) if value is not None else None
        except (TypeError, ValueError):
            value = None
        if value is None or la.config.max_running is None:
            return
        if value >= la.config.max_running:
            where = la.config.max_running_line
            how = "reset by speculative decoding because --max-running-requests was not given" if where is not None and "reset to" in where.msg else "effective"
            findings.append(Finding(
                "DS103",
                f"threshold={value} but max_running_requests={la.config.max_running} ({how}): the running batch can never exceed the threshold, so the disable branch never runs.",
                line=where.no if where is not None and where.no else None, text=clip_text(where.text) if where is not None else None,
                params={"suggest": max(value * 2, value + 1), "threshold": value, "max_running": la.config.max_running}))


def _line_of(d) -> Optional[Line]:
    """A decode observation's log line, for a finding's evidence."""
    return Line(d.no, d.offset or 0, d.text, "") if d.no else None


def _batches(vals: list[int]) -> str:
    return ", ".join(map(str, vals)) if len(vals) <= 4 else f"{vals[0]}–{vals[-1]}"


def _rank(rank: Any) -> str:
    if isinstance(rank, dict):
        return ",".join(f"{k}{v}" for k, v in rank.items() if v) or "tp0"
    return str(rank)
