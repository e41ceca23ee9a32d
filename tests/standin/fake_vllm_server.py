#!/usr/bin/env python3
"""STAND-IN for ``vllm serve MODEL`` on a GPU box. It is NOT vLLM.

A small stdlib-only program that, from the outside, starts like a vLLM 0.23.0 API server with a patched
Model Runner V2 EAGLE speculator (configs/features/vllm-eagle-speculator-example.toml), so that
``dynspec launch / watch / stop / status`` can be tested for vLLM profiles where there is no GPU.

It replays a recorded start-up, with vLLM's own line prefixes (``(APIServer pid=N) INFO mm-dd HH:MM:SS
[file.py:N] msg``), this process's pid and the time of now rewritten into them. Where each line comes from:

* the banner, ``non-default args: {...}``, ``Resolved architecture`` / ``Using max model len`` /
  ``Chunked prefill`` lines: tests/fixtures/logs/vllm/18-v023-banner-nondefault-args-no-spec.log (a real
  0.23.0 start; the args dict is rebuilt from this command line);
* ``Initializing a V1 LLM engine (v...) with config: ... speculative_config=SpeculativeConfig(...)``:
  02-mtp-gemma4-engine-config-rc.log (EngineCore's line, shortened; version, model and method rewritten);
* ``Loading drafter model...`` from ``[v1/worker/gpu_model_runner.py:2641]`` (the V1 runner):
  11-eagle3-gptoss-drafter-loading-v1-runner.log;
* ``INFO:     Waiting for application startup.`` / ``INFO:     Application startup complete.`` (uvicorn):
  21-v1-api-server-start-and-ready.log;
* the V1 fallback warning ``Model Runner V2 does not yet support %s; using the V1 model runner instead.``
  is vLLM's format string (vllm/config/vllm.py, 0.23 - 0.33); none of the recorded excerpts holds it;
* ``EagleSpeculator patch active: num_speculative_tokens=N`` is the patch's own line (the example feature).

While it serves (what `dynspec prove` and `dynspec guard` read), with vLLM's own texts from the published wheels:

* every VLLM_LOG_STATS_INTERVAL seconds (vLLM's own variable, default 10), per engine that was not idle,
  LoggingStatLogger.log's line ``Engine 000: Avg prompt throughput: %.1f tokens/s, Avg generation throughput:
  %.1f tokens/s, Running: %d reqs, Waiting: %d reqs, GPU KV cache usage: %.1f%%, Prefix cache hit rate: %.1f%%``
  and right after it, when drafts were made, SpecDecodingLogging.log's ``SpecDecoding metrics: Mean acceptance
  length: %.2f, Accepted throughput: %.2f tokens/s, Drafted throughput: %.2f tokens/s, Accepted: %d tokens,
  Drafted: %d tokens, Per-position acceptance rate: %s, Avg Draft acceptance rate: %.1f%%`` (vllm/v1/metrics/
  loggers.py and vllm/v1/spec_decode/metrics.py of 0.23.0; the ``[loggers.py:271]`` / ``[metrics.py:101]``
  prefixes as in the recorded 06-mtp-metrics-under-load.log); an idle engine logs at DEBUG, i.e. nothing;
* GET /metrics: ``vllm:spec_decode_num_drafts_total``, ``..._num_draft_tokens_total``,
  ``..._num_accepted_tokens_total``, ``..._num_accepted_tokens_per_pos_total{position=}``,
  ``vllm:generation_tokens_total``, ``vllm:prompt_tokens_total``, ``vllm:request_success_total`` and the gauge
  ``vllm:num_requests_running``, each with labels model_name and engine (SpecDecodingProm, PrometheusStatLogger);
* GET /v1/models, GET /version, POST /v1/completions and /v1/chat/completions (``"stream": true`` as SSE
  chunks ending ``data: [DONE]``, with ``usage`` when ``stream_options.include_usage``).

Decoding is simulated: STANDIN_DECODE_STEP seconds per step (default 0.01); each step drafts
num_speculative_tokens tokens and accepts STANDIN_ACCEPTED of them (default: all but one), so a request of
N tokens takes N / (1 + accepted) steps. ``--data-parallel-size N`` runs N engines, requests round robin.
STANDIN_REPLAY (comma-separated EVENT@S; the clock starts at the first completion request after SIGUSR1):
collapse@S (no draft token accepted from then on: mean acceptance length 1.00, no error), restart@S (exec in
place: same pid, the start-up again in the same log, counters from zero), reset@S (the Prometheus counters
restart from zero while serving goes on). STANDIN_REPLAY_LOG: a file "UNIX_TIME EVENT" lines are appended to.

What it decides: if STANDIN_V2_UNSUPPORTED names a feature (as vLLM would for e.g. LoRA), it logs the
fallback warning and starts the V1 runner, whose EagleProposer is not patched: no marker. Otherwise the V2
runner's patched EagleSpeculator logs the marker. Either way the server then becomes ready, binds the port
and serves GET /health (200) and POST /v1/completions (filler text), until SIGTERM.

Run it like vllm: ``python3 -m fake_vllm_server serve MODEL --port P --speculative-config JSON`` (from this
directory). Controls (environment): STANDIN_PACE (seconds between lines, default 0.05),
STANDIN_V2_UNSUPPORTED (see above), STANDIN_VLLM_VERSION (default 0.23.0).
"""
from __future__ import annotations

import argparse
import http.server
import json
import os
import signal
import sys
import threading
import time

LOGGERS = {"api": "APIServer", "core": "EngineCore", "worker": "Worker_TP0"}


def log(who: str, level: str, src: str, msg: str) -> None:
    ts = time.strftime("%m-%d %H:%M:%S")
    sys.stdout.write(f"({LOGGERS[who]} pid={os.getpid()}) {level} {ts} [{src}] {msg}\n")
    sys.stdout.flush()
    time.sleep(float(os.environ.get("STANDIN_PACE", "0.05")))


def start_up(args, spec: dict, version: str) -> None:
    log("api", "INFO", "api_utils.py:339", f" ▄▄ ▄█ █     █     █ ▀▄▀ █  version {version}")
    log("api", "INFO", "api_utils.py:339", f"  █▄█▀ █     █     █     █  model   {args.model}")
    nondefault = {"model_tag": args.model, "port": args.port, "model": args.model}
    if spec:
        nondefault["speculative_config"] = spec
    log("api", "INFO", "api_utils.py:273", f"non-default args: {nondefault!r}")
    log("api", "INFO", "model.py:611", "Resolved architecture: Qwen3_5ForConditionalGeneration")
    log("api", "INFO", "model.py:1745", "Using max model len 262144")
    log("api", "INFO", "scheduler.py:239", "Chunked prefill is enabled with max_num_batched_tokens=8192.")
    spec_repr = (f"SpeculativeConfig(method={spec.get('method')!r}, model={spec.get('model')!r}, "
                 f"num_spec_tokens={spec.get('num_speculative_tokens')})") if spec else "None"
    log("core", "INFO", "core.py:109", f"Initializing a V1 LLM engine (v{version}) with config: model={args.model!r}, "
        f"speculative_config={spec_repr}, tokenizer={args.model!r}, skip_tokenizer_init=False, tokenizer_mode=auto, "
        f"tensor_parallel_size=1, pipeline_parallel_size=1, data_parallel_size=1")
    unsupported = os.environ.get("STANDIN_V2_UNSUPPORTED")
    if unsupported:
        log("core", "WARNING", "vllm.py:1130",
            f"Model Runner V2 does not yet support {unsupported}; using the V1 model runner instead.")
        if spec:
            log("worker", "INFO", "v1/worker/gpu_model_runner.py:2641", "Loading drafter model...")
    elif spec:
        log("worker", "INFO", "speculator.py:58",
            f"EagleSpeculator patch active: num_speculative_tokens={spec.get('num_speculative_tokens')}")


class Engine:
    """One engine core's scheduler counters, as vLLM's stat loggers see them."""

    def __init__(self, index: int, k: int) -> None:
        self.index, self.k = index, k
        self.lock = threading.Lock()
        self.running = 0
        self.total = {"drafts": 0, "draft_tokens": 0, "accepted": 0, "generation": 0, "prompt": 0, "success": 0}
        self.per_pos_total = [0] * k
        self.interval()
        self.last_prompt_tp = self.last_gen_tp = 0.0

    def interval(self) -> None:
        self.i = {"drafts": 0, "draft_tokens": 0, "accepted": 0, "generation": 0, "prompt": 0}
        self.per_pos = [0] * self.k
        self.since = time.monotonic()

    def step(self, accepted: int, tokens: int) -> None:
        with self.lock:
            for d in (self.i, self.total):
                d["generation"] += tokens
                if self.k:
                    d["drafts"] += 1
                    d["draft_tokens"] += self.k
                    d["accepted"] += accepted
            for p in range(accepted):
                self.per_pos[p] += 1
                self.per_pos_total[p] += 1

    def reset(self) -> None:
        with self.lock:
            self.total = {k: 0 for k in self.total}
            self.per_pos_total = [0] * self.k

    def log(self) -> None:
        """LoggingStatLogger.log, then SpecDecodingLogging.log (same log_fn: DEBUG when idle)."""
        with self.lock:
            i, pos, elapsed = self.i, self.per_pos, max(1e-6, time.monotonic() - self.since)
            running = self.running
            self.interval()
        prompt_tp, gen_tp = i["prompt"] / elapsed, i["generation"] / elapsed
        idle = not any((prompt_tp, gen_tp, self.last_prompt_tp, self.last_gen_tp))
        self.last_prompt_tp, self.last_gen_tp = prompt_tp, gen_tp
        if idle:
            return
        log("api", "INFO", "loggers.py:271",
            "Engine %03d: Avg prompt throughput: %.1f tokens/s, Avg generation throughput: %.1f tokens/s, "
            "Running: %d reqs, Waiting: %d reqs, GPU KV cache usage: %.1f%%, Prefix cache hit rate: %.1f%%"
            % (self.index, prompt_tp, gen_tp, running, 0, 1.5 * running, 0.0))
        if not i["drafts"]:
            return
        rates = ", ".join("%.3f" % (p / i["drafts"]) for p in pos)
        log("api", "INFO", "metrics.py:101",
            "SpecDecoding metrics: Mean acceptance length: %.2f, Accepted throughput: %.2f tokens/s, Drafted "
            "throughput: %.2f tokens/s, Accepted: %d tokens, Drafted: %d tokens, Per-position acceptance rate: %s, "
            "Avg Draft acceptance rate: %.1f%%"
            % (1 + i["accepted"] / i["drafts"], i["accepted"] / elapsed, i["draft_tokens"] / elapsed, i["accepted"],
               i["draft_tokens"], rates, i["accepted"] / i["draft_tokens"] * 100))


class Server:
    def __init__(self, args, spec: dict) -> None:
        self.args, self.spec = args, spec
        self.model = args.served_model_name or args.model
        self.k = int(spec.get("num_speculative_tokens") or 0) if spec else 0
        self.engines = [Engine(i, self.k) for i in range(max(1, args.data_parallel_size))]
        self.next = 0
        self.step_s = float(os.environ.get("STANDIN_DECODE_STEP", "0.01"))
        accepted = os.environ.get("STANDIN_ACCEPTED")
        self.accepted = min(self.k, int(accepted)) if accepted is not None else max(0, self.k - 1)
        self.replay = {}
        for item in filter(None, (x.strip() for x in os.environ.get("STANDIN_REPLAY", "").split(","))):
            name, _, at = item.partition("@")
            self.replay[name] = float(at or 0)
        self.collapsed = False
        self.armed = self.replay_started = False
        self.lock = threading.Lock()
        self.httpd = None

    def engine(self) -> Engine:
        with self.lock:
            e = self.engines[self.next % len(self.engines)]
            self.next += 1
            if self.armed and not self.replay_started and self.replay:
                self.replay_started = True
                threading.Thread(target=self.run_replay, daemon=True).start()
        return e

    def generate(self, e: Engine, prompt_tokens: int, n: int, each=None) -> None:
        """Decode n tokens on engine e; each(count) is called per step (streaming)."""
        with e.lock:
            e.running += 1
            e.i["prompt"] += prompt_tokens
            e.total["prompt"] += prompt_tokens
        done = 0
        try:
            while done < n:
                time.sleep(self.step_s)
                acc = 0 if self.collapsed else self.accepted
                got = min(n - done, 1 + acc)
                e.step(min(acc, max(0, got - 1)), got)
                done += got
                if each:
                    each(got)
        finally:
            with e.lock:
                e.running -= 1
                e.total["success"] += 1

    def stats_loop(self) -> None:
        every = float(os.environ.get("VLLM_LOG_STATS_INTERVAL", "10"))
        while True:
            time.sleep(every)
            for e in self.engines:
                e.log()

    def run_replay(self) -> None:
        t0 = time.time()
        for name, at in sorted(self.replay.items(), key=lambda kv: kv[1]):
            time.sleep(max(0.0, t0 + at - time.time()))
            if os.environ.get("STANDIN_REPLAY_LOG"):
                with open(os.environ["STANDIN_REPLAY_LOG"], "a") as f:
                    f.write("%.3f %s\n" % (time.time(), name))
            if name == "collapse":
                self.collapsed = True
            elif name == "reset":
                for e in self.engines:
                    e.reset()
            elif name == "restart":
                left = ",".join("%s@%g" % (n, s) for n, s in self.replay.items() if n != "restart")
                env = dict(os.environ, STANDIN_REPLAY=left)
                with open("/proc/self/cmdline", "rb") as f:  # the same command line, byte for byte
                    argv = [x.decode() for x in f.read().split(b"\0")[:-1]]
                sys.stdout.flush()
                os.execve(sys.executable, argv, env)

    def metrics(self) -> str:
        out = []

        def counter(name: str, doc: str, rows) -> None:
            out.append("# HELP %s %s\n# TYPE %s counter" % (name, doc, name))  # prometheus_client's text format
            out.extend("%s{%s} %s" % (name, labels, float(v)) for labels, v in rows)

        base = {e.index: 'model_name="%s",engine="%d"' % (self.model, e.index) for e in self.engines}
        out.append("# HELP vllm:num_requests_running Number of requests in model execution batches.\n"
                   "# TYPE vllm:num_requests_running gauge")
        out.extend("vllm:num_requests_running{%s} %s" % (base[e.index], float(e.running)) for e in self.engines)
        counter("vllm:prompt_tokens_total", "Number of prefill tokens processed.",
                [(base[e.index], e.total["prompt"]) for e in self.engines])
        counter("vllm:generation_tokens_total", "Number of generation tokens processed.",
                [(base[e.index], e.total["generation"]) for e in self.engines])
        counter("vllm:request_success_total", "Count of successfully processed requests.",
                [(base[e.index] + ',finished_reason="length"', e.total["success"]) for e in self.engines])
        if self.k:
            for key, name, doc in (("drafts", "vllm:spec_decode_num_drafts_total", "Number of spec decoding drafts."),
                                   ("draft_tokens", "vllm:spec_decode_num_draft_tokens_total", "Number of draft tokens."),
                                   ("accepted", "vllm:spec_decode_num_accepted_tokens_total", "Number of accepted tokens.")):
                counter(name, doc, [(base[e.index], e.total[key]) for e in self.engines])
            counter("vllm:spec_decode_num_accepted_tokens_per_pos_total", "Accepted tokens per draft position.",
                    [(base[e.index] + ',position="%d"' % p, e.per_pos_total[p]) for e in self.engines
                     for p in range(self.k)])
        return "\n".join(out) + "\n"


SERVER: "Server" = None


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *a):  # uvicorn's access-log line
        sys.stdout.write(f'INFO:     127.0.0.1:{self.client_address[1]} - "{self.requestline}" {a[1] if len(a) > 1 else ""}\n')
        sys.stdout.flush()

    def _send(self, code: int, doc, ctype: str = "application/json") -> None:
        body = doc.encode() if isinstance(doc, str) else json.dumps(doc).encode()
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        if self.path == "/health":
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()
        elif self.path == "/metrics":
            self._send(200, SERVER.metrics(), "text/plain; version=0.0.4; charset=utf-8")
        elif self.path == "/v1/models":
            self._send(200, {"object": "list", "data": [{"id": SERVER.model, "object": "model", "owned_by": "vllm",
                                                         "root": SERVER.args.model, "max_model_len": 262144}]})
        elif self.path == "/version":
            self._send(200, {"version": os.environ.get("STANDIN_VLLM_VERSION", "0.23.0")})
        else:
            self._send(404, {"detail": "Not Found"})

    def do_POST(self):
        chat = self.path == "/v1/chat/completions"
        if self.path != "/v1/completions" and not chat:
            return self._send(404, {"detail": "Not Found"})
        n = int(self.headers.get("Content-Length") or 0)
        req = json.loads(self.rfile.read(n) or b"{}")
        tokens = int(req.get("max_completion_tokens") or req.get("max_tokens") or 16)
        prompt = json.dumps(req.get("messages")) if chat else str(req.get("prompt"))
        ptoks = max(1, len(prompt.split()))
        e = SERVER.engine()
        rid = f"{'chatcmpl' if chat else 'cmpl'}-standin{time.time_ns()}"
        obj = "chat.completion" if chat else "text_completion"
        usage = {"prompt_tokens": ptoks, "completion_tokens": tokens, "total_tokens": tokens + ptoks}
        if not req.get("stream"):
            SERVER.generate(e, ptoks, tokens)
            choice = ({"index": 0, "message": {"role": "assistant", "content": " lorem" * tokens}, "finish_reason": "length"}
                      if chat else {"index": 0, "text": " lorem" * tokens, "finish_reason": "length"})
            return self._send(200, {"id": rid, "object": obj, "created": int(time.time()), "model": req.get("model"),
                                    "choices": [choice], "usage": usage})
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

        def chunk(doc) -> None:
            data = ("data: %s\n\n" % (doc if isinstance(doc, str) else json.dumps(doc))).encode()
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            self.wfile.flush()

        def piece(k: int, finish=None) -> dict:
            text = " lorem" * k
            delta = {"index": 0, "delta": {"content": text}, "finish_reason": finish} if chat else \
                {"index": 0, "text": text, "finish_reason": finish}
            return {"id": rid, "object": obj + (".chunk" if chat else ""), "created": int(time.time()),
                    "model": req.get("model"), "choices": [delta]}

        SERVER.generate(e, ptoks, tokens, each=lambda k: chunk(piece(k)))
        chunk(piece(0, "length"))
        if (req.get("stream_options") or {}).get("include_usage"):
            chunk({"id": rid, "object": obj + (".chunk" if chat else ""), "created": int(time.time()),
                   "model": req.get("model"), "choices": [], "usage": usage})
        chunk("[DONE]")
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()


def main(argv: list[str]) -> int:
    global SERVER
    p = argparse.ArgumentParser(prog="vllm")
    sub = p.add_subparsers(dest="cmd", required=True)
    serve = sub.add_parser("serve")
    serve.add_argument("model")
    serve.add_argument("--port", type=int, default=8000)
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--speculative-config", default=None)
    serve.add_argument("--data-parallel-size", "-dp", type=int, default=1)
    serve.add_argument("--served-model-name", default=None)
    args, _rest = p.parse_known_args(argv)  # vLLM's many other flags are accepted and ignored
    try:
        spec = json.loads(args.speculative_config) if args.speculative_config else {}
    except ValueError as e:
        serve.error(f"argument --speculative-config: invalid loads value: {e}")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    version = os.environ.get("STANDIN_VLLM_VERSION", "0.23.0")
    start_up(args, spec, version)
    SERVER = Server(args, spec)
    signal.signal(signal.SIGUSR1, lambda *_: setattr(SERVER, "armed", True))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    server.daemon_threads = True
    sys.stdout.write("INFO:     Waiting for application startup.\nINFO:     Application startup complete.\n")
    sys.stdout.flush()
    threading.Thread(target=SERVER.stats_loop, daemon=True).start()
    try:
        server.serve_forever()
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
