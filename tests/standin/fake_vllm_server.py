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


class Handler(http.server.BaseHTTPRequestHandler):
    def log_message(self, fmt, *a):  # uvicorn's access-log line
        sys.stdout.write(f'INFO:     127.0.0.1:{self.client_address[1]} - "{self.requestline}" {a[1] if len(a) > 1 else ""}\n')
        sys.stdout.flush()

    def _send(self, code: int, doc: dict) -> None:
        body = json.dumps(doc).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        if self.path == "/health":
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()
        else:
            self._send(404, {"detail": "Not Found"})

    def do_POST(self):
        if self.path != "/v1/completions":
            return self._send(404, {"detail": "Not Found"})
        n = int(self.headers.get("Content-Length") or 0)
        req = json.loads(self.rfile.read(n) or b"{}")
        tokens = int(req.get("max_tokens") or 16)
        self._send(200, {"id": "cmpl-standin", "object": "text_completion", "model": req.get("model"),
                         "choices": [{"index": 0, "text": " lorem" * tokens, "finish_reason": "length"}],
                         "usage": {"prompt_tokens": 1, "completion_tokens": tokens, "total_tokens": tokens + 1}})


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="vllm")
    sub = p.add_subparsers(dest="cmd", required=True)
    serve = sub.add_parser("serve")
    serve.add_argument("model")
    serve.add_argument("--port", type=int, default=8000)
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--speculative-config", default=None)
    args, _rest = p.parse_known_args(argv)  # vLLM's many other flags are accepted and ignored
    try:
        spec = json.loads(args.speculative_config) if args.speculative_config else {}
    except ValueError as e:
        serve.error(f"argument --speculative-config: invalid loads value: {e}")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    version = os.environ.get("STANDIN_VLLM_VERSION", "0.23.0")
    start_up(args, spec, version)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    sys.stdout.write("INFO:     Waiting for application startup.\nINFO:     Application startup complete.\n")
    sys.stdout.flush()
    try:
        server.serve_forever()
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
