"""The GPU recipe's cost measurement (gpu/device/throughput.py --requests, gpu/device/hunkcost_summary.py), run
here as the GPU machine runs them: throughput.py against a local HTTP server that answers /generate as sglang
does (meta_info.completion_tokens), the summary on rounds whose ratios are worked out by hand below."""
from __future__ import annotations

import json
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DEVICE = REPO / "gpu" / "device"


@pytest.fixture
def generate_server():
    seen = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):
            seen.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
            body = json.dumps({"meta_info": {"completion_tokens": 256, "spec_accept_length": 4.0}}).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield srv.server_address[1], seen
    srv.shutdown()


def test_fixed_work_sends_exactly_the_requests_asked_whatever_the_time(generate_server):
    port, seen = generate_server
    out = subprocess.run([sys.executable, str(DEVICE / "throughput.py"), str(port), "--concurrency", "3",
                          "--requests", "5", "--duration", "0"], capture_output=True, text=True, check=True)
    doc = json.loads(out.stdout)
    assert (doc["requests"], doc["tokens"], len(seen)) == (15, 15 * 256, 15)  # 3 clients x 5, --duration ignored
    assert seen[0]["sampling_params"] == {"max_new_tokens": 256, "temperature": 0, "ignore_eos": True}


def _rounds(tmp_path: Path, rows: list[tuple[str, str, int, float]]) -> Path:
    f = tmp_path / "hunkcost.txt"
    f.write_text("".join(f"{n} {c} round {r} {json.dumps({'tokens_per_s': t})}\n" for n, c, r, t in rows))
    return f


def test_summary_ratios_per_round_with_a_t_interval_and_the_a_a_floor(tmp_path):
    # c4: hunks/bare per round = 0.99, 1.00, 1.01 -> mean 1.0000, sd 0.01, t(2) = 4.303: half width
    # 4.303 * 0.01 / sqrt(3) = 0.02484 -> [0.9752, 1.0248]; bare2/bare = 1.0 every round -> [1.0000, 1.0000]
    rows = []
    for r, h in enumerate((990.0, 1000.0, 1010.0), 1):
        rows += [("hunks", "c4", r, h), ("bare", "c4", r, 1000.0), ("bare2", "c4", r, 1000.0)]
    out = subprocess.run([sys.executable, str(DEVICE / "hunkcost_summary.py"), str(_rounds(tmp_path, rows))],
                         capture_output=True, text=True, check=True).stdout
    assert "c4: 3 rounds; mean tok/s hunks 1000, bare 1000, bare2 1000" in out
    assert "per-hunk probe / no probe: mean ratio 1.0000, 95% CI [0.9752, 1.0248], median 1.0000" in out
    assert "no probe / no probe (A/A floor): mean ratio 1.0000, 95% CI [1.0000, 1.0000]" in out
    assert "c4: the per-hunk probe's cost is not shown to be under 1% (lower end of the ratio's 95% interval 0.9752)" in out


def test_summary_says_under_one_percent_only_when_the_whole_interval_is_above_0_99(tmp_path):
    # ratios 0.995, 0.996, 0.997, 0.998: mean 0.9965, sd 0.001291, t(3) = 3.182 -> lower end 0.99445
    rows = []
    for r, h in enumerate((995.0, 996.0, 997.0, 998.0), 1):
        rows += [("hunks", "c8", r, h), ("bare", "c8", r, 1000.0)]
    out = subprocess.run([sys.executable, str(DEVICE / "hunkcost_summary.py"), str(_rounds(tmp_path, rows))],
                         capture_output=True, text=True, check=True).stdout
    assert "c8: the per-hunk probe's cost is under 1% (lower end of the ratio's 95% interval 0.9944)" in out
    assert "A/A" not in out  # no bare2 server: no floor line


def test_summary_reads_the_servers_own_decode_lines(tmp_path):
    log = tmp_path / "tiny-hunks.log"
    line = ("[2026-12-06 19:23:15] Decode batch, #running-req: 4, #token: 631, token usage: 0.01, accept len: 4.00, "
            "accept rate: 1.00, cuda graph: True, gen throughput (token/s): {}, #queue-req: 0\n")
    log.write_text("".join(line.format(v) for v in (7.53, 5000.0, 5100.0, 5200.0, 5300.0)))  # real line, values set
    rows = [("hunks", "c4", 1, 1000.0), ("bare", "c4", 1, 1000.0)]
    out = subprocess.run([sys.executable, str(DEVICE / "hunkcost_summary.py"), str(_rounds(tmp_path, rows)),
                          "--log", f"hunks={log}"], capture_output=True, text=True, check=True).stdout
    assert "server hunks's Decode batch lines (median gen throughput): batch 4: 5100 tok/s over 5 lines" in out
    assert "c4: one round only, no interval" in out
