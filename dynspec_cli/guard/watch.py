"""Running a benchmark under guard: the benchmark as a child (its stdin, stdout, stderr and exit
status its own), the server's log followed from where it stood when the benchmark started, /metrics
and /server_info sampled on the server's host, and the proven server process checked, window by
window. Two daemon threads feed the windows (LogTap, Scraper); the main thread waits on the child
and cuts a window every `window` seconds."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from dynspec_cli import engines, inject
from dynspec_cli.engines.protocol import GRAPH_PASSES
from dynspec_cli.evidence import exits
from dynspec_cli.evidence import graph_passes as GP
from dynspec_cli.evidence.observation import Decode
from dynspec_cli.evidence.observation import Observation
from dynspec_cli.evidence.scan import Feeder
from dynspec_cli.guard import windows as W
from dynspec_cli.knowledge.features import Feature
from dynspec_cli.prove import receipt as receipts
from dynspec_cli.prove.session import Target

SCRAPER = inject.script("scraper.py")
# The benchmark runs through this: it asks the kernel to SIGTERM it if dynspec dies (kill -9
# included), then execs the command: same pid, same argv, same environment, so nothing is orphaned.
SHIM = ("import ctypes,os,signal,sys\n"
        "ctypes.CDLL(None).prctl(1,signal.SIGTERM)\n"
        "if os.getppid()!=int(sys.argv[1]):os._exit(143)\n"
        "try:os.execvp(sys.argv[2],sys.argv[2:])\n"
        "except FileNotFoundError:sys.stderr.write('dynspec guard: %s: command not found\\n'%sys.argv[2]);os._exit(127)\n"
        "except OSError as e:sys.stderr.write('dynspec guard: %s: %s\\n'%(sys.argv[2],e.strerror));os._exit(126)\n")


class LogTap:
    """Follows the server's log and keeps what the windows need, as it arrives."""

    def __init__(self, target: Target, feature: Feature, offset: int, tracker=None) -> None:
        self.t, self.offset, self.tracker = target, offset, tracker
        self.lock = threading.Lock()
        self.decode: list[tuple[str, Decode]] = []
        self.served = 0
        self.events: list[W.Event] = []
        self.last: dict[str, int] = {}  # rank -> running batch of its previous line (steady lines)
        engine = engines.of(feature)
        self.lines = engine.decode_lines()  # its serving steps' lines (engines/protocol.py DecodeReader)
        self.serving = engine.serving
        self.knowledge = engine.knowledge()
        self.adaptive = engine.adaptive  # its adaptive controller's lines feed `tracker` (None: it has none)
        self.feeder = Feeder(engine.classifier(feature), self, offset=offset, numbered=False)
        self.follow = None
        self.error: Optional[str] = None
        self.stopping = False  # a stop line was seen: the lines of its children ending are the stop's

    def feed(self, obs: Observation) -> None:  # the Feeder's sink
        line = obs.line
        with self.lock:  # a vLLM SpecDecoding line completes a Decode already taken by a window
            got = self.lines.feed(obs)
        if got is not None:
            label, d = got
            d.seen = time.time()
            with self.lock:
                d.stable = self.last.get(label) == d.running
                self.last[label] = d.running
                self.decode.append((label, d))
        elif obs.kind == "landmark" and obs.id in ("prefill-batch", "served-request"):
            with self.lock:
                self.served += 1
        elif obs.kind == "landmark" and self.adaptive is not None and obs.id in self.adaptive.lines:
            if self.tracker is not None:
                with self.lock:
                    self.tracker.feed(self.adaptive.label_of(obs), obs.id, obs.data)
        elif obs.kind == "landmark" and obs.id in self.serving.startup or obs.kind == "launch":
            self._event("restarted", "the log shows a new start-up of the server (its server_args dump) while "
                                     "the benchmark ran", line.text)
        elif obs.kind == "landmark" and getattr(obs.landmark, "stop", None):
            self.stopping = True
            self._event("died", f"the server was stopped ({obs.landmark.stop} received)", line.text)
        elif obs.kind == "landmark" and _crash(self.knowledge, obs):
            if self.stopping and exits.part_of_stop(obs.landmark, obs.data):
                return  # its children ending: the stop already said the server is gone
            self._event("died", f"the server crashed ({_crash(self.knowledge, obs)})", line.text)

    def _event(self, kind: str, message: str, text: Optional[str] = None, fatal: bool = True) -> None:
        with self.lock:
            self.events.append(W.Event(kind, message, fatal, (text or "")[:300] or None))

    def take(self) -> tuple[list[tuple[str, Decode]], int, list[W.Event], dict[str, Any]]:
        with self.lock:  # a vLLM stats line waits (up to 2 s) for the SpecDecoding line logged right after it
            now = time.time()
            held = [(lb, d) for lb, d in self.decode if d.awaiting and now - d.seen < 2.0]
            kept = {id(d) for _, d in held}
            steps = self.tracker.cut() if self.tracker is not None else {}
            out = [x for x in self.decode if id(x[1]) not in kept], self.served, self.events, steps
            self.decode, self.served, self.events = held, 0, []
        return out

    def run(self) -> None:
        t = self.t
        try:
            self.follow = t.host.follow(t.log, self.offset)
            for ev in self.follow:
                if ev.kind == "data":
                    self.feeder.feed(ev.data)
                elif ev.kind == "missing":
                    self._event("evidence-stopped", f"the log {t.log} is gone")
                elif ev.kind in ("truncated", "rotated", "gap"):
                    self.feeder.pending = b""
                    self._event("note", f"the log was {ev.kind} while the benchmark ran; reading goes on", fatal=False)
        except Exception as e:  # noqa: BLE001 - reported as evidence that stopped
            self.error = str(e)
            self._event("evidence-stopped", f"following {t.host.name}:{t.log} stopped: {e}")

    def close(self) -> None:
        if self.follow is not None:
            self.follow.close()


class Scraper:
    """/metrics and /server_info samples, from inject/scraper.py on the server's host."""

    def __init__(self, target: Target, every: float, prefix: str) -> None:
        self.t, self.every, self.prefix = target, every, prefix
        self.lock = threading.Lock()
        self.samples: list[dict[str, Any]] = []
        self.error: Optional[str] = None
        self._stream = None

    def text(self) -> str:
        text = SCRAPER.read_text(encoding="utf-8")
        line = "API_KEY = None  # replaced by dynspec in the text it sends (see the docstring)\n"
        key = self.t.api_key
        return text.replace(line, f"API_KEY = {key!r}\n", 1) if key else text

    def run(self) -> None:
        args = json.dumps({"base": self.t.base, "every": self.every, "prefix": self.prefix})
        buf = b""
        try:
            self._stream = self.t.host.stream_python(self.t.python, self.text(), [args])
            for chunk in self._stream:
                buf += chunk
                *lines, buf = buf.split(b"\n")
                for ln in lines:
                    try:
                        doc = json.loads(ln)
                    except ValueError:
                        continue
                    with self.lock:
                        self.samples.append(doc)
        except Exception as e:  # noqa: BLE001
            self.error = str(e)

    def upto(self, t: float) -> list[dict[str, Any]]:
        with self.lock:
            return [s for s in self.samples if s.get("t", 0) <= t]

    def close(self) -> None:
        if self._stream is not None:
            try:
                self._stream.close()
            except ValueError:
                pass  # still running in its thread: it ends when its process is killed


@dataclass
class Child:
    argv: list[str]
    started: float = 0.0
    ended: Optional[float] = None
    exit_code: Optional[int] = None
    proc: Optional[subprocess.Popen] = None

    def start(self) -> None:
        shim = [sys.executable, "-c", SHIM, str(os.getpid())]
        self.started = time.time()
        self.proc = subprocess.Popen(shim + self.argv)  # inherits stdin, stdout, stderr, env, cwd

    def wait(self, timeout: float) -> Optional[int]:
        try:
            rc = self.proc.wait(timeout=max(0.0, timeout))
        except subprocess.TimeoutExpired:
            return None
        self.ended = self.ended or time.time()
        self.exit_code = 128 - rc if rc < 0 else rc
        return self.exit_code

    def signal(self, sig: int) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(sig)


@dataclass
class Guarded:
    """Everything the report needs."""

    child: Child
    windows: list[W.Window] = field(default_factory=list)
    reasons: list[W.Reason] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    interrupted: bool = False
    metrics_available: Optional[bool] = None
    adaptive: Optional[dict[str, Any]] = None  # the adaptive tiers judged against (the engine's Adaptive), when the server runs them


class Guard:
    def __init__(self, target: Target, feature: Feature, receipt: dict[str, Any], *, threshold: int,
                 window: float, hold: int, ranks: list[str], on_window: Optional[Callable[[W.Window], None]] = None,
                 accept_eager: bool = False):
        self.t, self.feature, self.receipt = target, feature, receipt
        self.threshold, self.window, self.hold, self.ranks = threshold, window, hold, ranks
        self.expect_below = feature.expect.speculate_at_or_below_threshold
        self.engine = engines.of(feature)
        self.serving = self.engine.serving
        self.on_window = on_window
        self.prev_sample: Optional[dict[str, Any]] = None
        self.startup_time = None
        self.tracker = None  # the engine's adaptive controller (engines/protocol.py Adaptive), when the server runs it
        self.accept_eager = accept_eager
        self.backends: Optional[dict[str, Any]] = None  # /server_info's attention backends at the previous sample
        self.captured: Optional[bool] = None  # the server captured decode graphs (from /server_info, then the evidence)

    def run(self, argv: list[str]) -> Guarded:
        t = self.t
        offset = t.host.size(t.log) or 0 if t.log else 0
        child = Child(argv)
        out = Guarded(child)
        if self.engine.adaptive is not None:
            self.tracker, notes = self.engine.adaptive.setup(t, self.receipt, self.engine.classifier(self.feature), offset)
            out.notes += notes
            if self.tracker is not None and self.tracker.config is not None:
                out.adaptive = self.tracker.config.to_json()
        tap = LogTap(t, self.feature, offset, self.tracker) if t.log else None
        scraper = Scraper(t, max(0.5, min(self.window / 2, 5.0)), self.serving.metrics_prefix)
        threads = [threading.Thread(target=x.run, name=type(x).__name__, daemon=True) for x in (tap, scraper) if x]
        for th in threads:
            th.start()
        old = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}

        def forward(signum, frame):  # Ctrl-C reaches the benchmark from the terminal; the rest we pass on
            out.interrupted = True
            if signum != signal.SIGINT:
                child.signal(signum)

        for s in old:
            signal.signal(s, forward)
        try:
            child.start()
            t0 = child.started
            edge = t0
            while True:
                edge += self.window
                code = child.wait(edge - time.time())
                if code is not None:
                    time.sleep(min(0.5, self.window / 4))  # the last lines and sample reach us
                    out.windows.append(self.cut(out, tap, scraper, t0, edge - self.window, time.time(), last=True))
                    break
                out.windows.append(self.cut(out, tap, scraper, t0, edge - self.window, edge))
        finally:
            for s, h in old.items():
                signal.signal(s, h)
            for x in (tap, scraper):
                if x:
                    x.close()
        out.reasons = W.reasons(out.windows, self.hold, self.threshold, claims=child.exit_code == 0,
                                accept_eager=self.accept_eager)
        if self.accept_eager and (note := W.eager_note(out.windows)):
            out.notes.append(note)
        if self.engine.supports(GRAPH_PASSES) and out.metrics_available and all(
                w.passes is None for w in out.windows if w.traffic):
            out.notes.append(f"decode graphs from /metrics: not reported (no {self.serving.graph_passes}: "
                             f"{self.engine.title} before 0.5.7); judged from the Decode batch lines' `cuda graph:`")
        if child.exit_code != 0 and not any(w.traffic for w in out.windows):
            out.notes.append(f"the benchmark exited {child.exit_code} before any request reached the server")
        if tap is not None and tap.error:
            out.notes.append(f"log: {tap.error}")
        if scraper.error:
            out.notes.append(f"/metrics sampler: {scraper.error}")
        return out

    # --- one window ------------------------------------------------------------------------------
    def cut(self, out: Guarded, tap: Optional[LogTap], scraper: Scraper, t0: float, start: float, end: float,
            last: bool = False) -> W.Window:
        w = W.Window(len(out.windows) + 1, start - t0, end - t0, last=last)
        w.ranks = {r: W.RankWindow(r) for r in self.ranks}
        steps: dict[str, Any] = {}
        if tap is not None:
            decode, w.served, w.events, steps = tap.take()
            for label, d in decode:
                label = "" if self.ranks == [""] else label  # one engine: its lines whatever they call it
                w.ranks.setdefault(label, W.RankWindow(label)).decode.append(d)
            if self.ranks == [""]:
                steps = {"": next(iter(steps.values()))} if steps else {}
        self.metrics(w, out, scraper.upto(end))
        self.identity(w)
        cfg = self.tracker.config if self.tracker is not None else None
        controller = self.engine.adaptive.window(cfg, steps) if cfg is not None else None
        W.judge(w, self.threshold, self.expect_below, W.level_of(out.windows, self.threshold), controller)
        if self.engine.supports(GRAPH_PASSES):
            W.judge_graph(w, self.captured)
        if self.on_window:
            self.on_window(w)
        return w

    def metrics(self, w: W.Window, out: Guarded, samples: list[dict[str, Any]]) -> None:
        new = [s for s in samples if self.prev_sample is None or s["t"] > self.prev_sample["t"]]
        if not new:
            return
        chain = ([self.prev_sample] if self.prev_sample else []) + new
        self.prev_sample = chain[-1]
        with_metrics = [s for s in chain if s.get("metrics") is not None]
        if out.metrics_available is None and chain:
            out.metrics_available = bool(with_metrics)
        if with_metrics:
            w.counters = _deltas(with_metrics, w, self.serving.counters)
            w.tokens_per_verify = self.engine.tokens_per_verify(w.counters)
            # per rank and mode; a counter that is absent is "not reported" (None), never zero eager passes
            got = None
            for a, b in zip(with_metrics, with_metrics[1:]):
                got = GP.add(got, GP.delta(GP.passes(a["metrics"], self.serving.graph_passes),
                                           GP.passes(b["metrics"], self.serving.graph_passes)))
            if got is not None:  # by the guard's rank names: DPn, or "" for one scheduler stream
                w.passes = {}
                for rank, modes in got.items():
                    key = "" if self.ranks == [""] else rank.split(" ")[0]
                    w.passes = GP.add(w.passes, {key: modes})
            for s_labels, value in _series(with_metrics[-1], self.serving.accept_gauge):
                r = w.ranks.get(self.metric_rank(s_labels))
                if r is not None:
                    r.gauge_accept = value
            for s_labels, value in _series(with_metrics[-1], self.serving.steps_gauge):
                r = w.ranks.get(self.metric_rank(s_labels))
                if r is not None:
                    r.num_steps = value
            for label, value in self.engine.metric_accept(with_metrics).items():  # where no gauge says it (vLLM's counters)
                r = w.ranks.get(self.metric_rank({"engine": label}))
                if r is not None:
                    r.gauge_accept = value
        errors = [s.get("metrics_error") for s in new if s.get("metrics_error") and "HTTP 404" not in s["metrics_error"]]
        if errors and len(errors) == len(new):
            w.events.append(W.Event("evidence-stopped", f"/metrics stopped answering ({errors[-1]})"))
        info = new[-1].get("info") or {}
        self.compute_path(w, [s.get("info") or {} for s in new])
        st = info.get("startup_time")
        if st is not None:
            if self.startup_time is not None and st != self.startup_time:
                w.events.append(W.Event("restarted", f"/server_info startup_time changed ({self.startup_time} -> {st})"))
            self.startup_time = st
        avg = info.get("avg_spec_accept_length") or []
        if len(avg) > 1 and avg[0] is None and any(a is not None for a in avg[1:]):
            w.events.append(W.Event("note", "/server_info internal_states[0] has no avg_spec_accept_length while other "
                                            "DP ranks have one: a client that reads internal_states[0] (sglang."
                                            "bench_serving's 'Accept length') reports none, or another rank's", False))

    def compute_path(self, w: W.Window, infos: list[dict[str, Any]]) -> None:
        """/server_info's attention backends (a change between samples is fatal: DS710) and whether
        its server_args switch decode graphs off (then eager decode is what was configured)."""
        fields = self.serving.backend_fields
        for info in infos:
            args = info.get("args")
            if not isinstance(args, dict):
                continue
            if self.captured is None:
                off = self.engine.graphs_off(args)
                self.captured = None if off is None else not off
            now = {f: args.get(f) for f in fields if f in args}
            if self.backends is not None and now != self.backends:
                changed = ", ".join(f"{f} {self.backends.get(f)!r} -> {now.get(f)!r}" for f in fields
                                    if self.backends.get(f) != now.get(f))
                w.events.append(W.Event("backend-changed", f"/server_info {changed}: the benchmark's numbers mix "
                                                           f"two attention backends"))
            self.backends = now

    def metric_rank(self, labels: dict[str, str]) -> str:
        name, prefix = self.serving.rank_label
        return "" if self.ranks == [""] or name not in labels else f"{prefix}{labels[name]}"

    def identity(self, w: W.Window) -> None:
        """The proven server process is still the one running (the gate's own checks, each window;
        a Slurm run's are checked at the start and the end only: each costs an srun)."""
        where = self.t.where  # a scheduler's run (a Slurm job): checked at the start and the end only
        if where is not None and not w.last:
            return
        try:
            (where.check_server if where is not None else receipts.check_process)(self.t.host, self.receipt)
        except receipts.GateFailed as e:
            kind = "died" if "not running" in str(e) else "restarted"
            w.events.append(W.Event(kind, str(e)))


def _series(sample: dict[str, Any], name: Optional[str]) -> list[tuple[dict[str, str], float]]:
    if name is None:  # (a gauge the engine does not export)
        return []
    return [(labels, value) for n, labels, value in sample.get("metrics") or [] if n == name]


def _deltas(samples: list[dict[str, Any]], w: W.Window, counters: tuple[str, ...]) -> dict[str, float]:
    """Per counter, the sum over its series of what it counted between the first and last sample;
    a series that went down was reset: counted from zero, as Prometheus' rate() does, and reported."""
    out = {name: 0.0 for name in counters}
    reset: dict[str, str] = {}
    for a, b in zip(samples, samples[1:]):
        before = {(n, tuple(sorted(lb.items()))): v for n, lb, v in a["metrics"] if n in counters}
        for n, lb, v in b["metrics"]:
            if n not in counters:
                continue
            old = before.get((n, tuple(sorted(lb.items()))))
            if old is None:
                continue
            if v < old:
                reset[n] = f"{n} {old:g} -> {v:g}"
                out[n] += v
            else:
                out[n] += v - old
    if reset:
        w.events.append(W.Event("counter-reset", f"the server's counters went down ({', '.join(reset.values())}): "
                                                 f"they were reset, so its cumulative figures no longer cover the run"))
    return {k: v for k, v in out.items() if v or any(k == n for s in samples for n, _, _ in s["metrics"])}


def _crash(k, obs: Observation) -> Optional[str]:
    """The crash a line proves (sglang: a decisive crash row; vLLM: a crash row of its log_lines.toml)."""
    row = obs.landmark or getattr(k, "line_by_id", {}).get(obs.id)
    if row is None or not getattr(row, "crash", None) or not getattr(row, "decisive", True):
        return None
    gone = exits.of(obs.data)  # a child's exit code: name the process and the signal that ended it
    return f"{row.crash}: {gone.describe()}" if gone is not None else row.crash


def _float(v) -> Optional[float]:
    try:
        return None if v is None else float(v)
    except (TypeError, ValueError):
        return None
