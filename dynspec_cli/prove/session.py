"""Running the steps. The load generator (dynspec_cli/inject/loadgen.py, stdlib only) runs on the
server's host through `Host.run_python`, so the traffic goes to 127.0.0.1:<port of the run> on
that host, also over SSH; it stops by itself at the step's bounds, and the host kills it when
dynspec is interrupted (Ctrl-C ends `run_python`, whose process group is killed). A Slurm run's
target is its login host, the traffic going to node 0's NodeAddr:port (place/slurm/placement.py)."""
from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from dynspec_cli import engines, inject
from dynspec_cli.engines.protocol import PROVE
from dynspec_cli.knowledge.features import Feature
from dynspec_cli.prove import observations
from dynspec_cli.verdict import decision
from dynspec_cli.verdict.decision import Conclusion, Step
from dynspec_cli.prove.plan import Plan, PlanError, parse_steps, threshold_from_argv
from dynspec_cli.run import records
from dynspec_cli.run.records import RunRecord
from dynspec_cli.transport import Host

LOADGEN = inject.script("loadgen.py")
PROMPT = ("Explain, step by step and in plain words, how speculative decoding lets a small draft model "
          "propose tokens that a large target model verifies in one forward pass.")
LOG_CAP = 64 << 20  # bytes of log read per step (a step at high concurrency logs a few MB at most)
VERDICT_CAP = 32 << 20  # bytes of the launch read for the fresh verdict (start-up is in the first MBs)


NO_THRESHOLD = "none: the feature has no threshold, speculation is expected on at every running batch"
NO_THRESHOLD_STEPS = "1,4"


def check_engine(feature: Feature) -> None:
    """PlanError (one line, exit 2) for a feature of an engine prove cannot read yet (the engine
    does not support PROVE: no reader of its serving lines, engines/protocol.py decode_lines)."""
    engine = engines.of(feature)
    if not engine.supports(PROVE):
        able = ", ".join(n for n in engines.names() if engines.get(n).supports(PROVE))
        raise PlanError(f"prove is built for {able} only: reading {engine.name}'s metrics lines for "
                        f"{feature.name!r} is not built yet (dynspec watch / status give the run's verdict)")


@dataclass
class Target:
    """The server to drive: where its host is, how to reach it from there, where it logs."""

    host: Host
    python: str  # interpreter for the load generator on that host
    base: str  # http://127.0.0.1:PORT as seen from that host
    log: Optional[str] = None
    log_offset: int = 0  # where the launch starts in the log
    record: Optional[RunRecord] = None
    api_key: Optional[str] = field(default=None, repr=False)  # the server's --api-key (never printed)
    api_key_source: Optional[str] = None  # the environment variable it came from
    # a run a scheduler placed (place/slurm/placement.py): .label(target), .gone(target), .job_id, and the
    # receipt's parts (receipt_server(), receipt_part(), check_server(host, doc)); None: a process on `host`
    where: Any = None

    @property
    def label(self) -> str:
        if self.where is not None:
            return self.where.label(self)
        if self.record is not None:
            return f"{self.record.name} on {self.host.name} ({self.base})"
        return self.base


@dataclass
class Proof:
    target: Target
    feature: Feature
    plan: Plan
    verdict: Optional[dict[str, Any]]
    probe: Optional[dict[str, Any]]
    server: dict[str, Any]
    steps: list[Step] = field(default_factory=list)
    conclusion: Optional[Conclusion] = None
    started_at: float = field(default_factory=time.time)
    ended_at: Optional[float] = None
    interrupted: bool = False

    def to_json(self) -> dict[str, Any]:
        t = self.target
        return {
            "schema": "dynspec-prove/1",
            "engine": engines.name_of(self.feature),
            "target": {"run": t.record.name if t.record else None, "host": t.host.name, "url": t.base, "log": t.log,
                       "job_id": getattr(t.where, "job_id", None)},
            "feature": self.feature.name,
            "expect": {"speculate_at_or_below_threshold": self.feature.expect.speculate_at_or_below_threshold},
            "threshold": self.plan.threshold, "threshold_source": self.plan.threshold_source,
            "plan": {"steps": list(self.plan.steps), "duration": self.plan.duration,
                     "max_requests": self.plan.max_requests, "max_new_tokens": self.plan.max_new_tokens},
            "epsilon": decision.EPS,
            "verdict": (self.verdict or {}).get("verdict"),
            "sglang_version": (self.verdict or {}).get("sglang_version") or self.server.get("version"),
            "worker": (self.verdict or {}).get("worker", {}).get("class"),
            "server": self.server, "probe": self.probe,
            "steps": [s.to_json() for s in self.steps],
            "conclusion": self.conclusion.to_json() if self.conclusion else None,
            "outcome": self.conclusion.outcome if self.conclusion else None,
            "exit_code": self.conclusion.exit_code if self.conclusion else None,
            "started_at": self.started_at, "ended_at": self.ended_at,
        }


def loadgen_script(api_key: Optional[str]) -> str:
    """The load generator's text, with the API key written into it: the text goes on stdin, so the
    key never appears on a command line on the server's host."""
    text = LOADGEN.read_text(encoding="utf-8")
    line = "API_KEY = None  # replaced by dynspec in the text it sends (see the docstring)\n"
    assert line in text, "loadgen.py lost its API_KEY line"
    return text.replace(line, f"API_KEY = {api_key!r}\n", 1) if api_key else text


def run_loadgen(target: Target, args: dict[str, Any], *, timeout: float) -> dict[str, Any]:
    args = {"base": target.base, "prompt": PROMPT, "tag": "dynspec-loadgen", **args}
    res = target.host.run_python(target.python, loadgen_script(target.api_key), [json.dumps(args)],
                                 timeout=timeout)
    try:
        doc = json.loads(res.stdout)
    except ValueError:
        err = res.stderr.decode("utf-8", "replace").strip().splitlines()
        raise PlanError(f"{target.python} on {target.host.name} did not run the load generator: "
                        f"{err[-1] if err else f'exit {res.exit_code}'}") from None
    if not doc.get("ok", False):
        raise PlanError(f"load generator failed on {target.host.name}: {doc.get('error')}")
    if doc.get("stop_reason") == "unauthorized" or (doc.get("server_info_before") or {}).get("error") == "HTTP 401":
        if target.api_key:
            raise PlanError(f"{target.label} refuses the API key in ${target.api_key_source} (HTTP 401)")
        raise PlanError(f"{target.label} wants its --api-key (HTTP 401): export OPENAI_API_KEY=<the key> (the "
                        f"variable sglang.bench_serving reads) or name another variable with --api-key-env")
    return doc


def server_info(target: Target, feature: Feature) -> dict[str, Any]:
    keys = [feature.flag.dest] if feature.flag else []
    doc = run_loadgen(target, {"mode": "info", "info_keys": keys, "api": _api(feature)}, timeout=60)
    return doc.get("server_info_before") or {}


def fresh_verdict(target: Target, feature: Feature) -> tuple[Optional[dict[str, Any]], Optional[dict[str, Any]]]:
    """The verdict on the launch's log, read now from the launch's first byte; and the probe's
    proof (hit lines) from the same read."""
    if not target.log:
        return None, None
    from dynspec_cli.verdict.pipeline import Pipeline

    rec = target.record
    pipe = Pipeline.for_record(rec, feature, engines.get(rec.engine)) if rec else \
        Pipeline(feature, offset=target.log_offset, engine=engines.of(feature))
    try:
        data = target.host.read_file(target.log, target.log_offset, VERDICT_CAP)
    except (FileNotFoundError, PermissionError, IsADirectoryError) as e:
        raise PlanError(f"{target.host.name}:{target.log}: cannot read the log: {e.strerror}") from None
    pipe.feed(data)
    pipe.flush()
    v = pipe.verdict(at_eof=False).to_json()
    sl = observations.LogReader(feature).read(data, target.log_offset)
    probe = None
    if sl.probe_lines or v.get("probe"):
        probe = {"lines": sl.probe_lines, "hits": [{"function": f, "count": c} for f, c in sorted(sl.probe_hits.items())],
                 "verdict": v.get("probe")}
    return v, probe


def threshold_of(target: Target, feature: Feature, given: Optional[int], verdict: Optional[dict],
                 info: dict[str, Any]) -> tuple[Optional[int], str]:
    if given is not None:
        if given < 0:
            raise PlanError("--threshold must be >= 0")
        return given, "--threshold"
    flag = feature.flag.name if feature.flag else None
    if target.record is not None and flag:
        n = threshold_from_argv(target.record.argv, flag)
        if n is not None:
            return n, f"{flag} in the run's command line"
    field_ = feature.threshold.field if feature.threshold else None
    if verdict and field_ and (verdict.get("marker") or {}).get("fields", {}).get(field_) is not None:
        try:
            return int(verdict["marker"]["fields"][field_]), "the marker line"
        except ValueError:
            pass
    dest = feature.flag.dest if feature.flag else None
    val = (info.get("keys") or {}).get(dest) if dest else None
    if isinstance(val, int):
        return val, f"/server_info {dest}"
    if flag is None and field_ is None:
        return None, NO_THRESHOLD
    raise PlanError(f"no threshold: not in the run's command line ({flag}), the marker or /server_info; pass --threshold N")


def make_plan(threshold: Optional[int], source: str, steps: Optional[str], duration: float, max_requests: int,
              max_new_tokens: int) -> Plan:
    if duration <= 0:
        raise PlanError("--duration must be a positive number of seconds")
    if max_requests < 0:
        raise PlanError("--max-requests must be >= 0 (0: no bound)")
    if max_new_tokens < 2:
        raise PlanError("--max-new-tokens must be at least 2")
    if threshold is None:
        steps = NO_THRESHOLD_STEPS if steps in (None, "1,N,N+1,2N") else steps
        if "n" in steps.lower():
            raise PlanError(f"--steps {steps!r}: N is the threshold and this feature has none; give plain integers")
    return Plan(threshold, source, parse_steps(steps or "1,N,N+1,2N", max(threshold or 1, 1)), duration, max_requests,
                max_new_tokens)


def gone(t: Target) -> Optional[str]:
    """Why the run's server is not running any more (None: it is, or there is no run record)."""
    rec = t.record
    if rec is None:
        return None
    if t.where is not None:
        return t.where.gone(t)
    if not t.host.is_alive(rec.pid):
        return f"the server (pid {rec.pid}) is not running"
    if rec.leader_start is not None:
        now = records.leader_start(t.host, rec.pid)
        if now is not None and now != rec.leader_start:
            return f"pid {rec.pid} now belongs to another process (the server restarted or exited)"
    return None


class Prover:
    def __init__(self, target: Target, feature: Feature, plan: Plan, *,
                 on_start: Callable[[int, int], None] | None = None,
                 on_step: Callable[[Step], None] | None = None) -> None:
        self.t, self.feature, self.plan = target, feature, plan
        self.on_start, self.on_step = on_start, on_step
        self.reader = observations.LogReader(feature)
        self.serving = engines.of(feature).serving  # its /metrics names (the load generator reports them)
        self.expect_below = feature.expect.speculate_at_or_below_threshold

    def gone(self) -> Optional[str]:
        return gone(self.t)

    def step(self, index: int, concurrency: int) -> tuple[Step, Optional[str]]:
        t, p = self.t, self.plan
        start = (t.host.size(t.log) or 0) if t.log else 0
        drain = max(10.0, min(60.0, p.duration))
        doc = run_loadgen(t, {"api": _api(self.feature), "concurrency": concurrency, "duration": p.duration, "max_requests": p.max_requests,
                              "max_new_tokens": p.max_new_tokens, "drain": drain, "sample_every": 0.25},
                          timeout=p.duration + drain + 60)
        s = Step(index, concurrency, started=doc.get("started"), elapsed=doc.get("elapsed"),
                 stop_reason=doc.get("stop_reason"), errors=doc.get("errors") or {})
        reqs = doc.get("requests") or []
        ok = [r for r in reqs if r.get("status") == 200]
        s.requests_ok, s.requests_failed = len(ok), len(reqs) - len(ok)
        spec = [r for r in ok if isinstance(r.get("spec_verify_ct"), int) and r["spec_verify_ct"] > 0
                and isinstance(r.get("completion_tokens"), int)]
        if spec:
            s.requests_with_spec = len(spec)
            s.tokens_per_verify = sum(r["completion_tokens"] - 1 for r in spec) / sum(r["spec_verify_ct"] for r in spec)
        lens = [r["spec_accept_length"] for r in ok if isinstance(r.get("spec_accept_length"), (int, float))]
        s.meta_accept_length = sum(lens) / len(lens) if lens else None
        s.server_avg_before = _first(doc.get("server_info_before"))
        s.server_avg_after = _first(doc.get("server_info_after"))
        gauge = self.serving.accept_gauge
        s.metrics_before = (doc.get("metrics_before") or {}).get(gauge) if gauge else None
        s.metrics_after = (doc.get("metrics_after") or {}).get(gauge) if gauge else None
        toks = [r["completion_tokens"] for r in ok if isinstance(r.get("completion_tokens"), int)]
        s.output_tokens = sum(toks) if toks else None
        # the step's decode passes by mode; a /metrics without the counter (sglang < 0.5.7) is not reported
        from dynspec_cli.evidence import graph_passes as GP
        counter = self.serving.graph_passes
        after = (doc.get("metrics_after") or {}).get(counter) if counter else None
        if isinstance(after, dict):
            before = (doc.get("metrics_before") or {}).get(counter) or {}
            s.graph_passes = GP.delta({"": before}, {"": after})[""]
        died = self.gone()
        if died is None and doc.get("stop_reason") == "server-unreachable":
            died = "the server stopped answering"
        if t.log:
            try:
                data = t.host.read_file(t.log, start, LOG_CAP)
            except (FileNotFoundError, PermissionError, IsADirectoryError):
                data = b""
            sl = self.reader.read(data, start)
            s.decode, s.probe_hits, s.log_bytes = sl.decode, sl.probe_hits, sl.bytes_read
        if not s.decode:
            s.decode = observations.from_samples(doc.get("samples") or [])
        decision.judge_step(s, p.threshold, self.expect_below)
        if died:
            died = f"{died} (during step {index}, concurrency {concurrency})"
        return s, died

    def run(self, proof: Proof) -> Proof:
        died = self.gone()
        if died:
            died = f"{died} (before step 1)"
        for i, c in enumerate(() if died else self.plan.steps, 1):
            if self.on_start:
                self.on_start(i, c)
            s, died = self.step(i, c)
            if s.decode:  # judged again against this run's on level so far (decision.on_level)
                decision.judge_step(s, self.plan.threshold, self.expect_below,
                                    decision.on_level([*proof.steps, s], self.plan.threshold))
            proof.steps.append(s)
            if self.on_step:
                self.on_step(s)
            if died:
                break
        proof.ended_at = time.time()
        if not died and self.t.log and proof.steps:
            # the log now holds the steps' Decode batch lines, which are evidence for the verdict too (the
            # feature's effect, judge.step_effect_evidence): prove concludes on the verdict of the log as it is
            # now, the one `dynspec verify` gives, so the two never contradict each other on the same run
            try:
                now, _ = fresh_verdict(self.t, self.feature)
            except PlanError:
                now = None
            if now is not None:
                proof.verdict = now
        proof.conclusion = decision.conclude(proof.steps, self.plan.threshold, self.expect_below,
                                             verdict=(proof.verdict or {}).get("verdict"), died=died,
                                             max_running=proof.server.get("max_running_requests"))
        return proof


def _api(feature: Feature) -> str:
    return engines.of(feature).serving.api


def _first(info: Optional[dict]) -> Optional[float]:
    for v in (info or {}).get("avg_spec_accept_length") or []:
        if isinstance(v, (int, float)):
            return float(v)
    return None
