"""Per step and overall: was speculation on, at which running batch, and was that what the feature
promises (`[expect]` in the feature TOML: on while the running batch <= threshold, off above).

The running batch that matters is the one the scheduler logged (`#running-req` of the `Decode batch`
lines), not the client concurrency: the server may hold fewer requests than the clients send
(max_running_requests, prefill, requests finishing) or more (other traffic)."""
from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any, Optional

from dynspec_cli.evidence.observation import Decode
from dynspec_cli.verdict.codes import ACCEPT_EPS

EPS = ACCEPT_EPS  # accept length above 1 + EPS: drafts were accepted, speculation ran
# A `Decode batch` line's accept len is accepted tokens / forward passes over the whole log
# interval (sglang's scheduler metrics), so an interval in which the batch dipped to the threshold
# and back (a request finished, the next one arrived) mixes speculating and plain passes:
# 1 + f * (L - 1) for a fraction f of speculating passes and the run's on level L. Below half way
# to L the line shows a mix, which proves neither on nor off.
MIXED_BELOW = 0.5


@dataclass
class Group:
    """The decode lines of one step at one running batch."""

    running: Optional[int]  # None: unknown (no decode lines; per-request meta_info only)
    lines: int
    stable: int
    accept_len: Optional[float]  # median over the judged lines (a line without accept len counts as 1.0)
    on: Optional[bool]  # speculation on at this batch
    expected: Optional[bool]  # what the feature promises here (None: no promise)
    evaluated: bool
    source: str = "log"  # log | metrics | meta_info
    why: Optional[str] = None  # why it is not evaluated: too little evidence to decide it

    @property
    def passed(self) -> Optional[bool]:
        if not self.evaluated or self.expected is None or self.on is None:
            return None
        return self.on == self.expected

    def to_json(self) -> dict[str, Any]:
        return {"running": self.running, "lines": self.lines, "stable": self.stable, "accept_len": self.accept_len,
                "speculation": _onoff(self.on), "expected": _onoff(self.expected), "evaluated": self.evaluated,
                "passed": self.passed, "source": self.source, "not_evaluated": self.why}


@dataclass
class Step:
    index: int
    concurrency: int
    started: Optional[float] = None
    elapsed: Optional[float] = None
    requests_ok: int = 0
    requests_failed: int = 0
    errors: dict[str, int] = field(default_factory=dict)
    stop_reason: Optional[str] = None
    decode: list[Decode] = field(default_factory=list)
    groups: list[Group] = field(default_factory=list)
    tokens_per_verify: Optional[float] = None  # sum(completion_tokens - 1) / sum(spec_verify_ct)
    requests_with_spec: int = 0
    meta_accept_length: Optional[float] = None  # mean spec_accept_length (0.5.3.post2+)
    server_avg_before: Optional[float] = None  # /server_info internal_states[0].avg_spec_accept_length
    server_avg_after: Optional[float] = None
    metrics_before: Optional[float] = None  # sglang:spec_accept_length
    metrics_after: Optional[float] = None
    probe_hits: dict[str, Any] = field(default_factory=dict)
    log_bytes: int = 0
    note: str = ""
    output_tokens: Optional[int] = None  # completion tokens of the step's answered requests
    graph_passes: Optional[dict[str, float]] = None  # sglang:cuda_graph_passes_total over the step, by mode (None: not reported)

    # --- summaries ---------------------------------------------------------------------------
    @property
    def evaluated(self) -> list[Group]:
        return [g for g in self.groups if g.evaluated]

    @property
    def outcome(self) -> str:
        ps = [g.passed for g in self.evaluated]
        if any(p is False for p in ps):
            return "fail"
        if any(p is True for p in ps):
            return "pass"
        return "inconclusive"

    @property
    def running_mode(self) -> Optional[int]:
        known = [g for g in self.groups if g.running is not None]
        return max(known, key=lambda g: (g.lines, g.running)).running if known else None

    @property
    def running_range(self) -> Optional[tuple[int, int]]:
        r = [d.running for d in self.decode]
        return (min(r), max(r)) if r else None

    @property
    def accept_len(self) -> Optional[float]:
        """The step's accept length: at its usual running batch."""
        mode = self.running_mode
        for g in self.groups:
            if g.running == mode and g.accept_len is not None:
                return g.accept_len
        return self.tokens_per_verify

    @property
    def speculation(self) -> str:
        ev = [g for g in self.evaluated if g.on is not None]
        if not ev:
            return "unknown"
        if all(g.on for g in ev):
            return "on"
        if not any(g.on for g in ev):
            return "off"
        on = ",".join(str(g.running) for g in ev if g.on)
        off = ",".join(str(g.running) for g in ev if not g.on)
        return f"on@{on} off@{off}"

    @property
    def expected(self) -> str:
        ev = [g.expected for g in self.evaluated]
        if not ev or all(e is None for e in ev):
            return "-"
        if all(e is True for e in ev):
            return "on"
        if all(e is False for e in ev):
            return "off"
        return "mixed"

    @property
    def tokens_per_s(self) -> Optional[float]:
        """The step's output throughput: its answered requests' completion tokens over its time."""
        if self.output_tokens is None or not self.elapsed:
            return None
        return self.output_tokens / self.elapsed

    def compute_path(self) -> dict[str, Any]:
        """Did decode run in CUDA graphs at this step: from the sglang:cuda_graph_passes_total deltas
        (decode passes by mode) when the server exports them, else from its Decode batch lines'
        `cuda graph:`. decode: graphs | eager | mixed | not reported."""
        from dynspec_cli.evidence import graph_passes as GP

        if self.graph_passes is not None:
            g, e = GP.decode_split(self.graph_passes)
            source, unit = "metrics", "passes"
        else:
            known = [d.cuda_graph for d in self.decode if d.cuda_graph is not None]
            g, e = sum(1 for x in known if x), sum(1 for x in known if not x)
            source, unit = ("log", "lines") if known else (None, None)
        share = GP.eager_share(g, e)
        decode = ("not reported" if share is None else "graphs" if share <= GP.TOLERANCE else
                  "eager" if share >= 1 - GP.TOLERANCE else "mixed")
        return {"decode": decode, "source": source, "unit": unit, "graph": g, "eager": e, "eager_share": share,
                "tokens_per_s": self.tokens_per_s}

    def evidence(self) -> list[str]:
        out = []
        src = {g.source for g in self.groups}
        if "log" in src:
            stable = sum(1 for d in self.decode if d.stable)
            out.append(f"{len(self.decode)} Decode batch lines ({stable} at a steady batch)")
        elif "metrics" in src:
            out.append(f"{len(self.decode)} /metrics samples (no log lines)")
        for g in self.evaluated:
            if g.running is not None:
                al = "no accept len" if g.accept_len is None else f"accept len {g.accept_len:.2f}"
                out.append(f"batch {g.running}: {al} ({g.stable or g.lines} lines)")
        for g in self.groups:
            if g.why and g.running is not None and g.running == self.running_mode:
                out.append(f"batch {g.running}: not decided, {g.why}")
        if self.tokens_per_verify is not None:
            out.append(f"meta_info: {self.tokens_per_verify:.2f} tokens/verify over {self.requests_with_spec} requests")
        elif self.requests_ok:
            out.append(f"meta_info: no spec_verify_ct in {self.requests_ok} responses")
        if self.server_avg_after is not None:
            b = f"{self.server_avg_before:.2f}" if self.server_avg_before is not None else "-"
            out.append(f"/server_info avg accept len {b} → {self.server_avg_after:.2f}")
        if self.metrics_after is not None:
            out.append(f"sglang:spec_accept_length {self.metrics_after:.2f}")
        for fn, n in sorted(self.probe_hits.items()):
            out.append(f"probe hit {fn} ×{n}")
        if self.note:
            out.append(self.note)
        return out

    def to_json(self) -> dict[str, Any]:
        rr = self.running_range
        return {
            "index": self.index, "concurrency": self.concurrency, "started": self.started, "elapsed": self.elapsed,
            "requests_ok": self.requests_ok, "requests_failed": self.requests_failed, "errors": self.errors,
            "stop_reason": self.stop_reason, "running_mode": self.running_mode,
            "running_range": list(rr) if rr else None, "accept_len": self.accept_len,
            "speculation": self.speculation, "expected": self.expected, "outcome": self.outcome,
            "groups": [g.to_json() for g in self.groups], "tokens_per_verify": self.tokens_per_verify,
            "requests_with_spec": self.requests_with_spec, "meta_accept_length": self.meta_accept_length,
            "server_info_avg_accept_length": {"before": self.server_avg_before, "after": self.server_avg_after},
            "metrics_spec_accept_length": {"before": self.metrics_before, "after": self.metrics_after},
            "probe_hits": self.probe_hits, "log_bytes": self.log_bytes, "evidence": self.evidence(),
            "decode": [d.to_json() for d in self.decode],
            "output_tokens": self.output_tokens, "tokens_per_s": self.tokens_per_s, "compute_path": self.compute_path(),
        }


def is_above(running: Optional[int], threshold: Optional[int]) -> bool:
    """Above the threshold; a feature without one (a vLLM speculator patch, say) has none."""
    return threshold is not None and running is not None and running > threshold


def expected_at(running: int, threshold: Optional[int], expect_below: bool) -> Optional[bool]:
    """What the feature promises at this running batch; without a threshold, on at every batch."""
    if is_above(running, threshold):
        return False
    return True if expect_below else None


def on_level(steps: list[Step], threshold: int) -> Optional[float]:
    """The accept length of speculating passes in this run: the median over groups that showed
    speculation at a running batch <= threshold (None: none did)."""
    vals = [g.accept_len for s in steps for g in s.groups
            if g.running is not None and not is_above(g.running, threshold) and g.on and g.accept_len is not None]
    return statistics.median(vals) if vals else None


def judge_step(step: Step, threshold: int, expect_below: bool, level: Optional[float] = None) -> None:
    """Group the step's decode observations by running batch and decide each group. A group is
    decided on two lines or more; with `level` (on_level), not on an accept length that shows a mix."""
    decode = step.decode
    step.groups = []
    if decode:
        by: dict[int, list[Decode]] = {}
        for d in decode:
            by.setdefault(d.running, []).append(d)
        steady = {b: [d for d in ds if d.stable] for b, ds in by.items()}
        any_steady = any(len(v) >= 2 for v in steady.values())
        for b in sorted(by):
            ds = by[b]
            judged = steady[b] if any_steady else ds
            vals = [d.accept_len if d.accept_len is not None else 1.0 for d in judged]
            has_len = any(d.accept_len is not None for d in judged)
            med = statistics.median(vals) if vals else None
            on = (med > 1 + EPS) if med is not None else None
            why = None
            if len(judged) < 2:
                why = f"{len(judged)} {'steady ' if any_steady else ''}line{'s' if len(judged) != 1 else ''}"
            elif on and level is not None and med < 1 + MIXED_BELOW * (level - 1):
                why = (f"accept len {med:.2f} is a mix of speculating and plain passes (this run speculates at "
                       f"{level:.2f}): the batch changed within the log interval")
            step.groups.append(Group(b, len(ds), len(steady[b]), med if has_len else None, on,
                                     expected_at(b, threshold, expect_below), why is None and on is not None,
                                     ds[0].source, why))
        if not any_steady:
            step.note = "the running batch changed between every two lines: judged on all lines"
        return
    # No decode line and no /metrics sample: only per-request meta_info, and the running batch is
    # unknown. It cannot exceed the requests in flight, so a step at or below the threshold is
    # still judged (as long as nothing else loads the server).
    if step.requests_ok == 0:
        step.note = "no request completed"
        return
    on = step.tokens_per_verify is not None and step.tokens_per_verify > 1 + EPS
    if not is_above(step.concurrency, threshold):
        step.groups.append(Group(None, 0, 0, step.tokens_per_verify, on, expected_at(step.concurrency, threshold, expect_below),
                                 True, "meta_info"))
        step.note = "no Decode batch lines: running batch taken as <= concurrency (meta_info only)"
    else:
        step.groups.append(Group(None, 0, 0, step.tokens_per_verify, on, None, False, "meta_info"))
        step.note = "no Decode batch lines: the running batch is unknown, so this step above the threshold proves nothing"


@dataclass
class Conclusion:
    outcome: str  # proven | fails | inconclusive | died
    exit_code: int
    message: str
    hint: Optional[str] = None

    def to_json(self) -> dict[str, Any]:
        return {"outcome": self.outcome, "exit_code": self.exit_code, "message": self.message, "hint": self.hint}


def conclude(steps: list[Step], threshold: int, expect_below: bool, *, verdict: Optional[str],
             died: Optional[str] = None, max_running: Optional[int] = None) -> Conclusion:
    if died:
        return Conclusion("died", 4, died)
    level = on_level(steps, threshold)
    for s in steps:  # again, now that the run's on level is known
        if s.decode:
            judge_step(s, threshold, expect_below, level)
    groups = [(s, g) for s in steps for g in s.evaluated]
    failed = [(s, g) for s, g in groups if g.passed is False]
    if failed:
        if expect_below and not any(g.on for _, g in groups) and any(g.expected for _, g in groups):
            seen = sorted({g.running for _, g in groups if g.running is not None})
            where = f" at every running batch seen ({_span(seen)})" if seen else ""
            return Conclusion("fails", 1, f"speculation never turned on: accept length <= {1 + EPS:.2f}{where}",
                              "check --speculative-algorithm and the draft model; a server that never speculates "
                              "cannot show the feature")
        s = failed[0][0]  # the first failing step, at the batch it spent most lines at
        g = max((g for st, g in failed if st is s), key=lambda g: (g.stable, g.lines))
        al = "no accept len" if g.accept_len is None else f"accept len {g.accept_len:.2f}"
        where = f"at running batch {g.running}" if g.running is not None else f"at concurrency {s.concurrency}"
        side = f"> threshold {threshold}" if is_above(g.running, threshold) else \
            f"<= threshold {threshold}" if threshold is not None else "no threshold: on at every batch"
        if g.expected:
            msg = f"{where} ({side}) speculation was off ({al}), expected on"
        else:
            msg = f"{where} (> threshold {threshold}) speculation stayed on ({al}), expected off"
        return Conclusion("fails", 1, msg + f" (step {s.index}, concurrency {s.concurrency})",
                          "the feature does not do what it promises: check the patched branch's condition")
    if verdict == "dead":
        return Conclusion("fails", 1, "the verdict on the run's log is dead: the patched code cannot run or did not run",
                          "run `dynspec verify` on the log for the findings")
    seen = [g.running for _, g in groups if g.running is not None]
    below = any(g.passed for _, g in groups if g.expected)
    above = any(g.passed for _, g in groups if g.expected is False)
    # a step left undecided at its usual batch (the boundary step N+1, say) leaves the proof open
    thin = [(s, g) for s in steps for g in s.groups if g.why and g.running is not None and g.running == s.running_mode]
    if thin:
        return _too_little(thin, threshold)
    if threshold is not None and not above:
        biggest = max(seen) if seen else None
        msg = (f"the running batch never exceeded the threshold (largest seen: {biggest}, threshold {threshold})"
               if biggest is not None else f"no evidence of the running batch above the threshold ({threshold})")
        hint = "add more concurrency (e.g. --steps 1,N,2N,4N) or a longer --duration"
        if max_running is not None and max_running <= threshold:
            hint = (f"max_running_requests={max_running} caps the batch at or below the threshold: pass "
                    f"--max-running-requests above {threshold} to the server")
        return Conclusion("inconclusive", 3, msg, hint)
    if expect_below and not below:
        return Conclusion("inconclusive", 3, f"no step showed speculation at a running batch <= {threshold}",
                          "include small steps (e.g. --steps 1,N,N+1,2N)")
    if verdict != "live":
        return Conclusion("inconclusive", 3, f"the behaviour matches, but the verdict on the log is {verdict or 'unknown'}, not live",
                          "run `dynspec verify` on the log for what is missing")
    on = sorted({g.running for _, g in groups if g.on and g.running is not None})
    off = sorted({g.running for _, g in groups if g.on is False and g.running is not None})
    if threshold is None:
        return Conclusion("proven", 0, f"speculation on at every running batch seen ({_span(on)}); the feature has "
                                       f"no threshold, so on is what it promises")
    msg = f"speculation on at running batch {_span(on) or '<= ' + str(threshold)}, off at {_span(off)} (threshold {threshold})"
    return Conclusion("proven", 0, msg)


def _too_little(thin: list[tuple[Step, Group]], threshold: int) -> Conclusion:
    s, g = max(thin, key=lambda sg: (sg[1].lines, sg[1].running))
    side = "no threshold" if threshold is None else f"{'>' if is_above(g.running, threshold) else '<='} threshold {threshold}"
    return Conclusion("inconclusive", 3, f"too little evidence at running batch {g.running} ({side}): "
                                         f"{g.why} (step {s.index}, concurrency {s.concurrency})",
                      "a longer run: raise --duration and --max-new-tokens (requests that outlive the server's "
                      "--decode-log-interval give lines at one batch)")


def _span(vals: list[int]) -> str:
    if not vals:
        return ""
    return str(vals[0]) if len(vals) == 1 else f"{vals[0]}–{vals[-1]}" if len(vals) > 3 else ", ".join(map(str, vals))


def _onoff(v: Optional[bool]) -> Optional[str]:
    return None if v is None else ("on" if v else "off")


# --- a whole log's Decode batch lines as evidence (verify) ---------------------------------------
@dataclass
class Effect:
    """What the Decode batch lines of one launch say about the feature at work, decided per running batch
    exactly as `prove` decides a step (judge_step, against the run's on level): `visible` (speculation on at
    a batch <= threshold and off above it: the switch only the feature makes), `contradicted` (speculation
    stayed on at a batch above the threshold: the feature did not act there), `not shown` (no batch decided
    on both sides), `none` (no threshold to judge against)."""

    threshold: Optional[int]
    source: Optional[str]  # where the threshold was read
    state: str
    groups: list[tuple[str, Group]] = field(default_factory=list)  # (DP rank label or "", group)
    against: list[tuple[str, Group, list[Decode]]] = field(default_factory=list)  # contradicting groups, their lines

    @property
    def on(self) -> list[int]:
        return sorted({g.running for _, g in self.groups if g.evaluated and g.on and g.running is not None})

    @property
    def off(self) -> list[int]:
        return sorted({g.running for _, g in self.groups if g.evaluated and g.on is False and g.running is not None})

    def to_json(self) -> dict[str, Any]:
        return {"state": self.state, "threshold": self.threshold, "threshold_from": self.source,
                "speculation_on_at": self.on, "speculation_off_at": self.off,
                "contradicting": [{"rank": lb or None, "running": g.running, "lines": len(ds), "accept_len": g.accept_len,
                                   "line_numbers": [d.no for d in ds if d.no is not None][:20]} for lb, g, ds in self.against],
                "groups": [{"rank": lb or None, **g.to_json()} for lb, g in self.groups]}


def effect(decode: dict[str, list[Decode]], threshold: Optional[int], expect_below: bool,
           source: Optional[str] = None) -> Effect:
    """`decode`: each scheduler's lines in log order (by DP rank label), `stable` marked. A batch is decided
    on two steady lines or more (judge_step): a steady line's predecessor shows the same batch, so the two
    cover two whole log intervals (--decode-log-interval forward passes each) at that batch, and the first
    line after a change of batch (which mixes passes of both) never counts; with the run's on level, a
    median that is only part way to it is a mix and decides nothing. A single stray line (live-probe.log's
    one `accept len: 2.07` at batch 6) cannot contradict the feature."""
    if threshold is None:
        return Effect(None, source, "none")
    steps = {lb: Step(0, 0, decode=list(ds)) for lb, ds in decode.items() if ds}
    for s in steps.values():
        judge_step(s, threshold, expect_below)
    level = on_level(list(steps.values()), threshold)
    out = Effect(threshold, source, "not shown")
    for lb, s in steps.items():
        judge_step(s, threshold, expect_below, level)
        steady = any(g.stable >= 2 for g in s.groups)  # (judge_step's own test: judged on steady lines then)
        for g in s.groups:
            out.groups.append((lb, g))
            if g.evaluated and g.on and is_above(g.running, threshold):
                lines = [d for d in s.decode if d.running == g.running and (d.stable or not steady)]
                out.against.append((lb, g, lines))
    if out.against:
        out.state = "contradicted"
    elif any(r > threshold for r in out.off) and any(r <= threshold for r in out.on):
        out.state = "visible"
    return out
