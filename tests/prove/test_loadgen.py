"""dynspec_cli/inject/loadgen.py as dynspec runs it: a separate interpreter (Python 3.8 when the
machine has it), the script on stdin, JSON on argv[1], one JSON document on stdout whatever
happens. The server here is a small stdlib HTTP server in the test process, shaped like an old
sglang (only /get_server_info, no /metrics): the fallbacks are what is tested."""
import http.server
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

LOADGEN = Path(__file__).resolve().parents[2] / "dynspec_cli" / "inject" / "loadgen.py"
PY38 = "/root/.pyenv/versions/3.8.18/bin/python3.8"
PYTHON = PY38 if os.access(PY38, os.X_OK) else sys.executable


class OldSglang(http.server.ThreadingHTTPServer):
    daemon_threads = True
    posts = 0  # /generate requests received


def handler(delay: float):
    class H(http.server.BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def _json(self, code, doc):
            data = json.dumps(doc).encode()
            self.send_response(code)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):
            if self.path == "/get_server_info":
                return self._json(200, {"version": "0.5.4", "speculative_algorithm": "EAGLE",
                                        "speculative_disable_batch_threshold": 4,
                                        "internal_states": [{"avg_spec_accept_length": 2.5}]})
            self._json(404, {"detail": "Not Found"})

        def do_POST(self):
            self.server.posts += 1
            n = int(self.headers.get("content-length") or 0)
            body = json.loads(self.rfile.read(n))
            time.sleep(delay)
            m = body["sampling_params"]["max_new_tokens"]
            self._json(200, {"text": "x", "meta_info": {"completion_tokens": m, "spec_verify_ct": m // 2,
                                                        "spec_accept_length": 2.0, "prompt_tokens": 3}})

    return H


@pytest.fixture
def old_sglang():
    srv = OldSglang(("127.0.0.1", 0), handler(0.05))
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield srv
    srv.shutdown()


@pytest.fixture
def server(old_sglang):
    return f"http://127.0.0.1:{old_sglang.server_address[1]}"


def start(args: dict) -> subprocess.Popen:
    p = subprocess.Popen([PYTHON, "-", json.dumps(args)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE)
    p.stdin.write(LOADGEN.read_bytes())
    p.stdin.close()
    return p


def finish(p: subprocess.Popen, timeout: float = 30) -> dict:
    out = p.stdout.read()
    p.wait(timeout)
    lines = out.decode().strip().splitlines()
    assert len(lines) == 1, out
    return json.loads(lines[0])


def test_request_bound_and_old_release_fallbacks(server):
    t0 = time.monotonic()
    doc = finish(start({"base": server, "concurrency": 2, "duration": 30, "max_requests": 5, "max_new_tokens": 16,
                        "info_keys": ["speculative_disable_batch_threshold"]}))
    assert time.monotonic() - t0 < 15
    assert doc["ok"] and doc["stop_reason"] == "max_requests"
    assert doc["issued"] == 5 and doc["completed"] == 5 and doc["failed"] == 0
    r = doc["requests"][0]
    assert r["status"] == 200 and r["completion_tokens"] == 16 and r["spec_verify_ct"] == 8
    info = doc["server_info_before"]
    assert info["endpoint"] == "/get_server_info" and info["avg_spec_accept_length"] == [2.5]
    assert info["keys"] == {"speculative_disable_batch_threshold": 4}
    assert doc["metrics_before"] is None and doc["samples"] == []  # no --enable-metrics


def test_time_bound(server):
    doc = finish(start({"base": server, "concurrency": 3, "duration": 0.6, "max_requests": 0, "max_new_tokens": 8}))
    assert doc["stop_reason"] == "duration" and doc["completed"] >= 3
    assert doc["elapsed"] < 5
    assert all(r["t0"] <= doc["started"] + 0.6 + 0.5 for r in doc["requests"])  # none started after the bound


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signal_stops_at_once_with_json(server, old_sglang, sig):
    p = start({"base": server, "concurrency": 2, "duration": 60, "max_requests": 0, "max_new_tokens": 8})
    deadline = time.monotonic() + 60  # (not a fixed sleep: a loaded machine may take seconds to start it)
    while old_sglang.posts < 3 and time.monotonic() < deadline:  # 3 with 2 workers: one has had its answer
        time.sleep(0.01)
    assert old_sglang.posts >= 3, p.stderr.read() if p.poll() is not None else "no requests in 60 s"
    t0 = time.monotonic()
    p.send_signal(sig)
    doc = finish(p, timeout=5)
    assert time.monotonic() - t0 < 3
    assert doc["ok"] and doc["stop_reason"] == "signal" and doc["completed"] > 0


def test_unreachable_server_stops_early():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    t0 = time.monotonic()
    doc = finish(start({"base": f"http://127.0.0.1:{port}", "concurrency": 2, "duration": 60, "max_new_tokens": 8}))
    assert time.monotonic() - t0 < 10
    assert doc["stop_reason"] == "server-unreachable" and doc["completed"] == 0 and doc["errors"]
    assert "error" in doc["server_info_before"]


def test_bad_input_is_json_too():
    doc = finish(start({"concurrency": 1}))  # no "base"
    assert doc["ok"] is False and "KeyError" in doc["error"] and doc["exception_traceback"]


def test_a_server_without_tokenizer_gets_token_ids():
    """sglang started with --skip-tokenizer-init answers a `text` request with HTTP 400 ("... need to
    provide input_ids"); /server_info says skip_tokenizer_init true (the H200 run's server did)."""
    seen = []

    class H(handler(0.0)):
        def do_GET(self):
            if self.path == "/server_info":
                return self._json(200, {"version": "0.5.12.post1", "skip_tokenizer_init": True,
                                        "internal_states": [{"avg_spec_accept_length": 4.0}]})
            self._json(404, {"detail": "Not Found"})

        def do_POST(self):
            self.server.posts += 1
            n = int(self.headers.get("content-length") or 0)
            body = json.loads(self.rfile.read(n))
            seen.append(body)
            if "input_ids" not in body:
                return self._json(400, {"error": {"message": "need to provide input_ids"}})
            self._json(200, {"output_ids": [7] * 4, "meta_info": {"completion_tokens": 4}})

    srv = OldSglang(("127.0.0.1", 0), H)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        doc = finish(start({"base": f"http://127.0.0.1:{srv.server_address[1]}", "concurrency": 1,
                            "duration": 0.5, "max_requests": 2, "max_new_tokens": 4, "prompt": "Hi",
                            "sample_every": 0}))
    finally:
        srv.shutdown()
    assert doc["completed"] == 2 and doc["failed"] == 0, doc
    assert seen[0]["input_ids"] == [72, 105] and "text" not in seen[0]
    assert doc["server_info_before"]["skip_tokenizer_init"] is True
