"""`dynspec guard` around AIPerf (PyPI `aiperf` 0.13.0, tests/support/aiperf_client.py), a real benchmark
client, driving the vLLM GPU-server stand-in over /v1/completions with streaming: a healthy run passes
with AIPerf's own output and exit status, and a collapse mid-run (the stand-in stops accepting drafts:
mean acceptance length 1.00, no error) is caught in the window it happened in. AIPerf itself reports no
acceptance for it (its console table has none), so without the guard the collapsed run reads as a run."""
import json
import os
import re
import subprocess
import uuid

import pytest

from tests.run.helpers import DYNSPEC, cleanup, record, write_vllm_profile
from tests.guard.windows import assert_flagged_at_the_first_window_showing_it
from tests.support import aiperf_client
from tests.support.home import runs_dir

pytestmark = pytest.mark.wheels  # a real client from PyPI

WINDOW = 1.5
SERVERS = {"healthy": {}, "collapse": {"STANDIN_REPLAY": "collapse@3"}}


@pytest.fixture(scope="module")
def aiperf():
    return aiperf_client.client()


@pytest.fixture(scope="module")
def servers(tmp_path_factory, aiperf):
    d = tmp_path_factory.mktemp("aiperf")
    tag = uuid.uuid4().hex[:6]
    patched = d / "speculator.py"
    patched.write_text("# patched: EagleSpeculator patch active: num_speculative_tokens=%d\n")
    names = {k: f"ap-{k}-{tag}" for k in SERVERS}
    replay = {k: d / f"{k}.replay" for k in SERVERS}
    try:
        for key, env in SERVERS.items():
            prof = write_vllm_profile(d / f"{key}.toml", names[key], env={
                "VLLM_LOG_STATS_INTERVAL": "0.5", "STANDIN_REPLAY_LOG": str(replay[key]), **env})
            r = subprocess.run(DYNSPEC + ["launch", str(prof), "--no-preflight"], capture_output=True, text=True,
                               timeout=180)
            assert r.returncode == 0, r.stderr + r.stdout
            r = subprocess.run(DYNSPEC + ["prove", names[key], "--duration", "2", "--max-new-tokens", "24",
                                          "--patched-file", str(patched)], capture_output=True, text=True, timeout=240)
            assert r.returncode == 0, r.stderr + r.stdout
        yield {"names": names, "replay": replay}
    finally:
        for n in names.values():
            cleanup(n)
            (runs_dir() / f"{n}.receipt.json").unlink(missing_ok=True)


def url(name: str) -> str:
    return f"http://127.0.0.1:{record(name)['port']}"


def rows(text: str) -> list:
    """The metric names of AIPerf's console table."""
    return [m.group(1).strip() for m in re.finditer(r"^│\s+([A-Z][^│]*?)\s+│\s+[\d.]+\s+│", text, re.M)]


def guarded(aiperf, name: str, out) -> tuple:
    os.kill(record(name)["pid"], 10)  # SIGUSR1: the replay clock starts at AIPerf's first request
    cmd = DYNSPEC + ["guard", name, "--window", str(WINDOW), "--"] + aiperf.profile(url(name), out, requests=80)
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=aiperf.env())
    report = out / "dynspec-guard.json"  # configs/benchmarks.toml: beside AIPerf's --artifact-dir
    return r, json.loads(report.read_text()) if report.exists() else None


def test_healthy_run_passes_with_aiperfs_own_output(servers, aiperf, tmp_path):
    name = servers["names"]["healthy"]
    plain = subprocess.run(aiperf.profile(url(name), tmp_path / "plain", requests=80), capture_output=True,
                           text=True, timeout=300, env=aiperf.env())
    r, doc = guarded(aiperf, name, tmp_path / "guarded")
    assert plain.returncode == r.returncode == 0, (plain.returncode, plain.stdout[-3000:], r.stdout[-3000:])
    assert rows(plain.stdout) == rows(r.stdout) and "Request Count (requests)" in rows(r.stdout), rows(r.stdout)
    assert "dynspec guard" not in r.stdout and "VALID" not in r.stdout  # the guard writes to stderr only
    assert doc["valid"] is True and doc["benchmark"]["exit_code"] == 0 and "✓ VALID" in r.stderr
    assert json.loads((tmp_path / "guarded" / "profile_export_aiperf.json").read_text())  # AIPerf's result, there
    eff = [rk for w in doc["windows"] for rk in w["ranks"] if rk["state"] == "effective"]
    # the whole run's is 1 + 42/22 (test_vllm_guard.py checks the sum); one short window on a loaded machine
    # holds few steps, and each request's last step accepts nothing: CI saw 2.895 (1 + 36/19). A collapse is 1.00
    assert eff and all(2.5 <= rk["accept_len"] <= 3.0 for rk in eff), [rk["accept_len"] for rk in eff]


def test_collapse_mid_run_is_caught_within_one_window(servers, aiperf, tmp_path):
    r, doc = guarded(aiperf, servers["names"]["collapse"], tmp_path / "collapse")
    assert r.returncode == 65, r.stderr[-3000:]
    assert doc["benchmark"]["exit_code"] == 0 and "Request Count (requests)" in rows(r.stdout)  # AIPerf ran to its end
    assert not re.search(r"accept", r.stdout, re.I)  # AIPerf's own report says nothing of acceptance
    reason = next(x for x in doc["reasons"] if x["code"] == "DS702")
    t = float(servers["replay"]["collapse"].read_text().split()[0]) - doc["benchmark"]["started_at"]
    at = next(w["index"] for w in doc["windows"] if w["start"] <= t < w["end"] + 1e-6)
    assert_flagged_at_the_first_window_showing_it(doc, reason, at)
    first = doc["windows"][reason["window"] - 1]
    # ~1.00 in the first collapsed window (a stats line may straddle the collapse), exactly 1.00 after
    assert first["state"] == "collapsed" and first["ranks"][0]["accept_len"] <= 1.1
    logged = [w["ranks"][0]["accept_len"] for w in doc["windows"][reason["window"]:]
              if w["ranks"] and w["ranks"][0].get("accept_len") is not None]
    assert logged and all(a == 1.0 for a in logged), logged
    assert "✗ INVALID" in r.stderr and "DS702" in r.stderr
