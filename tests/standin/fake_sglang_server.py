#!/usr/bin/env python3
"""STAND-IN for ``python -m sglang.launch_server`` on a GPU box. It is NOT sglang.

What it is: a small stdlib-only program (any python3 >= 3.8, also run over SSH) that behaves, from the
outside, like a patched sglang server being launched on a GPU machine, so that ``dynspec launch / watch /
stop / prove`` can be tested where there is no GPU:

* it accepts sglang's server flags (the real option list of the release family, read from the published
  wheels: 0.5.9's for releases before 0.5.19, 0.5.23's after) and rejects unknown ones with argparse's real
  ``launch_server.py: error: unrecognized arguments: ...`` (exit 2);
* it decides like the real release, from its own frozen snapshot of the release rules
  (fake_sglang_data.json, "tables"; never from the dynspec under test, so a wrong row in configs/sglang
  makes the two disagree and a test fail): the overlap rules, the dispatch, subclasses, warning texts:
  which spec-v2 / overlap warning the launcher prints, whether argument resolution raises, which worker
  class the scheduler builds, and so whether the patched class's marker
  ``Dynamic speculation disable enabled: threshold=N`` is logged (on every TP rank);
* it prints its log lines with sglang's own format strings of the named release (bare argument-resolution
  warnings before 0.5.11, ``[YYYY-mm-dd HH:MM:SS( TPr)] msg`` after logging is configured, the
  ``server_args=ServerArgs(...)`` repr before 0.5.19 and the ``server_args={...}`` dict after, tqdm bars,
  uvicorn lines), on stderr (and uvicorn's access log on stdout) as sglang does;
* it keeps the relative pacing of the seed's recorded run (configs/demo/seed-live.log: ~200 s of weights,
  ~38 s of CUDA graphs, ...) multiplied by STANDIN_PACE;
* it spawns one child "scheduler" process per local TP rank (multiprocessing spawn, like sglang; the
  children die with their parent through PR_SET_PDEATHSIG like sglang's kill_itself_when_parent_died),
  handles SIGTERM like sglang (drain, then SIGKILL its tree and itself), and serves sglang's HTTP API
  (/health, /health_generate, /model_info, /server_info, /generate, /v1/completions, /metrics, ...) with the
  release's JSON shapes, simulating decoding: ``Decode batch`` lines whose accept length falls to 1.00 while
  the running batch exceeds the patched threshold;
* with ``--speculative-adaptive`` (0.5.11+, EAGLE/EAGLE3, topk 1) it runs sglang's adaptive controller, ported
  from the 0.5.23 wheel (a step slot per batch-size tier of the release's default config, EMA of accepted
  drafts, warm-up 10, an update every 5 verify batches, a probe from 0 steps), logging its real lines and
  exporting the active steps as ``sglang:spec_num_steps``; otherwise its real fallback line.

What it is not: there is no model, no tokenizer, no GPU, no CUDA, no NCCL. Generated text is filler, token
counts are estimates, memory numbers are the seed's. Line formats follow the named release's format strings;
which lines exist between those landmarks is a selection, not everything sglang prints. Traceback frames are
0.5.9's files and line numbers whatever the release. As in the pinned release, spec statistics
(spec_verify_ct, spec_accept_length, ...) are in /generate's meta_info; /v1/completions returns the plain
OpenAI shape (text, usage, metadata) without them. A patched worker logs the marker only when
--speculative-disable-batch-threshold is given (the patch has nothing to announce otherwise).

Run it like sglang: ``python3 fake_sglang_server.py --model-path ... [--port ...]`` or, from this directory,
``python3 -m fake_sglang_server ...``. It reads fake_sglang_data.json beside it (sglang's option lists and
ServerArgs fields from the wheels, and the frozen release rules it decides from; make_fake_sglang_data.py
wrote it). HTTP: GET /health, /health_generate (503 until "fired
up", and during shutdown), /model_info and /get_model_info, /server_info and /get_server_info (deprecated
aliases log sglang's warning from 0.5.6), /v1/models, /metrics (404 without --enable-metrics); POST
/generate and /v1/completions (both also with "stream": true, as server-sent events).

Stand-in controls are environment variables (never flags, so the command line stays sglang's):
  STANDIN_SGLANG_VERSION   release to imitate (default 0.5.9; must be in configs/sglang/releases.toml)
  STANDIN_PATCHED_CLASS    worker class carrying the patch (default EAGLEWorkerV2); "none" = unpatched, then
                           --speculative-disable-batch-threshold is an unrecognized argument
  STANDIN_PACE             seconds scale of the start-up pacing (default 1 = the seed's ~5 minutes; 0 = none)
  STANDIN_CRASH_AT         phase at which to crash with a real-looking traceback
  STANDIN_OOM_AT           phase at which to die of CUDA out of memory
  STANDIN_HANG_AT          phase at which to stop printing and hang
                           phases: args distributed weights kv-cache cuda-graph draft ready serving
                           (serving: on the first decode of a client request)
  STANDIN_IGNORE_SIGTERM=1 ignore SIGTERM (launcher and schedulers), to test SIGKILL escalation
  STANDIN_IGNORE_THRESHOLD=1  the patch is logged but never disables speculation (a broken feature)
  STANDIN_CHILDREN_SURVIVE_PARENT=1  schedulers do not die with the launcher (no PR_SET_PDEATHSIG), like
                           workers stuck in a driver call; only a process-group kill takes them down
  STANDIN_DECODE_STEP      seconds per simulated decode step (default 0.02; not scaled by STANDIN_PACE)
  STANDIN_ACCEPT_PROB      per-draft-token acceptance probability while speculating (default 0.75)
  STANDIN_SPLIT_MARKER     seconds between the two halves of each marker line (each half its own write, as
                           a block-buffered writer or a slow pipe delivers a line; default 0 = one write)
  STANDIN_REPLAY           what goes wrong while a benchmark runs, comma-separated EVENT@S or EVENT; the clock
                           starts at the first client request after the server gets SIGUSR1 ("the benchmark
                           starts now": proving the server before leaves it intact):
                             collapse@S    acceptance falls to nothing (accept len 1.00), no error, no warning
                           (sglang #37326, PR #21272's symptom)
                             restart@S     the server starts again in place (exec: same pid, a fresh start-up
                           in the same log, counters from zero), as a supervisor loop restarts it
                             reset@S       the Prometheus counters and the cumulative accept length restart from
                           zero while the server goes on (sglang PR #29329: flush_cache resets them)
                             rank0-silent  with --dp-size > 1, DP rank 0 serves its share but logs no Decode batch
                           line, exports no gauge and no avg_spec_accept_length (sglang PR #34743)
                             eager@S       decode falls out of CUDA graphs (as a running batch above
                           cuda_graph_max_bs does: CudaGraphRunner.can_run is false): every Decode batch line
                           says `cuda graph: False` and sglang:cuda_graph_passes_total counts mode="decode_none"
                             backend@S     /server_info's attention_backend and speculative_draft_attention_backend
                           change (as a server restarted in place with another backend would show)
                             pin@S         with --speculative-adaptive: acceptance dips until the adaptive
                           controller has stepped down to its tier's lowest draft steps (its real update lines),
                           then its verify results stop reaching it (as when a patched verify path skips
                           on_verify_complete): it stays there while acceptance is back
  STANDIN_REPLAY_LOG       a file the stand-in appends "UNIX_TIME EVENT" to as each replayed event happens (for
                           the tests' clocks; the server's log shows only what sglang would write)
"""
from __future__ import annotations

import argparse
import ast
import datetime
import http.server
import json
import multiprocessing
import os
import random
import signal
import socket
import socketserver
import sys
import threading
import time
import urllib.request
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
DATA_FILE = os.path.join(HERE, "fake_sglang_data.json")
SITE = "/usr/local/lib/python3.12/dist-packages/sglang"  # where sglang lives in the lmsysorg/sglang image
PHASES = ("args", "distributed", "weights", "kv-cache", "cuda-graph", "draft", "ready", "serving")
FEATURE_FLAG = "--speculative-disable-batch-threshold"
FEATURE_DEST = "speculative_disable_batch_threshold"
MARKER = "Dynamic speculation disable enabled: threshold={}"
KNOWN_CONTROLS = {
    "STANDIN_SGLANG_VERSION", "STANDIN_PATCHED_CLASS", "STANDIN_PACE", "STANDIN_CRASH_AT", "STANDIN_OOM_AT",
    "STANDIN_HANG_AT", "STANDIN_IGNORE_SIGTERM", "STANDIN_IGNORE_THRESHOLD", "STANDIN_CHILDREN_SURVIVE_PARENT",
    "STANDIN_DECODE_STEP", "STANDIN_ACCEPT_PROB", "STANDIN_SPLIT_MARKER", "STANDIN_REPLAY",
    "STANDIN_REPLAY_LOG",
}
REPLAY_TIMED, REPLAY_FLAGS = ("collapse", "restart", "reset", "pin", "eager", "backend"), ("rank0-silent",)

# Seconds each start-up step took in the seed's run (configs/demo/seed-live.log, sglang 0.5.9, 8x H100).
SEED_PACING = {
    "resolve": 1.0, "distributed": 4.0, "to-weights": 1.0, "weights": 198.21, "kv-cache": 3.0,
    "memory-pool": 1.0, "to-capture": 1.0, "capture": 38.44, "to-draft": 2.0, "draft-weights": 9.02,
    "to-draft-capture": 1.0, "draft-capture": 21.37, "to-stats": 1.0, "to-uvicorn": 2.0, "warmup": 3.0,
}
# GPU memory figures of the seed's run (GB), used for every launch.
MEM = {"start": 78.52, "dist": 0.41, "after-weights": 6.13, "weights": 72.39, "kv": 27.73, "pool": 4.12,
       "capture-begin": 4.02, "capture-use": 0.58, "after-capture": 3.44, "after-draft": 2.51, "draft": 0.93,
       "draft-capture-begin": 2.41, "draft-capture-use": 0.31, "final": 2.10}
MAX_TOTAL_NUM_TOKENS = 412384
FULL_TEXTS = {  # warnings.toml keeps matchable prefixes; these are the whole messages (reference §2c)
    "overlap-off-spec-v2-off": "Overlap scheduler is disabled when spec v2 is off or using unsupported "
                               "speculative algorithm. You can set env SGLANG_ENABLE_SPEC_V2=True to enable "
                               "the experimental overlap scheduler. ",
    "spec-v2-env-removed": "SGLANG_ENABLE_SPEC_V2 has been removed: speculative decoding always runs the V2 "
                           "worker. Use --disable-overlap-schedule to select the non-overlap (synchronous) path.",
    "max-running-requests-reset": "Max running requests is reset to 48 for speculative decoding. You can "
                                  "override this by explicitly setting --max-running-requests.",
    "spec-v1-used": "Spec v1 is used for eagle/eagle3/standalone speculative decoding because {reason}.",
}
DEST_ALIASES = {"tensor_parallel_size": "tp_size", "pipeline_parallel_size": "pp_size",
                "data_parallel_size": "dp_size", "expert_parallel_size": "ep_size",
                "attention_context_parallel_size": "attn_cp_size", "moe_data_parallel_size": "moe_dp_size"}
WORDS = (" Paris", ".", " It", " is", " the", " capital", " and", " most", " populous", " city", " of",
         " France", ",", " with", " an", " estimated", " population", " of", " two", " million")


class StandinError(Exception):
    """A bad STANDIN_* control: reported as the stand-in itself, never in sglang's voice."""


# ================================================================================================
# Knowledge: the frozen release rules (the JSON snapshot beside this file; `live` only for the tests
# that compare the snapshot with dynspec's tables)
# ================================================================================================
def tables_from_knowledge(k) -> dict:
    """dynspec's sglang tables with each version specifier expanded to the releases it covers."""
    def rel(spec):
        return k.versions_in(k.mask(spec))

    def sw(s):
        return {"kind": s.kind, "name": s.name, "default": s.default, "warning": s.warning}

    rule_keys = ("algorithms", "switch", "user_disable", "topk_gt1", "device_cpu", "overlap", "warning",
                 "reason", "error")
    return {
        "releases": list(k.releases),
        "aliases": dict(k.aliases),
        "overlap": [{"releases": rel(r.versions), "switch": sw(r.switch),
                     "rules": [{key: getattr(rule, key) for key in rule_keys} for rule in r.rules]}
                    for r in k.overlap_ranges],
        "dispatch": [{"releases": rel(r.versions),
                      "rules": [{"algorithms": list(x.algorithms), "overlap": x.overlap, "multi_layer": x.multi_layer,
                                 "module": x.module, "cls": x.cls, "error": x.error} for x in r.rules]}
                     for r in k.dispatch_ranges],
        "classes": [{"name": c.name, "module": c.module, "releases": rel(c.versions), "bases": list(c.bases)}
                    for c in k.classes],
        "warnings": {w.id: {"releases": rel(w.versions), "text": w.text, "pattern": w.pattern, "level": w.level}
                     for w in k.warnings},
        "max_running_requests_reset": {"releases": rel(k.max_running_reset.versions),
                                       "value": k.max_running_reset.value,
                                       "algorithms": list(k.max_running_reset.algorithms)},
    }


class Outcome:
    def __init__(self, overlap, warning, reason=None, error=None, switch_value=None):
        self.overlap, self.warning, self.reason, self.error, self.switch_value = (
            overlap, warning, reason, error, switch_value)


class Tables:
    """Release questions. With `live` (dynspec's Knowledge) the decisions are dynspec's own functions;
    without it the same rules are applied to the snapshot (tests check both agree on every release)."""

    _TRUE, _FALSE = {"true", "1", "yes", "y"}, {"false", "0", "no", "n"}

    def __init__(self, data: dict, live=None):
        self.data, self.live = data, live
        self.releases = data["releases"]
        self.index = {r: i for i, r in enumerate(self.releases)}

    # --- versions ---
    def known(self, version: str) -> bool:
        return version in self.index

    def at_least(self, version: str, first: str) -> bool:
        return self.index[version] >= self.index[first]

    def between(self, version: str, first: str, last: str) -> bool:
        return self.index[first] <= self.index[version] <= self.index[last]

    def canonical(self, algorithm):
        if algorithm is None:
            return None
        up = algorithm.upper()
        return self.data["aliases"].get(up, up)

    # --- overlap switch ---
    def overlap_range(self, version: str):
        return next((r for r in self.data["overlap"] if version in r["releases"]), None)

    def switch_value(self, r: dict, env, flags):
        sw = r["switch"]
        if sw["kind"] == "flag":
            return sw["name"] in flags
        if sw["kind"] == "env":
            raw = env.get(sw["name"])
            if raw is None:
                return sw["default"]
            low = raw.strip().lower()
            return True if low in self._TRUE else False if low in self._FALSE else sw["default"]
        return None

    def resolve_overlap(self, version, algorithm, env, flags, user_disable, topk, device=None) -> Outcome:
        if self.live is not None:
            o = self.live.resolve_overlap(version, algorithm, env=dict(env), flags=set(flags),
                                          user_disable=user_disable, topk=topk, device=device)
            return Outcome(o.overlap, o.warning, o.reason, o.error, o.switch_value)
        r = self.overlap_range(version)
        algo = self.canonical(algorithm)
        if r is None:
            return Outcome(None, None)
        sv = self.switch_value(r, env, flags)
        for rule in r["rules"]:
            if rule["algorithms"] is not None and algo not in rule["algorithms"]:
                continue
            if rule["switch"] is not None and rule["switch"] != sv:
                continue
            if rule["user_disable"] is not None and rule["user_disable"] != user_disable:
                continue
            if rule["topk_gt1"] is not None and rule["topk_gt1"] != (topk is not None and topk > 1):
                continue
            if rule["device_cpu"] is not None and rule["device_cpu"] != (device == "cpu"):
                continue
            overlap = (not user_disable) if rule["overlap"] == "user" else rule["overlap"]
            return Outcome(overlap, rule["warning"], rule["reason"], rule["error"], sv)
        return Outcome(not user_disable, None, None, None, sv)

    # --- dispatch ---
    def worker(self, version, algorithm, overlap, multi_layer=False):
        """(module, class, error) of the worker the scheduler builds, or None when no rule applies."""
        if self.live is not None:
            w = self.live.worker(version, algorithm, overlap, multi_layer)
            return None if w is None else (w.module, w.cls, w.error)
        r = next((r for r in self.data["dispatch"] if version in r["releases"]), None)
        algo = self.canonical(algorithm)
        if r is None:
            return None
        for rule in r["rules"]:
            if algo not in rule["algorithms"]:
                continue
            if rule["overlap"] is not None and rule["overlap"] != overlap:
                continue
            if rule["multi_layer"] is not None and rule["multi_layer"] != multi_layer:
                continue
            return (rule["module"], rule["cls"], rule["error"])
        return None

    def mro(self, version, name):
        if self.live is not None:
            return self.live.mro(version, name)
        out, todo = [], [name]
        while todo:
            n = todo.pop(0)
            if n in out:
                continue
            out.append(n)
            row = next((c for c in self.data["classes"] if c["name"] == n and version in c["releases"]), None)
            if row:
                todo.extend(row["bases"])
        return out

    # --- warnings ---
    def warning_in(self, wid: str, version: str) -> bool:
        return version in self.data["warnings"][wid]["releases"]

    def warning_text(self, wid: str, reason: str = "") -> str:
        row = self.data["warnings"][wid]
        full = FULL_TEXTS.get(wid)
        if full is not None:
            return full.format(reason=reason)
        return row["text"]

    def max_running_reset(self, version, algorithm):
        m = self.data["max_running_requests_reset"]
        if version in m["releases"] and self.canonical(algorithm) in m["algorithms"]:
            return m["value"]
        return None


def load_data() -> dict:
    try:
        with open(DATA_FILE, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        raise StandinError(f"cannot read {DATA_FILE}: {e}")


def load_tables(data: dict) -> Tables:
    """The stand-in decides from its own frozen snapshot (fake_sglang_data.json), never from the
    tables of the dynspec it is testing: a wrong row in configs/sglang then makes dynspec disagree
    with the stand-in, and a test fails."""
    return Tables(data["tables"])


# ================================================================================================
# Release families: which format string a release uses, by first release (sglang-internals §3-4)
# ================================================================================================
class Family:
    def __init__(self, t: Tables, v: str):
        ge = lambda first: t.at_least(v, first)  # noqa: E731
        self.version = v
        self.bare_prelog = not ge("0.5.11")            # warnings before logging is configured
        self.entrypoint_warning = ge("0.5.10")
        self.dump_form = "dict" if ge("0.5.19") else "dataclass"
        self.init_parallel = ge("0.5.21")
        self.load_end = "elapsed-quant" if ge("0.5.10") else "elapsed-dtype" if ge("0.5.9") else "dtype"
        self.kv_dtype = ge("0.5.13")
        self.capture = ("req-bs-end" if ge("0.5.22") else "req-bs-begin" if ge("0.5.16")
                        else "bs-begin" if ge("0.5.14") else "old")
        self.decode = ("comma" if ge("0.5.9") else "comma-trailing" if ge("0.5.4.post1") else "iter" if ge("0.5.4")
                       else "dot-rate" if ge("0.5.3.post2") else "dot")
        self.prefill = ("pending" if ge("0.5.11") else "tput-graph" if ge("0.5.9") else "tput" if ge("0.5.4")
                        else "dot")
        self.accept_rate = "excl-bonus" if ge("0.5.11") else "draft-tokens" if ge("0.5.5.post3") else "steps"
        self.model_info_path = "/model_info" if ge("0.5.6") else "/get_model_info"
        self.deprecated_endpoints = ge("0.5.6")
        self.server_info = "build" if ge("0.5.22") else "resolved" if ge("0.5.19") else "asdict"
        self.log_ms = ge("0.5.6") and os.environ.get("SGLANG_LOG_MS", "").lower() in ("1", "true")
        self.spec_rate_metric = ge("0.5.3.post2")
        self.spec_step_metrics = ge("0.5.13")
        # sglang:cuda_graph_passes_total{mode}: 0.5.7-0.5.9 metrics/collector.py increment_cuda_graph_pass
        # (decode_cuda_graph | decode_none, one per decode forward, scheduler_output_processor_mixin.py);
        # 0.5.10+ observability/metrics_collector.py adds prefill_cuda_graph | prefill_none
        # (increment_prefill_cuda_graph_pass, scheduler_metrics_mixin.py, one per prefill batch)
        self.graph_passes = ge("0.5.7")
        self.prefill_graph_passes = ge("0.5.10")
        # meta_info keys of a finished request (reference §4c)
        self.meta = {"rate_length": ge("0.5.3.post2"), "token_num": ge("0.5.5.post3") and not ge("0.5.11"),
                     "drafts": ge("0.5.11") and not ge("0.5.21"), "histogram": ge("0.5.9") and not ge("0.5.21"),
                     "correct": ge("0.5.12"), "cap": ge("0.5.16")}


# ================================================================================================
# Output, in sglang's formats
# ================================================================================================
class Log:
    def __init__(self, fam: Family):
        self.fam = fam
        self.lock = threading.Lock()

    def _write(self, fd: int, text: str) -> None:
        data = text.encode("utf-8", "replace")
        with self.lock:
            try:
                while data:
                    n = os.write(fd, data)
                    data = data[n:]
            except OSError:
                pass  # the reader went away (e.g. the SSH session): keep running, like a server does

    def ts(self) -> str:
        now = datetime.datetime.now()
        s = now.strftime("%Y-%m-%d %H:%M:%S")
        return s + (".%03d" % (now.microsecond // 1000) if self.fam.log_ms else "")

    def line(self, msg: str, tag: str = "", split: float = 0.0) -> None:
        """A logger record after configure_logger: `[date time( TPr)] msg` on stderr; `split`: in two
        writes that many seconds apart."""
        text = "[%s%s] %s\n" % (self.ts(), tag, msg)
        if split:
            self._write(2, text[:len(text) // 2])
            time.sleep(split)
            text = text[len(text) // 2:]
        self._write(2, text)

    def bare(self, msg: str) -> None:
        """A WARNING logged before logging is configured: Python's lastResort prints just the message."""
        self._write(2, msg + "\n")

    def raw(self, text: str, fd: int = 2) -> None:
        self._write(fd, text)

    def uvicorn(self, msg: str) -> None:
        self._write(2, "[%s] INFO:     %s\n" % (self.ts(), msg))

    def access(self, client: str, method: str, path: str, status: int, phrase: str) -> None:
        self._write(1, '[%s] INFO:     %s - "%s %s HTTP/1.1" %d %s\n' % (self.ts(), client, method, path, status, phrase))


def fmt_interval(t: float) -> str:
    mins, s = divmod(int(t), 60)
    h, m = divmod(mins, 60)
    return "%d:%02d:%02d" % (h, m, s) if h else "%02d:%02d" % (m, s)


class Tqdm:
    """tqdm's output as sglang's progress bars write it to stderr ('\\r' + status each refresh, min 0.1 s
    apart, the final status on close, then a newline)."""

    def __init__(self, log: Log, desc: str, total: int, bar_format: str = None):
        self.log, self.desc, self.total, self.bar_format = log, desc, total, bar_format
        self.n, self.start = 0, time.time()
        self.last = 0.0
        self._show()

    def _status(self) -> str:
        elapsed = time.time() - self.start
        rate = self.n / elapsed if self.n and elapsed > 0 else None
        remaining = fmt_interval((self.total - self.n) / rate) if rate else "?"
        if rate is None:
            rate_fmt = "?it/s"
        elif rate < 1:
            rate_fmt = "%5.2fs/it" % (1 / rate)
        else:
            rate_fmt = "%5.2fit/s" % rate
        pct = 100.0 * self.n / self.total if self.total else 100.0
        if self.bar_format == "sglang":  # sglang's BAR_FORMAT (srt/utils/common.py), ends with a newline
            return "%s: %3.0f%% Completed | %d/%d [%s<%s, %s]\n" % (
                self.desc, pct, self.n, self.total, fmt_interval(elapsed), remaining, rate_fmt)
        chars = " ▏▎▍▌▋▊▉█"
        full, part = divmod(int(pct / 100 * 10 * 8), 8)
        bar = "█" * full + ((chars[part] + " " * (10 - full - 1)) if full < 10 else "")
        return "%s: %3.0f%%|%s| %d/%d [%s<%s, %s]" % (
            self.desc, pct, bar, self.n, self.total, fmt_interval(elapsed), remaining, rate_fmt)

    def _show(self) -> None:
        self.last = time.time()
        self.log.raw("\r" + self._status())

    def update(self, desc: str = None) -> None:
        self.n += 1
        if desc is not None:
            self.desc = desc
        if time.time() - self.last >= 0.1 and self.n < self.total:
            self._show()

    def close(self) -> None:
        self._show()
        self.log.raw("\n")


# ================================================================================================
# Server arguments: sglang's parser and the resolved values
# ================================================================================================
def build_parser(spec: dict, extra: list) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="launch_server.py")
    seen = set()
    for opt in list(spec["options"]) + extra:
        flags = [f for f in opt["flags"] if f not in seen]
        if not flags:
            continue
        seen.update(flags)
        kw = {"dest": opt["dest"], "default": argparse.SUPPRESS}
        if opt["action"] in ("store_true", "store_false"):
            kw["action"] = opt["action"]
        elif opt["action"] == "boolean_optional":
            parser.add_argument(*flags, dest=opt["dest"], action="store_true", default=argparse.SUPPRESS)
            no = ["--no-" + f[2:] for f in flags if f.startswith("--")]
            parser.add_argument(*no, dest=opt["dest"], action="store_false", default=argparse.SUPPRESS)
            seen.update(no)
            continue
        else:
            kw["type"] = {"int": int, "float": float, "json": json.loads}.get(opt["type"], str)
            if opt.get("nargs") is not None:
                kw["nargs"] = opt["nargs"]
            if opt.get("choices"):
                try:
                    kw["choices"] = [kw["type"](c) if not isinstance(c, (int, float)) or kw["type"] is not str else str(c)
                                     for c in opt["choices"]]
                except (TypeError, ValueError):
                    pass
        if opt.get("required"):
            kw["required"] = True
        parser.add_argument(*flags, **kw)
    return parser


def read_model_config(path) -> dict:
    try:
        with open(os.path.join(path, "config.json"), encoding="utf-8") as f:
            cfg = json.load(f)
            return cfg if isinstance(cfg, dict) else {}
    except (OSError, ValueError, TypeError):
        return {}


class ServerArgs:
    """The release's ServerArgs fields with the command line applied and resolution's results."""

    def __init__(self, spec: dict, given: dict, patched: bool):
        self.form = spec["form"]
        self.values = {}
        for name, default in spec["fields"]:
            try:
                self.values[name] = ast.literal_eval(default)
            except (ValueError, SyntaxError):
                self.values[name] = None
        if patched:  # the user's patch adds the field after the speculative attention mode
            anchor = "speculative_attention_mode" if "speculative_attention_mode" in self.values else "speculative_num_draft_tokens"
            items = list(self.values.items())
            at = next((i + 1 for i, (k, _) in enumerate(items) if k == anchor), len(items))
            items.insert(at, (FEATURE_DEST, None))
            self.values = dict(items)
        self.given = {DEST_ALIASES.get(k, k): v for k, v in given.items()}
        for k, v in self.given.items():
            if k in self.values:
                self.values[k] = v

    def __getitem__(self, k):
        return self.values.get(k)

    def __setitem__(self, k, v):
        if k in self.values:
            self.values[k] = v

    def dump(self) -> str:
        if self.form == "dict":
            return "server_args=" + repr(self.values)
        return "server_args=ServerArgs(" + ", ".join("%s=%r" % kv for kv in self.values.items()) + ")"

    def json(self) -> dict:
        return json.loads(json.dumps(self.values, default=str))


# ================================================================================================
# Tracebacks, in the shape Python prints them (frames from the 0.5.9 sources)
# ================================================================================================
def frame(path: str, line: int, func: str, code: str = None) -> str:
    s = '  File "%s/%s", line %d, in %s\n' % (SITE, path, line, func)
    return s + ("    %s\n" % code if code else "")


LAUNCH_FRAMES = (
    '  File "<frozen runpy>", line 198, in _run_module_as_main\n'
    '  File "<frozen runpy>", line 88, in _run_code\n'
    + frame("launch_server.py", 32, "<module>", "server_args = prepare_server_args(sys.argv[1:])")
    + frame("srt/server_args.py", 5592, "prepare_server_args", "return ServerArgs.from_cli_args(raw_args)")
    + frame("srt/server_args.py", 5078, "from_cli_args", "return cls(**{attr: getattr(args, attr) for attr in attrs})")
    + '  File "<string>", line 335, in __init__\n'
)
SCHED_FRAMES = (frame("srt/managers/scheduler.py", 3130, "run_scheduler_process", "scheduler = Scheduler(")
                + frame("srt/managers/scheduler.py", 368, "__init__", "self.init_model_worker()"))
TARGET_FRAMES = (frame("srt/managers/scheduler.py", 564, "init_model_worker", "self.init_tp_model_worker()")
                 + frame("srt/managers/scheduler.py", 522, "init_tp_model_worker", "self.tp_worker = TpModelWorker(")
                 + frame("srt/managers/tp_worker.py", 247, "__init__", "self._init_model_runner()")
                 + frame("srt/managers/tp_worker.py", 330, "_init_model_runner", "self._model_runner = ModelRunner(")
                 + frame("srt/model_executor/model_runner.py", 413, "__init__", "self.initialize(min_per_gpu_memory)"))
CUDA_ERROR = ("RuntimeError: CUDA error: an illegal memory access was encountered\n"
              "CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below "
              "might be incorrect.\nFor debugging consider passing CUDA_LAUNCH_BLOCKING=1\n"
              "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.\n")
OOM_ERROR = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.75 GiB. GPU 0 has a total capacity "
             "of 79.19 GiB of which 1.12 GiB is free. Including non-PyTorch memory, this process has 78.06 GiB "
             "memory in use. Of the allocated memory 76.90 GiB is allocated by PyTorch, and 131.21 MiB is reserved "
             "by PyTorch but unallocated. If reserved but unallocated memory is large try setting "
             "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See documentation for "
             "Memory Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)\n")


# ================================================================================================
# Child "scheduler" processes
# ================================================================================================
def _scheduler_process(rank: int, parent: int, ignore_sigterm: bool, survive_parent: bool) -> None:
    """Body of a child: no output, no work; it exists so that the launch is a real process tree."""
    if ignore_sigterm:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    else:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if not survive_parent and sys.platform.startswith("linux"):
        try:
            import ctypes
            ctypes.CDLL("libc.so.6").prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG, as sglang does
        except (OSError, AttributeError):
            pass
        if os.getppid() != parent:  # the launcher died before the prctl took effect
            os._exit(0)
    orphaned_since = None
    while True:
        time.sleep(1.0)
        if os.getppid() != parent:
            orphaned_since = orphaned_since or time.time()
            if time.time() - orphaned_since > 600:  # a safety net for leaked test trees
                os._exit(0)


def descendants(pid: int) -> list:
    """Every process below pid (from /proc), deepest last."""
    children = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []
    for d in entries:
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % d) as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(d))
    out, todo = [], [pid]
    while todo:
        for c in children.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out


# ================================================================================================
# The simulated scheduler (decoding)
# ================================================================================================
class Request:
    def __init__(self, prompt_tokens: int, max_new: int, log_metrics: bool = True, stream: bool = False):
        self.rid = uuid.uuid4().hex
        self.prompt_tokens, self.max_new, self.log_metrics = prompt_tokens, max(1, max_new), log_metrics
        self.generated, self.verify_ct, self.accepted_drafts = 0, 0, 0
        self.histogram = []
        self.created, self.finished_at = time.time(), None
        self.done = threading.Event()
        self.cond = threading.Condition()
        self.stream = stream

    def text(self, upto: int = None) -> str:
        n = self.generated if upto is None else upto
        return "".join(WORDS[i % len(WORDS)] for i in range(n))

    def output_ids(self, upto: int = None) -> list:
        n = self.generated if upto is None else upto
        return [(1000 + 37 * i) % 32000 for i in range(n)]


# sglang's adaptive speculation (--speculative-adaptive), ported from sglang/srt/speculative/
# adaptive_spec_params.py (0.5.23: AdaptiveStepSlot, AdaptiveSpeculativeParams); the default
# configurations by release, as DEFAULT_ADAPTIVE_CONFIG (0.5.13+) or the single candidate list
# (0.5.11 - 0.5.12.post1) of each wheel read them: (first release, {tier: (candidates, down_hysteresis)}).
ADAPTIVE_DEFAULTS = (
    ("0.5.11", {1: ([1, 3, 7], -0.25)}),
    ("0.5.13", {1: ([1, 3, 7], -0.25), 8: ([1, 3], 0.0), 32: ([1], 0.0)}),
    ("0.5.14", {1: ([1, 3, 7], -0.25), 8: ([0, 1, 3], 0.0), 32: ([0, 1], 0.0), 64: ([0], 0.0)}),
    ("0.5.20", {1: ([1, 3, 5, 7], -0.25), 8: ([0, 1, 3], 0.0), 32: ([0, 1], 0.0), 64: ([0], 0.0)}),
)


# The CUDA-graph batch sizes sglang captures with speculation (0.5.23 arg_groups/cuda_graph_hook.py
# generate_decode_cuda_graph_batch_sizes: "less padding for smaller batch sizes"): adaptive routing pads to them.
SPEC_CAPTURE_BS = list(range(1, 9)) + list(range(10, 33, 2)) + list(range(40, 65, 4)) + list(range(72, 257, 8))


class AdaptiveSlot:
    """AdaptiveStepSlot: the EMA of accepted drafts per request picks the draft steps of one tier."""

    def __init__(self, initial: int, candidates: list, down: float, say) -> None:
        self.candidates = sorted(set(candidates))
        self.steps = initial if initial in self.candidates else self.candidates[len(self.candidates) // 2]
        self.ema = float(self.steps - 1)
        self.down, self.up, self.alpha, self.warmup, self.interval = down, 0.0, 0.2, 10, 5
        self.count = 0
        self.say = say

    def update(self, accepted: list) -> bool:
        if not accepted:
            return False
        if self.steps > 0:
            self.ema = (1 - self.alpha) * self.ema + self.alpha * sum(accepted) / len(accepted)
        self.count += 1
        if self.count <= self.warmup or (self.count - self.warmup) % self.interval:
            return False
        old = self.steps
        i = self.candidates.index(old)
        if old == 0:  # probe the smallest positive step after a zero-step interval
            i = min(i + 1, len(self.candidates) - 1)
            if self.candidates[i] > 0 and self.ema < 0:
                self.ema = float(self.candidates[i] - 1)
            return self.apply(old, self.candidates[i])
        start = i
        while i > 0:
            prev = self.candidates[i - 1]
            if self.ema <= (0.5 if prev == 0 else prev - 0.5) + self.down:
                i -= 1
            else:
                break
        if i == start:
            while i < len(self.candidates) - 1 and self.ema > self.candidates[i] - 0.5 + self.up:
                i += 1
        return self.apply(old, self.candidates[i])

    def apply(self, old: int, target: int) -> bool:
        if target == old:
            return False
        self.steps = target
        self.say("Adaptive spec params updated: steps %d -> %d (ema_accept_len=%.2f)" % (old, target, self.ema))
        return True


class Adaptive:
    """AdaptiveSpeculativeParams + AdaptiveController for one scheduler: routes a batch to its tier
    (padded to a CUDA-graph batch size, then the largest tier at or below it)."""

    def __init__(self, version_at_least, initial: int, capture: list, say) -> None:
        cfg = [c for first, c in ADAPTIVE_DEFAULTS if version_at_least(first)][-1]
        self.slots = {bs: AdaptiveSlot(initial, c, d, say) for bs, (c, d) in sorted(cfg.items())}
        self.capture = sorted(capture)
        self.active = initial
        self.frozen = False  # pin@S: verify results no longer reach the controller
        first = self.slots[min(self.slots)]
        say("AdaptiveSpeculativeParams initialized: steps=%d, candidate_steps=%s" % (first.steps, first.candidates))

    def route(self, batch: int) -> AdaptiveSlot:
        padded = next((c for c in self.capture if c >= batch), batch)
        return self.slots[max([bs for bs in self.slots if bs <= padded] or [min(self.slots)])]


class Engine(threading.Thread):
    """One DP rank's scheduler (sglang runs one per DP rank; each logs its own Decode batch lines)."""

    def __init__(self, launcher: "Launcher", dp_rank: int = 0):
        super().__init__(name="scheduler", daemon=True)
        self.l = launcher
        self.dp_rank = dp_rank
        self.silent = dp_rank == 0 and launcher.dp > 1 and "rank0-silent" in launcher.ctl.replay
        self.cond = threading.Condition()
        self.waiting, self.running = [], []
        self.frozen = False
        self.crash_kind = None  # "crash" | "oom": raise at the first decode of a client request once armed
        self.crash_armed = False
        self.forward_ct_decode = 0
        self.graph_passes = {"decode_cuda_graph": 0, "decode_none": 0, "prefill_none": 0}  # this scheduler's
        self.last_graph = True  # can_run_cuda_graph of the latest decode forward (the Decode batch line's)
        self.rng = random.Random(1234)
        self.interval_tokens, self.interval_accepted, self.interval_fct, self.interval_drafts_ok = 0, 0, 0, 0
        self.interval_start = time.time()
        self.total_accepted, self.total_fct = 0, 0
        self.last_gen_throughput = 0.0
        self.last_input_throughput = 0.0
        self.stats = {"running": 0, "tokens": 0, "usage": 0.0, "queue": 0, "accept_len": 0.0, "accept_rate": 0.0}
        self.counters = launcher.counters  # the tokenizer manager's, shared by all DP ranks
        self.adaptive = None  # Adaptive, built with the draft worker when --speculative-adaptive runs

    # --- what the patch decides ---
    def speculating(self, batch: int) -> bool:
        l = self.l
        if not l.algorithm:
            return False
        if l.marker_threshold is not None and not l.ctl.ignore_threshold and batch > l.marker_threshold:
            return False
        return True

    def submit(self, req: Request) -> None:
        with self.cond:
            self.waiting.append(req)
            self.cond.notify_all()

    def inflight(self) -> list:
        with self.cond:
            return [r.rid for r in self.running + self.waiting if r.log_metrics]

    def freeze(self) -> None:
        with self.cond:
            self.frozen = True

    def run(self) -> None:
        l = self.l
        while True:
            with self.cond:
                while self.frozen or not (self.waiting or self.running):
                    self.cond.wait(1.0)
                room = max(0, l.max_running_requests - len(self.running))
                admitted, self.waiting = self.waiting[:room], self.waiting[room:]
                before = len(self.running)
            if admitted:
                self.prefill(admitted, before)
            with self.cond:
                self.running.extend(admitted)
                batch = list(self.running)
            if any(r.generated < r.max_new for r in batch):
                self.decode([r for r in batch if r.generated < r.max_new])
            with self.cond:
                done = [r for r in self.running if r.generated >= r.max_new]
                self.running = [r for r in self.running if r.generated < r.max_new]
            l.last_heartbeat = time.time()
            for r in done:
                r.finished_at = time.time()
                if r.log_metrics:
                    self.l.count("requests", 1)
                r.done.set()
                with r.cond:
                    r.cond.notify_all()

    def prefill(self, reqs: list, running_before: int) -> None:
        l = self.l
        tic = time.time()
        time.sleep(l.ctl.decode_step)
        new_tokens = sum(r.prompt_tokens for r in reqs)
        self.last_input_throughput = new_tokens / max(time.time() - tic, 1e-6)
        used = sum(r.prompt_tokens + r.generated for r in self.running) + new_tokens
        usage = used / MAX_TOTAL_NUM_TOKENS
        f = l.fam.prefill
        head = "Prefill batch. " if f == "dot" else "Prefill batch, "
        msg = (head + "#new-seq: %d, #new-token: %d, #cached-token: 0, token usage: %.2f, #running-req: %d, "
               "#queue-req: %d, " % (len(reqs), new_tokens, usage, running_before, len(self.waiting)))
        if f == "tput":
            msg += "input throughput (token/s): %.2f, " % self.last_input_throughput
        elif f == "tput-graph":
            msg += "input throughput (token/s): %.2f, cuda graph: False" % self.last_input_throughput
        elif f == "pending":
            msg += "#pending-token: 0, cuda graph: False, input throughput (token/s): %.2f" % self.last_input_throughput
        l.log.line(msg, l.tag(0, self.dp_rank))
        if any(r.log_metrics for r in reqs):
            self.graph_passes["prefill_none"] += 1  # prefill runs no CUDA graph (no piecewise graphs here)
        for r in reqs:
            r.generated = 1  # prefill samples the first token
            if r.log_metrics:
                l.count("prompt", r.prompt_tokens)
                l.count("generation", 1)
            self.interval_tokens += 1
            with r.cond:
                r.cond.notify_all()

    def decode(self, batch: list) -> None:
        l = self.l
        if self.crash_kind and self.crash_armed and any(r.log_metrics for r in batch):
            l.scheduler_crash("serving", self.crash_kind)
        time.sleep(l.ctl.decode_step)
        n = len(batch)
        spec = self.speculating(n)
        drafts = 0
        if l.algorithm:  # a chain accepts at most num_steps drafts (trees too); NGRAM up to its draft tokens
            drafts = min(l.num_steps, l.num_draft_tokens - 1) if l.num_steps else l.num_draft_tokens - 1
        ad = self.adaptive if spec else None
        dipping = False
        if ad is not None:
            slot = ad.route(n)
            self.switch(slot.steps)  # activate_step_by_batch
            drafts = slot.steps
            dipping = l.pin_requested and not ad.frozen
        accepted = []
        for r in batch:
            k = 1
            if spec and not l.collapsed and not dipping:
                while k - 1 < drafts and self.rng.random() < l.ctl.accept_prob:
                    k += 1
            accepted.append(k - 1)
            k = min(k, r.max_new - r.generated)
            r.generated += k
            if l.algorithm:
                r.verify_ct += 1
                r.accepted_drafts += k - 1
                while len(r.histogram) < max(drafts + 1, k):
                    r.histogram.append(0)
                r.histogram[k - 1] += 1
                self.interval_accepted += k
                self.interval_fct += 1
                self.interval_drafts_ok += k - 1
                if r.log_metrics:
                    l.count("verify", 1)
            self.interval_tokens += k
            if r.log_metrics:
                l.count("generation", k)
            with r.cond:
                r.cond.notify_all()
        if ad is not None and not ad.frozen:
            if slot.update(accepted):  # on_verify_complete
                self.switch(slot.steps)
            if dipping and slot.steps == slot.candidates[0]:
                ad.frozen = True
                l.note_replay("pinned")
        self.forward_ct_decode += 1
        # CudaGraphRunner.can_run (0.5.12.post1 model_executor/cuda_graph_runner.py): the running batch must
        # be <= the largest captured batch size (cuda_graph_max_bs), graphs not disabled; replay eager@S forces it
        self.last_graph = not (l.eager or l.args["disable_cuda_graph"] or n > int(l.args["cuda_graph_max_bs"] or n))
        if any(r.log_metrics for r in batch):  # the server's own /health_generate probes aside
            self.graph_passes["decode_cuda_graph" if self.last_graph else "decode_none"] += 1
        if self.forward_ct_decode % l.decode_log_interval == 0:
            self.log_decode(n)

    def switch(self, steps: int) -> None:
        """apply_runtime_state: the worker runs another tier's draft steps."""
        ad = self.adaptive
        if steps != ad.active:
            self.l.log.line("Switch adaptive runtime state: steps %d -> %d, draft_tokens %d -> %d"
                            % (ad.active, steps, ad.active + 1, steps + 1), self.l.tag(0, self.dp_rank))
            ad.active = steps

    def log_decode(self, n: int) -> None:
        l, f = self.l, self.l.fam
        now = time.time()
        self.last_gen_throughput = self.interval_tokens / max(now - self.interval_start, 1e-6)
        self.interval_start, self.interval_tokens = now, 0
        with self.cond:
            used = sum(r.prompt_tokens + r.generated for r in self.running)
            queue = len(self.waiting)
        usage = used / MAX_TOTAL_NUM_TOKENS
        head = {"dot": "Decode batch. ", "dot-rate": "Decode batch. ",
                "iter": "Decode batch [%d], " % self.forward_ct_decode}.get(f.decode, "Decode batch, ")
        msg = head + "#running-req: %d, #token: %d, token usage: %.2f, " % (n, used, usage)
        accept_len = accept_rate = 0.0
        if l.algorithm and self.interval_fct:
            accept_len = self.interval_accepted / self.interval_fct
            steps, ndt = (self.adaptive.active, self.adaptive.active + 1) if self.adaptive else (l.num_steps, l.num_draft_tokens)
            if f.accept_rate == "steps":
                accept_rate = self.interval_accepted / (self.interval_fct * (steps + 1))
            elif f.accept_rate == "draft-tokens":
                accept_rate = self.interval_accepted / (self.interval_fct * ndt)
            else:
                denom = self.interval_fct * max(ndt - 1, 1)
                accept_rate = self.interval_drafts_ok / denom
            self.total_accepted += self.interval_accepted
            self.total_fct += self.interval_fct
            self.interval_accepted = self.interval_fct = self.interval_drafts_ok = 0
            msg += "accept len: %.2f, " % accept_len
            if f.decode != "dot":
                msg += "accept rate: %.2f, " % accept_rate
        msg += "cuda graph: %s, gen throughput (token/s): %.2f, #queue-req: %d" % (
            self.last_graph, self.last_gen_throughput, queue)
        if f.decode in ("dot", "dot-rate", "iter", "comma-trailing"):
            msg += ", "
        if self.silent:
            return
        l.log.line(msg, l.tag(0, self.dp_rank))
        self.stats.update(running=n, tokens=used, usage=usage, queue=queue, accept_len=accept_len,
                          accept_rate=accept_rate)


# ================================================================================================
# HTTP (sglang's API, on stdlib http.server)
# ================================================================================================
PHRASES = {200: "OK", 400: "Bad Request", 401: "Unauthorized", 404: "Not Found", 405: "Method Not Allowed", 503: "Service Unavailable"}


class HTTPServer(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True


def make_handler(launcher: "Launcher"):
    l = launcher

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def version_string(self):
            return "uvicorn"

        def log_message(self, *args):
            pass

        # --- plumbing ---
        def _body(self):
            n = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(n) if n else b""
            return json.loads(raw.decode("utf-8")) if raw.strip() else {}

        def _send(self, status, payload=None, ctype="application/json", log=True):
            data = b"" if payload is None else (
                payload.encode() if isinstance(payload, str) else json.dumps(payload).encode())
            self.send_response(status, PHRASES.get(status, ""))
            if payload is not None:
                self.send_header("content-type", ctype)
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(data)
            if log:
                self._access(status)

        def _access(self, status):
            client = "%s:%d" % self.client_address[:2]
            l.log.access(client, self.command, self.path, status, PHRASES.get(status, ""))

        def _chunk(self, data: str):
            b = data.encode()
            self.wfile.write(b"%x\r\n%s\r\n" % (len(b), b))
            self.wfile.flush()

        def _authorized(self, path):
            """sglang's decide_request_auth (srt/utils/auth.py) for normal endpoints: /health* and
            /metrics* are open; with --api-key every other path needs `Authorization: Bearer KEY`."""
            key = l.args["api_key"]
            if not key or path.startswith("/health") or path.startswith("/metrics"):
                return True
            scheme, _, token = (self.headers.get("Authorization") or "").partition(" ")
            if scheme.lower() == "bearer" and token == key:
                return True
            self._send(401, {"error": "Unauthorized"})
            return False

        def do_HEAD(self):
            self.do_GET()

        def do_GET(self):
            path = self.path.split("?", 1)[0]
            if not self._authorized(path):
                return
            route = {
                "/health": self.health, "/health_generate": self.health_generate,
                "/get_model_info": self.get_model_info, "/model_info": self.model_info,
                "/get_server_info": self.get_server_info, "/server_info": self.server_info,
                "/metrics": self.metrics, "/v1/models": self.models,
            }.get(path)
            if route is None:
                return self._send(405 if path in ("/generate", "/v1/completions") else 404,
                                  {"detail": "Method Not Allowed" if path in ("/generate", "/v1/completions")
                                   else "Not Found"})
            route()

        def do_POST(self):
            path = self.path.split("?", 1)[0]
            if not self._authorized(path):
                return
            if path in ("/generate", "/v1/completions"):
                try:
                    body = self._body()
                except (ValueError, UnicodeDecodeError) as e:
                    return self._send(400, {"error": {"message": "Invalid JSON: %s" % e}})
                return (self.generate if path == "/generate" else self.completions)(body)
            if path in ("/health", "/health_generate", "/get_model_info", "/model_info", "/server_info",
                        "/get_server_info", "/metrics", "/v1/models"):
                return self._send(405, {"detail": "Method Not Allowed"})
            return self._send(404, {"detail": "Not Found"})

        do_PUT = do_POST

        # --- endpoints ---
        def health(self):
            if l.gracefully_exit:
                l.log.line("Health check request received during shutdown. Returning 503.")
                return self._send(503)
            self._send(200 if l.status == "Up" else 503)

        def health_generate(self):
            if l.gracefully_exit:
                l.log.line("Health check request received during shutdown. Returning 503.")
                return self._send(503)
            if l.status != "Up":
                return self._send(503)
            req = Request(1, 1, log_metrics=False)
            tic = time.time()
            l.engine.submit(req)
            if req.done.wait(l.health_timeout):
                return self._send(200)
            l.log.line("Health check failed. Server couldn't get a response from detokenizer for last %d seconds. "
                       "tic start time: %s. last_heartbeat time: %s" % (
                           l.health_timeout, time.strftime("%H:%M:%S", time.localtime(tic)),
                           time.strftime("%H:%M:%S", time.localtime(l.last_heartbeat))))
            l.status = "UnHealthy"
            self._send(503)

        def get_model_info(self):
            if l.fam.deprecated_endpoints:
                l.log.line("Endpoint '/get_model_info' is deprecated and will be removed in a future version. "
                           "Please use '/model_info' instead.")
            self.model_info()

        def model_info(self):
            a = l.args
            self._send(200, {
                "model_path": a["model_path"], "tokenizer_path": a["tokenizer_path"], "is_generation": True,
                "preferred_sampling_params": a["preferred_sampling_params"],
                "weight_version": a["weight_version"] or "default", "has_image_understanding": False,
                "has_audio_understanding": False, "model_type": l.model_type, "architectures": [l.arch],
            })

        def get_server_info(self):
            if l.fam.deprecated_endpoints:
                l.log.line("Endpoint '/get_server_info' is deprecated and will be removed in a future version. "
                           "Please use '/server_info' instead.")
            self.server_info()

        def server_info(self):
            self._send(200, l.server_info())

        def models(self):
            a = l.args
            self._send(200, {"object": "list", "data": [{
                "id": a["served_model_name"], "object": "model", "created": int(l.started), "owned_by": "sglang",
                "root": a["model_path"], "parent": None, "max_model_len": l.context_len}]})

        def metrics(self):
            if not l.args["enable_metrics"]:
                return self._send(404, {"detail": "Not Found"})
            self._send(200, l.metrics_text(), ctype="text/plain; version=0.0.4; charset=utf-8")

        def _run(self, prompt_tokens: int, max_new: int, stream: bool):
            req = Request(prompt_tokens, max_new, stream=stream)
            l.submit(req)
            return req

        def generate(self, body: dict):
            texts = body.get("text", body.get("input_ids"))
            batch = isinstance(texts, list) and texts and not isinstance(texts[0], int)
            items = texts if batch else [texts]
            sp = body.get("sampling_params") or {}
            if isinstance(sp, list):
                sp = sp[0] if sp else {}
            max_new = int(sp.get("max_new_tokens", 128))
            stream = bool(body.get("stream"))
            reqs = [self._run(l.prompt_tokens(t), max_new, stream and not batch) for t in items]
            if stream and not batch:
                return self._stream(reqs[0], lambda r, upto: "data: %s\n\n" % json.dumps(l.generate_out(r, upto)))
            for r in reqs:
                r.done.wait()
            outs = [l.generate_out(r) for r in reqs]
            self._send(200, outs if batch else outs[0])

        def completions(self, body: dict):
            prompt = body.get("prompt", "")
            items = prompt if isinstance(prompt, list) and prompt and not isinstance(prompt[0], int) else [prompt]
            max_new = int(body.get("max_tokens") or 16)
            model = body.get("model") or l.args["served_model_name"]
            stream = bool(body.get("stream"))
            reqs = [self._run(l.prompt_tokens(p), max_new, stream and len(items) == 1) for p in items]
            if stream and len(items) == 1:
                r = reqs[0]
                created = int(time.time())
                sent = [0]

                def chunk(req, upto):
                    delta = req.text(upto)[len(req.text(sent[0])):]
                    sent[0] = upto
                    fin = "length" if req.done.is_set() and upto >= req.generated else None
                    return "data: %s\n\n" % json.dumps({
                        "id": req.rid, "object": "text_completion", "created": created, "model": model,
                        "choices": [{"index": 0, "text": delta, "logprobs": None, "finish_reason": fin,
                                     "matched_stop": None}]})
                return self._stream(r, chunk)
            for r in reqs:
                r.done.wait()
            prompt_tokens = sum(r.prompt_tokens for r in reqs)
            completion_tokens = sum(r.generated for r in reqs)
            self._send(200, {
                "id": reqs[0].rid, "object": "text_completion", "created": int(time.time()), "model": model,
                "choices": [{"index": i, "text": r.text(), "logprobs": None, "finish_reason": "length",
                             "matched_stop": None} for i, r in enumerate(reqs)],
                "usage": {"prompt_tokens": prompt_tokens, "total_tokens": prompt_tokens + completion_tokens,
                          "completion_tokens": completion_tokens, "prompt_tokens_details": None,
                          "reasoning_tokens": 0},
                "metadata": {"weight_version": l.args["weight_version"] or "default"},
            })

        def _stream(self, req: Request, render):
            self.send_response(200, "OK")
            self.send_header("content-type", "text/event-stream; charset=utf-8")
            self.send_header("transfer-encoding", "chunked")
            self.end_headers()
            sent, finished = 0, False
            try:
                while not finished:
                    with req.cond:
                        while req.generated == sent and not req.done.is_set():
                            req.cond.wait(1.0)
                        upto, finished = req.generated, req.done.is_set()
                    self._chunk(render(req, upto))  # the last one carries the finish reason
                    sent = upto
                self._chunk("data: [DONE]\n\n")
                self.wfile.write(b"0\r\n\r\n")
            except OSError:
                pass
            self._access(200)

    return Handler


# ================================================================================================
# The launch
# ================================================================================================
class Controls:
    def __init__(self, env):
        unknown = sorted(k for k in env if k.startswith("STANDIN_") and k not in KNOWN_CONTROLS)
        if unknown:
            raise StandinError("unknown control(s) %s; known: %s" % (", ".join(unknown), ", ".join(sorted(KNOWN_CONTROLS))))
        self.version = env.get("STANDIN_SGLANG_VERSION", "0.5.9").strip()
        pc = env.get("STANDIN_PATCHED_CLASS", "EAGLEWorkerV2").strip()
        self.patched_class = None if pc.lower() in ("", "none") else pc

        def num(name, default, lo=0.0):
            raw = env.get(name)
            if raw is None or raw.strip() == "":
                return default
            try:
                v = float(raw)
            except ValueError:
                raise StandinError("%s=%r is not a number" % (name, raw))
            if v < lo:
                raise StandinError("%s=%r must be >= %s" % (name, raw, lo))
            return v

        def phase(name):
            raw = env.get(name, "").strip()
            if raw and raw not in PHASES:
                raise StandinError("%s=%r is not a phase (%s)" % (name, raw, " ".join(PHASES)))
            return raw or None

        def flag(name):
            return env.get(name, "").strip().lower() in ("1", "true", "yes", "y")

        self.pace = num("STANDIN_PACE", 1.0)
        self.crash_at, self.hang_at, self.oom_at = phase("STANDIN_CRASH_AT"), phase("STANDIN_HANG_AT"), phase("STANDIN_OOM_AT")
        if self.oom_at == "args":
            raise StandinError("STANDIN_OOM_AT=args: argument resolution does not touch the GPU")
        self.ignore_sigterm = flag("STANDIN_IGNORE_SIGTERM")
        self.ignore_threshold = flag("STANDIN_IGNORE_THRESHOLD")
        self.survive_parent = flag("STANDIN_CHILDREN_SURVIVE_PARENT")
        self.decode_step = num("STANDIN_DECODE_STEP", 0.02)
        self.accept_prob = num("STANDIN_ACCEPT_PROB", 0.75)
        self.split_marker = num("STANDIN_SPLIT_MARKER", 0.0)
        self.replay, self.replay_at = set(), {}
        for item in filter(None, (x.strip() for x in env.get("STANDIN_REPLAY", "").split(","))):
            name, _, at = item.partition("@")
            if name in REPLAY_FLAGS and not at:
                self.replay.add(name)
                continue
            try:
                seconds = float(at)
            except ValueError:
                seconds = -1.0
            if name not in REPLAY_TIMED or seconds < 0:
                raise StandinError("STANDIN_REPLAY: %r is not one of %s (EVENT@SECONDS) or %s"
                                   % (item, ", ".join(REPLAY_TIMED), ", ".join(REPLAY_FLAGS)))
            self.replay_at[name] = seconds
        if self.accept_prob > 1:
            raise StandinError("STANDIN_ACCEPT_PROB must be within [0, 1]")


class Launcher:
    def __init__(self, ctl: Controls, tables: Tables, fam: Family, log: Log, args: ServerArgs, env):
        self.ctl, self.t, self.fam, self.log, self.args, self.env = ctl, tables, fam, log, args, env
        self.v = ctl.version
        self.started = time.time()
        self.status = "Starting"
        self.gracefully_exit = False
        self.warming_up = False
        self.running_phase = False  # TokenizerManager's handlers exist (from the first request on)
        self.last_heartbeat = time.time()
        self.children = []
        self.peers = []
        self.shutdown = threading.Event()
        self.health_timeout = int(env.get("SGLANG_HEALTH_CHECK_TIMEOUT", "20"))
        cfg = read_model_config(args["model_path"] or "")
        self.arch = (cfg.get("architectures") or ["LlamaForCausalLM"])[0]
        self.model_type = cfg.get("model_type", "llama")
        self.context_len = int(cfg.get("max_position_embeddings") or 131072)
        self.shards = self.count_shards(args["model_path"], 64)
        self.tp = int(args["tp_size"] or 1)
        self.nnodes = int(args["nnodes"] or 1)
        self.node_rank = int(args["node_rank"] or 0)
        per = max(1, self.tp // self.nnodes)
        self.local_ranks = list(range(self.node_rank * per, min(self.tp, (self.node_rank + 1) * per)))
        self.algorithm = None
        self.marker_threshold = None
        self.worker = None
        self.dp = max(1, int(args["dp_size"] or 1))
        self.counters = {"prompt": 0, "generation": 0, "requests": 0, "verify": 0}
        self.counter_lock = threading.Lock()
        self.collapsed = False
        self.eager = False  # replay eager@S: decode no longer replays a CUDA graph
        self.backend_changed = False
        self.pin_requested = False
        self.adaptive = False  # --speculative-adaptive given, supported and not disabled
        self.replay_started = False
        self.replay_armed = False
        self.next_engine = 0

    # --- small helpers ---
    def tag(self, rank: int, dp_rank=None) -> str:
        dp = " DP%d" % dp_rank if dp_rank is not None and self.dp > 1 else ""
        return dp + (" TP%d" % rank if self.tp > 1 else "")

    def count(self, key: str, n: int) -> None:
        with self.counter_lock:
            self.counters[key] += n

    def submit(self, req: "Request") -> None:
        """The data-parallel controller's round robin; the first client request starts the replay."""
        e = self.engines[self.next_engine % len(self.engines)]
        self.next_engine += 1
        e.submit(req)
        if self.replay_armed and not self.replay_started and self.status == "Up":
            self.replay_started = True
            threading.Thread(target=self.replay, name="replay", daemon=True).start()

    def replay(self) -> None:
        t0 = time.time()
        for name, at in sorted(self.ctl.replay_at.items(), key=lambda kv: kv[1]):
            time.sleep(max(0.0, t0 + at - time.time()))
            self.note_replay(name)
            if name == "collapse":
                self.collapsed = True
            elif name == "eager":
                self.eager = True
            elif name == "backend":
                self.backend_changed = True
            elif name == "pin":
                self.pin_requested = True
            elif name == "reset":
                with self.counter_lock:
                    for k in self.counters:
                        self.counters[k] = 0
                    for e in self.engines:
                        e.total_accepted = e.total_fct = 0
                        e.graph_passes = dict.fromkeys(e.graph_passes, 0)
            elif name == "restart":
                left = ",".join([*sorted(self.ctl.replay), *("%s@%g" % (n, s) for n, s in self.ctl.replay_at.items()
                                                             if n != "restart")])
                env = dict(os.environ, STANDIN_REPLAY=left)
                self.kill_children()
                with open("/proc/self/cmdline", "rb") as f:  # the same command line, byte for byte
                    argv = [x.decode() for x in f.read().split(b"\0")[:-1]]
                os.execve(sys.executable, argv, env)

    def note_replay(self, name: str) -> None:
        if self.env.get("STANDIN_REPLAY_LOG"):
            with open(self.env["STANDIN_REPLAY_LOG"], "a") as f:
                f.write("%.3f %s\n" % (time.time(), name))

    def each(self, msg: str, split: float = 0.0) -> None:
        for r in self.local_ranks:
            self.log.line(msg, self.tag(r), split)

    def rank0(self, msg: str) -> None:
        if 0 in self.local_ranks:
            self.log.line(msg, self.tag(0))

    def pace(self, step: str, fraction: float = 1.0) -> None:
        s = SEED_PACING[step] * fraction * self.ctl.pace
        if s > 0:
            time.sleep(s)

    @staticmethod
    def count_shards(path, default: int) -> int:
        try:
            n = len([f for f in os.listdir(path) if f.endswith(".safetensors")])
        except (OSError, TypeError):
            n = 0
        return n or default

    def prompt_tokens(self, text) -> int:
        if isinstance(text, list):
            return max(1, len(text))
        return max(1, len(str(text or "").split()) + 1)

    # --- phase hooks ---
    def hook(self, phase: str) -> None:
        if self.ctl.crash_at == phase:
            self.fail(phase, "crash")
        if self.ctl.oom_at == phase:
            self.fail(phase, "oom")
        if self.ctl.hang_at == phase:
            self.hang()

    @staticmethod
    def hang() -> None:
        while True:  # stuck in start-up: SIGTERM keeps its default action, as in sglang
            time.sleep(3600)

    def fail(self, phase: str, kind: str) -> None:
        if phase == "args":
            self.launcher_traceback(
                frame("srt/server_args.py", 736, "__post_init__", "self._handle_model_specific_adjustments()")
                + frame("srt/server_args.py", 1188, "_handle_model_specific_adjustments",
                        "hf_config = self.get_model_config().hf_config")
                + frame("srt/server_args.py", 5094, "get_model_config", "self.model_config = ModelConfig.from_server_args(self)"),
                "OSError: Can't load the configuration of '%s'. If you were trying to load it from "
                "'https://huggingface.co/models', make sure you don't have a local directory with the same name. "
                "Otherwise, make sure '%s' is the correct path to a directory containing a config.json file\n"
                % (self.args["model_path"], self.args["model_path"]))
        self.scheduler_crash(phase, kind)

    def launcher_traceback(self, frames: str, error: str, code: int = 1) -> None:
        self.log.raw("Traceback (most recent call last):\n" + LAUNCH_FRAMES + frames + error)
        self.log.raw("", 2)
        os._exit(code)

    def scheduler_crash(self, phase: str, kind: str, error: str = None) -> None:
        """The rank-0 scheduler raises; it reports and SIGQUITs the launcher, which kills the tree."""
        worker_mod = (self.worker or (None, None, None))[0]
        frames = SCHED_FRAMES
        if phase == "distributed":
            frames += TARGET_FRAMES + frame("srt/model_executor/model_runner.py", 451, "initialize",
                                            "min_per_gpu_memory = self.init_torch_distributed()")
            err = ("RuntimeError: NCCL error in: /pytorch/torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:3690, "
                   "unhandled cuda error (run with NCCL_DEBUG=INFO for details), NCCL version 2.27.3\n"
                   "ncclUnhandledCudaError: Call to CUDA function failed.\n")
        elif phase == "weights":
            frames += TARGET_FRAMES + frame("srt/model_executor/model_runner.py", 493, "initialize", "self.load_model()") \
                + frame("srt/model_executor/model_runner.py", 980, "load_model", "self.model = self.loader.load_model(")
            err = "safetensors_rust.SafetensorError: Error while deserializing header: MetadataIncompleteBuffer\n"
        elif phase == "kv-cache":
            frames += TARGET_FRAMES + frame("srt/model_executor/model_runner.py", 590, "initialize",
                                            "self.init_memory_pool(min_per_gpu_memory)")
            err = ("RuntimeError: Not enough memory. Please try to increase --mem-fraction-static. "
                   "Current value: mem_fraction_static=%s\n" % self.args["mem_fraction_static"])
        elif phase == "cuda-graph":
            frames += TARGET_FRAMES + frame("srt/model_executor/model_runner.py", 609, "initialize", "self.init_device_graphs()") \
                + frame("srt/model_executor/model_runner.py", 2156, "init_device_graphs",
                        "self.graph_runner = graph_runners[self.device](self)") \
                + frame("srt/model_executor/cuda_graph_runner.py", 370, "__init__", "self.capture()")
            err = ("Exception: Capture cuda graph failed: CUDA error: operation not permitted when stream is capturing\n"
                   "Possible solutions:\n1. set --mem-fraction-static to a smaller value (e.g., 0.8 or 0.7)\n"
                   "2. set --cuda-graph-max-bs to a smaller value (e.g., 16)\n"
                   "3. disable torch compile by not using --enable-torch-compile\n"
                   "4. disable CUDA graph by --disable-cuda-graph. (Not recommended. Huge performance loss)\n"
                   "Open an issue on GitHub https://github.com/sgl-project/sglang/issues/new/choose \n")
        elif phase == "draft":
            frames += (frame("srt/managers/scheduler.py", 565, "init_model_worker", "self.maybe_init_draft_worker()")
                       + frame("srt/managers/scheduler.py", 561, "maybe_init_draft_worker",
                               "self.draft_worker = DraftWorkerClass(**draft_worker_kwargs)"))
            if error is not None:  # dispatch itself refuses: the exception comes out of create_worker
                frames = SCHED_FRAMES + frame("srt/managers/scheduler.py", 565, "init_model_worker",
                                              "self.maybe_init_draft_worker()") \
                    + frame("srt/managers/scheduler.py", 560, "maybe_init_draft_worker",
                            "DraftWorkerClass = self.spec_algorithm.create_worker(self.server_args)") \
                    + frame("srt/speculative/spec_info.py", 97, "create_worker", "raise ValueError(")
            elif worker_mod:
                frames += frame("srt/speculative/%s.py" % worker_mod.replace(".", "/"), 134, "__init__",
                                "self.draft_worker = TpModelWorker(")
            err = error or "RuntimeError: Error(s) in loading state_dict for draft model: size mismatch for lm_head.weight\n"
        else:  # ready (the warm-up forward) / serving
            loop = "event_loop_overlap" if not self.args["disable_overlap_schedule"] else "event_loop_normal"
            frames = frame("srt/managers/scheduler.py", 3171, "run_scheduler_process", "scheduler.%s()" % loop) \
                + frame("srt/managers/scheduler.py", 1165 if loop == "event_loop_overlap" else 1123, loop,
                        "batch_result = self.run_batch(batch)") \
                + frame("srt/managers/scheduler.py", 2330, "run_batch",
                        "batch_result = self.model_worker.forward_batch_generation(batch)")
            if worker_mod:
                frames += frame("srt/speculative/%s.py" % worker_mod.replace(".", "/"), 600,
                                "forward_batch_generation", "batch_output = self.verify(model_worker_batch)")
            err = CUDA_ERROR
        if kind == "oom":
            err = OOM_ERROR
        self.log.line("Scheduler hit an exception: Traceback (most recent call last):\n" + frames + err.rstrip("\n"),
                      self.tag(self.local_ranks[0] if self.local_ranks else 0))
        if not self.running_phase:
            self.log.line("Received sigquit from a child process. It usually means the child failed.")
        else:
            self.log.line("SIGQUIT received. signum=None, frame=None. It usually means one child failed.")
        self.kill_tree()

    def kill_children(self) -> None:
        pids = set(descendants(os.getpid())) | {p.pid for p in self.children if p.pid}
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        for p in self.children:  # reaped, so multiprocessing's exit hook has nothing to wait for
            try:
                p.join(1)
            except (OSError, AssertionError):
                pass

    def kill_tree(self) -> None:
        """sglang's kill_process_tree(os.getpid()): SIGKILL every descendant, then itself."""
        self.kill_children()
        os.kill(os.getpid(), signal.SIGKILL)
        time.sleep(1)
        os._exit(137)

    # --- argument resolution (launcher process) ---
    def resolve(self) -> None:
        a, t, v = self.args, self.t, self.v
        say = self.log.bare if self.fam.bare_prelog else self.log.line
        algo_raw = a["speculative_algorithm"]
        self.algorithm = t.canonical(algo_raw) if algo_raw else None
        if self.algorithm:
            a["speculative_algorithm"] = self.algorithm
        if not self.fam.bare_prelog and not a["attention_backend"]:
            say("Attention backend not specified. Use fa3 backend by default.")
        a["attention_backend"] = a["attention_backend"] or "fa3"
        user_disable = bool(a.given.get("disable_overlap_schedule"))
        topk_user = a.given.get("speculative_eagle_topk")
        device = a["device"] or "cuda"
        flags = {"--" + k.replace("_", "-") for k, val in a.given.items() if val is True}
        if self.algorithm:
            r = t.overlap_range(v)
            sw = r["switch"] if r else None
            if sw and sw["kind"] == "removed" and sw["warning"] and sw["name"] in self.env:
                say(t.warning_text(sw["warning"]))
            reset = t.max_running_reset(v, self.algorithm)
            if reset is not None and a["max_running_requests"] is None:
                a["max_running_requests"] = reset
                if t.warning_in("max-running-requests-reset", v):  # 0.5.3.x reset it silently
                    say(t.warning_text("max-running-requests-reset"))
            o = t.resolve_overlap(v, self.algorithm, self.env, flags, user_disable, topk_user, device)
            if o.warning and t.warning_in(o.warning, v):
                say(t.warning_text(o.warning, o.reason or ""))
            if o.error:
                self.launcher_traceback(
                    frame("srt/server_args.py", 767, "__post_init__", "self._handle_speculative_decoding()")
                    + frame("srt/server_args.py", 2381, "_handle_speculative_decoding", "raise ValueError("),
                    "ValueError: %s\n" % o.error)
            overlap = o.overlap if o.overlap is not None else not user_disable
            a["disable_overlap_schedule"] = not overlap
            if a["speculative_num_steps"] is None:
                auto = (5, 4, 8) if self.arch in ("LlamaForCausalLM", "Grok1ForCausalLM") and self.algorithm != "STANDALONE" \
                    else (3, 1, 4)
                a["speculative_num_steps"] = auto[0]
                if a["speculative_eagle_topk"] is None:
                    a["speculative_eagle_topk"] = auto[1]
                if a["speculative_num_draft_tokens"] is None:
                    a["speculative_num_draft_tokens"] = auto[2]
            if self.algorithm in ("EAGLE", "EAGLE3", "STANDALONE") and a["speculative_eagle_topk"] == 1 \
                    and a["speculative_num_draft_tokens"] != a["speculative_num_steps"] + 1:
                say("speculative_num_draft_tokens is adjusted to speculative_num_steps + 1 when speculative_eagle_topk == 1")
                a["speculative_num_draft_tokens"] = a["speculative_num_steps"] + 1
            self.worker = t.worker(v, self.algorithm, overlap, bool(a["enable_multi_layer_eagle"]))
            if self.worker and self.worker[1] and self.ctl.patched_class \
                    and self.ctl.patched_class in t.mro(v, self.worker[1]):
                self.marker_threshold = a[FEATURE_DEST]
            if a["speculative_adaptive"] and t.at_least(v, "0.5.11"):  # adaptive_unsupported_reason's first checks
                reason = None
                if self.algorithm not in ("EAGLE", "EAGLE3"):
                    reason = "speculative_algorithm=%s (only EAGLE/EAGLE3 are supported)" % self.algorithm
                elif a["speculative_eagle_topk"] not in (None, 1):
                    reason = "speculative_eagle_topk=%s (only topk=1 is supported)" % a["speculative_eagle_topk"]
                if reason:
                    say("speculative_adaptive disabled: %s. Falling back to static speculative params." % reason)
                else:
                    self.adaptive = True
        self.num_steps = int(a["speculative_num_steps"] or 0)
        self.num_draft_tokens = int(a["speculative_num_draft_tokens"] or 1)
        self.max_running_requests = int(a["max_running_requests"] or (48 if self.algorithm else 1024))
        self.decode_log_interval = max(1, int(a["decode_log_interval"] or 40))
        # what resolution fills in on a GPU host (values of the seed's 8x H100 run where it shows them)
        a["tokenizer_path"] = a["tokenizer_path"] or a["model_path"]
        a["served_model_name"] = a["served_model_name"] or a["model_path"]
        a["device"] = device
        a["mem_fraction_static"] = a["mem_fraction_static"] or 0.85
        a["chunked_prefill_size"] = a["chunked_prefill_size"] or 8192
        a["cuda_graph_max_bs"] = a["cuda_graph_max_bs"] or (self.max_running_requests if self.algorithm else 256)
        a["random_seed"] = a["random_seed"] if a["random_seed"] is not None else random.randint(0, 1 << 30)
        a["sampling_backend"] = a["sampling_backend"] or "flashinfer"
        a["grammar_backend"] = a["grammar_backend"] or "xgrammar"
        a["page_size"] = a["page_size"] or 1
        if self.algorithm:
            a["speculative_moe_runner_backend"] = a["speculative_moe_runner_backend"] or "auto"
        if self.nnodes > 1 and not a["dist_init_addr"]:
            a["dist_init_addr"] = "127.0.0.1:%d" % (int(a["port"] or 30000) + 233)

    # --- processes ---
    def spawn_children(self) -> None:
        ctx = multiprocessing.get_context("spawn")
        for r in self.local_ranks:
            p = ctx.Process(target=_scheduler_process,
                            args=(r, os.getpid(), self.ctl.ignore_sigterm, self.ctl.survive_parent),
                            name="sglang::scheduler_TP%d" % r, daemon=False)
            p.start()
            self.children.append(p)

    def rendezvous(self) -> None:
        """torch.distributed's TCP store: node 0 listens on --dist-init-addr, the others connect (forever)."""
        if self.nnodes <= 1:
            return
        host, _, port = str(self.args["dist_init_addr"]).rpartition(":")
        port = int(port)
        if self.node_rank == 0:
            srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            srv.bind(("", port))
            srv.listen(self.nnodes)
            joined = {}
            while len(joined) < self.nnodes - 1:
                conn, _ = srv.accept()
                line = conn.makefile("r").readline().split()
                if len(line) == 2 and line[0] == "node" and line[1].isdigit():
                    joined[int(line[1])] = conn
                else:
                    conn.close()
            for conn in joined.values():
                conn.sendall(b"go\n")
            self.peers = [srv] + list(joined.values())
            return
        while True:
            try:
                s = socket.create_connection((host.strip("[]") or "127.0.0.1", port), timeout=5)
                s.settimeout(None)
                s.sendall(b"node %d\n" % self.node_rank)
                if s.makefile("r").readline().strip() == "go":
                    self.peers = [s]
                    return
                s.close()
            except OSError:
                pass
            time.sleep(1.0)

    # --- the GPU phase (scheduler processes) ---
    def gpu_phase(self) -> None:
        a, fam = self.args, self.fam
        tic = time.time()
        self.each("Init parallel begin." if fam.init_parallel else "Init torch distributed begin.")
        self.rendezvous()
        self.hook("distributed")
        self.pace("distributed")
        el = time.time() - tic
        if fam.init_parallel:
            self.each("Init parallel ends. elapsed=%.2f s" % el)
            self.each("Memory baseline taken. mem usage=%.2f GB" % MEM["dist"])
        else:
            self.each("Init torch distributed ends. elapsed=%.2f s, mem usage=%.2f GB" % (el, MEM["dist"]))
        self.pace("to-weights")
        self.load_weights(self.arch, self.shards, MEM["start"], MEM["after-weights"], MEM["weights"], "weights", "weights")
        if fam.capture == "old":
            self.kv_cache()
            self.hook("kv-cache")
            self.target_capture()
            self.draft()
        else:  # 0.5.14+: both models load, then memory pools, then the captures
            self.draft(capture=False)
            self.kv_cache()
            self.hook("kv-cache")
            self.target_capture()
            self.draft_capture()
        self.pace("to-stats")
        self.rank0("max_total_num_tokens=%d, chunked_prefill_size=%s, max_prefill_tokens=%s, max_running_requests=%d, "
                   "context_len=%d, available_gpu_mem=%.2f GB" % (
                       MAX_TOTAL_NUM_TOKENS, a["chunked_prefill_size"], a["max_prefill_tokens"],
                       self.max_running_requests, self.context_len, MEM["final"]))

    def load_weights(self, model_type: str, shards: int, before: float, after: float, usage: float, step: str, phase: str):
        tic = time.time()
        self.each("Load weight begin. avail mem=%.2f GB" % before)
        bar = Tqdm(self.log, "Loading safetensors checkpoint shards", shards, "sglang") if 0 in self.local_ranks else None
        for i in range(shards):
            self.pace(step, 1.0 / shards)
            if i == shards // 2:
                self.hook(phase)
            if bar:
                bar.update()
        if bar:
            bar.close()
        el = time.time() - tic
        dtype = "dtype=torch.bfloat16, "
        if self.fam.load_end == "dtype":
            msg = "Load weight end. type=%s, %savail mem=%.2f GB, mem usage=%.2f GB." % (model_type, dtype, after, usage)
        elif self.fam.load_end == "elapsed-dtype":
            msg = "Load weight end. elapsed=%.2f s, type=%s, %savail mem=%.2f GB, mem usage=%.2f GB." % (
                el, model_type, dtype, after, usage)
        else:
            msg = "Load weight end. elapsed=%.2f s, type=%s, avail mem=%.2f GB, mem usage=%.2f GB." % (
                el, model_type, after, usage)
        self.each(msg)

    def kv_cache(self) -> None:
        self.pace("kv-cache")
        mla = "Deepseek" in self.arch or "Kimi" in self.arch
        size = ("KV size: %.2f GB" % MEM["kv"]) if mla else ("K size: %.2f GB, V size: %.2f GB" % (MEM["kv"] / 2, MEM["kv"] / 2))
        dtype = "dtype: torch.bfloat16, " if self.fam.kv_dtype else ""
        self.each("KV Cache is allocated. %s#tokens: %d, %s" % (dtype, MAX_TOTAL_NUM_TOKENS, size))
        self.pace("memory-pool")
        self.each("Memory pool end. avail mem=%.2f GB" % MEM["pool"])

    def capture_bs(self) -> list:
        top = int(self.args["cuda_graph_max_bs"] or 48)
        bs = [1, 2, 4, 8] + list(range(12, 33, 4)) + list(range(40, 257, 8))
        return [b for b in bs if b <= top] or [1]

    def target_capture(self) -> None:
        fam, bs = self.fam, self.capture_bs()
        self.pace("to-capture")
        tic = time.time()
        if fam.capture == "old":
            self.each("Capture cuda graph begin. This can take up to several minutes. avail mem=%.2f GB" % MEM["capture-begin"])
            self.rank0("Capture cuda graph bs %s" % bs)
        else:
            role = "verify" if self.algorithm else "decode"
            per = self.num_draft_tokens if self.algorithm else 1
            unit = "num_tokens_per_bs" if fam.capture == "bs-begin" else "num_tokens_per_req"
            bs_part = "" if fam.capture == "req-bs-end" else "bs=%s, " % bs
            self.each("Capture target %s CUDA graph begin. backend=%s, %s=%d, %savail mem=%.2f GB" % (
                role, self.args["attention_backend"], unit, per, bs_part, MEM["capture-begin"]))
        bar = None
        if 0 in self.local_ranks:
            bar = Tqdm(self.log, "Capturing batches (bs=%d avail_mem=%.2f GB)" % (bs[-1], MEM["capture-begin"]), len(bs))
        for i, b in enumerate(reversed(bs)):
            self.pace("capture", 1.0 / len(bs))
            if i == len(bs) // 2:
                self.hook("cuda-graph")
            if bar:
                bar.update("Capturing batches (bs=%d avail_mem=%.2f GB)" % (b, MEM["capture-begin"] - 0.05 * i / len(bs)))
        if bar:
            bar.close()
        el = time.time() - tic
        if fam.capture == "old":
            self.each("Capture cuda graph end. Time elapsed: %.2f s. mem usage=%.2f GB. avail mem=%.2f GB." % (
                el, MEM["capture-use"], MEM["after-capture"]))
        else:
            role = "verify" if self.algorithm else "decode"
            bs_part = "bs=%s, " % bs if fam.capture == "req-bs-end" else ""
            self.each("Capture target %s CUDA graph end. %selapsed=%.2f s, mem usage=%.2f GB, avail mem=%.2f GB." % (
                role, bs_part, el, MEM["capture-use"], MEM["after-capture"]))

    def draft(self, capture: bool = True) -> None:
        """The draft worker that dispatch chose: its model, the patch's marker, its CUDA graph (old order)."""
        if not self.algorithm:
            return
        self.pace("to-draft")
        if self.worker is None or self.worker[2]:
            err = self.worker[2] if self.worker else "Unsupported speculative algorithm: %s" % self.algorithm
            self.scheduler_crash("draft", "crash", "ValueError: %s\n" % err)
        if self.algorithm != "NGRAM":
            dcfg = read_model_config(self.args["speculative_draft_model_path"] or "")
            dtype = (dcfg.get("architectures") or [None])[0] or {
                "EAGLE3": "LlamaForCausalLMEagle3", "EAGLE": "LlamaForCausalLMEagle"}.get(self.algorithm, self.arch)
            shards = self.count_shards(self.args["speculative_draft_model_path"], 1)
            before = MEM["after-capture"] if self.fam.capture == "old" else MEM["after-weights"]
            self.load_weights(dtype, shards, before, before - MEM["draft"], MEM["draft"], "draft-weights", "draft")
        else:
            self.hook("draft")
        if self.marker_threshold is not None:
            self.each(MARKER.format(self.marker_threshold), self.ctl.split_marker)
        if self.adaptive:  # each scheduler's worker builds its controller (logged on its TP rank 0)
            self.controllers = {dp: Adaptive(lambda first: self.t.at_least(self.v, first), self.num_steps, SPEC_CAPTURE_BS,
                                             lambda m, dp=dp: self.log.line(m, self.tag(0, dp)) if 0 in self.local_ranks else None)
                                for dp in range(self.dp)}
        if capture:
            self.draft_capture()

    def draft_capture(self) -> None:
        if not self.algorithm or self.algorithm == "NGRAM":
            return
        if self.num_steps <= 1:
            return
        self.pace("to-draft-capture")
        tic = time.time()
        if self.fam.capture == "old":
            self.each("Capture draft cuda graph begin. This can take up to several minutes. avail mem=%.2f GB"
                      % MEM["draft-capture-begin"])
            self.pace("draft-capture")
            self.each("Capture draft cuda graph end. Time elapsed: %.2f s. mem usage=%.2f GB. avail mem=%.2f GB." % (
                time.time() - tic, MEM["draft-capture-use"], MEM["final"]))
            return
        unit = "num_tokens_per_bs" if self.fam.capture == "bs-begin" else "num_tokens_per_req"
        bs = self.capture_bs()
        for what, per, share in (("decode", int(self.args["speculative_eagle_topk"] or 1), 0.6),
                                 ("extend", self.num_draft_tokens, 0.4)):
            tic = time.time()
            self.rank0("Capture draft %s CUDA graph begin. backend=%s, %s=%d, bs=%s, avail mem=%.2f GB" % (
                what, self.args["attention_backend"], unit, per, bs, MEM["draft-capture-begin"]))
            self.pace("draft-capture", share)
            self.rank0("Capture draft %s CUDA graph end. elapsed=%.2f s, mem usage=%.2f GB, avail mem=%.2f GB." % (
                what, time.time() - tic, MEM["draft-capture-use"] * share, MEM["final"]))

    # --- HTTP and readiness (launcher process, node 0) ---
    def serve(self) -> None:
        a = self.args
        self.engines = [Engine(self, r) for r in range(self.dp)]
        for e in self.engines:
            e.adaptive = getattr(self, "controllers", {}).get(e.dp_rank)
        self.engine = self.engines[0]
        for phase in ("ready", "serving"):
            if phase in (self.ctl.crash_at, self.ctl.oom_at):
                self.engine.crash_kind = "oom" if self.ctl.oom_at == phase else "crash"
                self.engine.crash_armed = phase == "ready"  # "ready": the warm-up request's forward fails
        for e in self.engines:
            e.start()
        self.pace("to-uvicorn")
        host, port = a["host"] or "127.0.0.1", int(a["port"] or 30000)
        self.httpd = HTTPServer((host, port), make_handler(self))
        threading.Thread(target=self.httpd.serve_forever, name="uvicorn", daemon=True).start()
        self.log.uvicorn("Started server process [%d]" % os.getpid())
        self.log.uvicorn("Waiting for application startup.")
        self.log.uvicorn("Application startup complete.")
        self.log.uvicorn("Uvicorn running on http://%s:%d (Press CTRL+C to quit)" % (host, port))
        if not self.ctl.ignore_sigterm:
            signal.signal(signal.SIGTERM, self.on_sigterm)
        signal.signal(signal.SIGUSR1, lambda signum, frame: setattr(self, "replay_armed", bool(self.ctl.replay_at)))
        self.warming_up = True
        if self.ctl.hang_at == "ready":
            self.engine.freeze()
        threading.Thread(target=self.warmup, args=(host, port), name="warmup", daemon=True).start()
        while not self.shutdown.wait(0.2):
            pass
        self.drain()

    def warmup(self, host: str, port: int) -> None:
        url = "http://%s:%d" % ("127.0.0.1" if host in ("0.0.0.0", "::", "") else host, port)
        if not self.args["skip_server_warmup"]:
            self.pace("warmup", 0.3)
            # like sglang's _wait_and_warmup: its own --api-key on every request
            auth = {"Authorization": "Bearer %s" % self.args["api_key"]} if self.args["api_key"] else {}
            try:
                urllib.request.urlopen(urllib.request.Request(url + self.fam.model_info_path, headers=auth),
                                       timeout=600).read()
                self.running_phase = True
                body = json.dumps({"text": "The capital city of France is",
                                   "sampling_params": {"temperature": 0, "max_new_tokens": 8}}).encode()
                req = urllib.request.Request(url + "/generate", data=body,
                                             headers={"Content-Type": "application/json", **auth})
                urllib.request.urlopen(req, timeout=None).read()
            except OSError as e:
                self.log.line("Initialization failed. warmup error: %s" % e)
                self.kill_tree()
            self.pace("warmup", 0.7)
        self.running_phase = True
        self.warming_up = False
        self.status = "Up"
        self.log.line("The server is fired up and ready to roll!")
        self.engine.crash_armed = True
        if self.ctl.hang_at == "serving":
            self.engine.freeze()

    def on_sigterm(self, signum, frame) -> None:
        self.log.line("SIGTERM received. signum=None frame=None. Draining requests and shutting down...")
        self.gracefully_exit = True
        self.shutdown.set()

    def drain(self) -> None:
        """TokenizerManager.sigterm_watchdog: wake every 5 s, wait for in-flight requests, kill the tree."""
        tick = max(5.0 * self.ctl.pace, 0.05)
        time.sleep(tick)
        while True:
            rids = [rid for e in self.engines for rid in e.inflight()]
            self.log.line("Gracefully exiting... Remaining number of requests %d. Remaining requests remaining_rids=%r."
                          % (len(rids), rids))
            if not rids:
                break
            time.sleep(tick)
        self.kill_tree()

    # --- JSON documents ---
    def generate_out(self, r: Request, upto: int = None) -> dict:
        n = r.generated if upto is None else upto
        finished = r.done.is_set() and n >= r.generated
        meta = {"id": r.rid, "finish_reason": {"type": "length", "length": r.max_new} if finished else None,
                "prompt_tokens": r.prompt_tokens, "weight_version": self.args["weight_version"] or "default",
                "total_retractions": 0, "completion_tokens": n, "cached_tokens": 0}
        if finished:
            meta["e2e_latency"] = (r.finished_at or time.time()) - r.created
            if self.algorithm and r.verify_ct > 0:
                meta.update(self.spec_meta(r))
        return {"text": r.text(n), "output_ids": r.output_ids(n), "meta_info": meta}

    def spec_meta(self, r: Request) -> dict:
        m, drafts = self.fam.meta, max(self.num_draft_tokens - 1, 1)
        proposed = r.verify_ct * drafts
        out = {}
        if m["rate_length"]:
            out["spec_accept_rate"] = r.accepted_drafts / proposed
            out["spec_accept_length"] = r.generated / r.verify_ct
        if m["token_num"]:
            out["spec_accept_token_num"] = r.accepted_drafts
            out["spec_draft_token_num"] = proposed
        if m["drafts"]:
            out["spec_accepted_drafts"] = r.accepted_drafts
            out["spec_proposed_drafts"] = proposed
        out["spec_verify_ct"] = r.verify_ct
        if m["histogram"]:
            out["spec_accept_histogram"] = list(r.histogram)
        if m["correct"]:
            out["spec_num_correct_drafts"] = r.accepted_drafts
            out["spec_num_proposed_drafts"] = proposed
            out["spec_correct_drafts_histogram"] = list(r.histogram)
        if m["cap"]:
            out["spec_cap_length"] = r.generated / r.verify_ct
            out["spec_block_accept_length"] = 0.0
            out["spec_cap_lens_histogram"] = []
        return out

    def internal_state(self, e: Engine) -> dict:
        """Scheduler.get_internal_state of one DP rank."""
        state = dict(self.args.json())
        state.update({
            "last_gen_throughput": e.last_gen_throughput,
            "memory_usage": {"weight": MEM["weights"], "kvcache": MEM["kv"], "token_capacity": MAX_TOTAL_NUM_TOKENS,
                             "graph": MEM["capture-use"]},
            "effective_max_running_requests_per_dp": self.max_running_requests,
        })
        if self.algorithm and e.total_fct > 0 and not e.silent:
            state["avg_spec_accept_length"] = e.total_accepted / e.total_fct
        return state

    def server_info(self) -> dict:
        args = self.args.json()
        info = dict(args)
        if self.fam.server_info == "build":
            info["launch_command"] = " ".join(["python3", "-m", "sglang.launch_server"] + sys.argv[1:])
        info.update({"status": "ready", "max_total_num_tokens": MAX_TOTAL_NUM_TOKENS,
                     "max_req_input_len": min(self.context_len, MAX_TOTAL_NUM_TOKENS) - 1})
        if self.fam.server_info == "build":
            info["kv_events"] = None
            info["startup_time"] = self.started
        if self.backend_changed:  # replay backend@S
            info["attention_backend"] = "triton"
            if info.get("speculative_draft_attention_backend") is not None or self.algorithm:
                info["speculative_draft_attention_backend"] = "triton"
        info["internal_states"] = [self.internal_state(e) for e in self.engines]
        info["version"] = self.v
        if self.fam.server_info == "build":
            info["frontend"] = "python"
        return info

    def metrics_text(self) -> str:
        a = self.args
        tok = 'model_name="%s"' % a["served_model_name"]
        out = []
        ranks = []  # (engine, labels): sglang's scheduler labels, dp_rank only when there is one
        for e in self.engines:
            dp = ',dp_rank="%d"' % e.dp_rank if self.dp > 1 else ""
            ranks.append((e, 'model_name="%s",engine_type="unified",tp_rank="0",pp_rank="0",moe_ep_rank="0"%s'
                          % (a["served_model_name"], dp)))

        def gauge(name, doc, value, lab=None):
            rows = "".join("sglang:%s{%s} %s\n" % (name, lb, float(value(e) if callable(value) else value))
                           for e, lb in ranks if not e.silent)
            out.append("# HELP sglang:%s %s\n# TYPE sglang:%s gauge\n%s" % (name, doc, name, rows))

        def counter(name, doc, value, lab=tok):
            out.append("# HELP sglang:%s %s\n# TYPE sglang:%s counter\nsglang:%s_total{%s} %s\n" % (
                name, doc, name, name, lab, float(value)))

        def stat(key):
            return lambda e: e.stats[key]

        gauge("num_running_reqs", "The number of running requests.", stat("running"))
        gauge("num_used_tokens", "The number of used tokens.", stat("tokens"))
        gauge("token_usage", "The token usage.", stat("usage"))
        gauge("gen_throughput", "The generation throughput (token/s).", lambda e: e.last_gen_throughput)
        gauge("num_queue_reqs", "The number of requests in the waiting queue.", stat("queue"))
        gauge("cache_hit_rate", "The prefix cache hit rate.", 0.0)
        gauge("max_total_num_tokens", "Maximum total number of tokens in the KV cache pool.", MAX_TOTAL_NUM_TOKENS)
        gauge("spec_accept_length", "The average acceptance length of speculative decoding.", stat("accept_len"))
        if self.fam.spec_rate_metric:
            gauge("spec_accept_rate", "The average acceptance rate of speculative decoding (`accepted tokens / total "
                  "draft tokens` in batch).", stat("accept_rate"))
        if self.fam.spec_step_metrics:
            gauge("spec_num_steps", "The number of speculative steps currently active.",
                  lambda e: e.adaptive.active if e.adaptive else self.num_steps)
            gauge("spec_num_draft_tokens", "The number of draft tokens currently active.", self.num_draft_tokens)
        c = dict(self.counters)
        counter("prompt_tokens", "Number of prefill tokens processed.", c["prompt"])
        counter("generation_tokens", "Number of generation tokens processed.", c["generation"])
        counter("num_requests", "Number of requests processed.", c["requests"])
        if self.fam.spec_step_metrics:
            counter("spec_verify_calls", "Number of speculative verify calls.", c["verify"])
        if self.fam.graph_passes:  # per scheduler, labels + mode (metrics_collector.py cuda_graph_passes_total)
            modes = ["prefill_none", "decode_cuda_graph", "decode_none"][0 if self.fam.prefill_graph_passes else 1:]
            rows = "".join('sglang:cuda_graph_passes_total{%s,mode="%s"} %s\n' % (lb, m, float(e.graph_passes[m]))
                           for e, lb in ranks if not e.silent for m in modes if e.graph_passes[m])
            out.append("# HELP sglang:cuda_graph_passes_total Total number of forward passes categorized by CUDA "
                       "graph.\n# TYPE sglang:cuda_graph_passes_total counter\n" + rows)
        return "".join(out)

    # --- the whole launch ---
    def run(self) -> None:
        self.resolve()
        self.hook("args")
        self.pace("resolve")
        self.log.line(self.args.dump())
        self.spawn_children()
        self.gpu_phase()
        if self.node_rank > 0:  # non-zero nodes run only schedulers and wait on them
            while True:
                time.sleep(3600)
        self.serve()


def entrypoint_warning(log: Log) -> None:
    log.raw("%s/launch_server.py:71: UserWarning: 'python -m sglang.launch_server' is still supported, but "
            "'sglang serve' is the recommended entrypoint.\n  Example: sglang serve --model-path <model> [options]\n"
            "  warnings.warn(\n" % SITE)


def main(argv=None) -> int:
    env = dict(os.environ)
    try:
        ctl = Controls(env)
        data = load_data()
        tables = load_tables(data)
        if not tables.known(ctl.version):
            raise StandinError("STANDIN_SGLANG_VERSION=%s is not a release in configs/sglang/releases.toml" % ctl.version)
    except StandinError as e:
        sys.stderr.write("fake_sglang_server (stand-in): %s\n" % e)
        return 64
    if ctl.ignore_sigterm:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    fam = Family(tables, ctl.version)
    log = Log(fam)
    if fam.entrypoint_warning:
        entrypoint_warning(log)
    spec = data["server_args"]["0.5.23" if fam.dump_form == "dict" else "0.5.9"]
    extra = []
    r = tables.overlap_range(ctl.version)
    if r and r["switch"]["kind"] == "flag":
        extra.append({"flags": [r["switch"]["name"]], "dest": r["switch"]["name"][2:].replace("-", "_"),
                      "action": "store_true", "type": "str", "nargs": None, "required": False, "choices": None})
    if ctl.patched_class:
        extra.append({"flags": [FEATURE_FLAG], "dest": FEATURE_DEST, "action": "store", "type": "int",
                      "nargs": None, "required": False, "choices": None})
    parser = build_parser(spec, extra)
    ns = parser.parse_args(sys.argv[1:] if argv is None else argv)
    args = ServerArgs(spec, vars(ns), patched=ctl.patched_class is not None)
    launcher = Launcher(ctl, tables, fam, log, args, env)
    try:
        launcher.run()
    except KeyboardInterrupt:
        # launch_server's `finally: kill_process_tree(os.getpid(), include_parent=False)`; uvicorn, when up,
        # shuts down first
        if launcher.status != "Starting" or launcher.warming_up:
            for msg in ("Shutting down", "Waiting for application shutdown.", "Application shutdown complete.",
                        "Finished server process [%d]" % os.getpid()):
                log.uvicorn(msg)
        launcher.kill_children()
        os._exit(130)
    except BaseException:
        launcher.kill_children()
        raise
    return 0


if __name__ == "__main__":
    sys.exit(main())
