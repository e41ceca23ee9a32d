"""The vLLM stand-in (fake_vllm_server.py) on its own: its lines have the shape of the recorded vLLM
excerpts it copies, it binds the port only once ready, answers /health and /v1/completions, and
ends on SIGTERM."""
import json
import re
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

from tests.run.helpers import STANDIN_DIR, free_port, wait_for

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "logs" / "vllm"
PREFIX = re.compile(r"^\((APIServer|EngineCore|Worker_TP\d) pid=\d+\) (INFO|WARNING|DEBUG|ERROR) \d\d-\d\d \d\d:\d\d:\d\d \[[\w/.]+:\d+\] ")


def test_replays_recorded_shapes_then_serves_until_sigterm(tmp_path):
    # the prefix is the real one: a line of 18-v023-banner-nondefault-args-no-spec.log matches it
    assert PREFIX.match((FIXTURES / "18-v023-banner-nondefault-args-no-spec.log").read_text().splitlines()[6])
    port = free_port()
    log = open(tmp_path / "s.log", "w")
    proc = subprocess.Popen([sys.executable, "-m", "fake_vllm_server", "serve", "/m", "--port", str(port),
                             "--speculative-config", '{"method": "eagle3", "num_speculative_tokens": 2}'],
                            cwd=STANDIN_DIR, stdout=log, stderr=subprocess.STDOUT,
                            env={"STANDIN_PACE": "0", "STANDIN_V2_UNSUPPORTED": "LoRA", "PATH": "/usr/bin:/bin"})
    try:
        text = lambda: (tmp_path / "s.log").read_text()  # noqa: E731
        assert wait_for(lambda: "Application startup complete." in text(), timeout=20)
        lines = text().splitlines()
        vllm_lines = [ln for ln in lines if not ln.startswith("INFO:     ")]
        assert vllm_lines and all(PREFIX.match(ln) for ln in vllm_lines)
        assert any("Initializing a V1 LLM engine (v0.23.0)" in ln and "method='eagle3'" in ln for ln in lines)
        assert any(ln.endswith("Model Runner V2 does not yet support LoRA; using the V1 model runner instead.")
                   for ln in lines)
        assert not any("EagleSpeculator patch active" in ln for ln in lines)  # V1 runs: the patch is not reached
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5) as r:
            assert r.status == 200
        req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/completions", method="POST",
                                     data=json.dumps({"prompt": "hi", "max_tokens": 3}).encode())
        with urllib.request.urlopen(req, timeout=5) as r:
            assert json.load(r)["usage"]["completion_tokens"] == 3
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        log.close()
