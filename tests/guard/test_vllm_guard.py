"""`dynspec prove`, `gate` and `guard` for a vLLM server: the vLLM GPU-server stand-in
(tests/standin/fake_vllm_server.py, launched and proven by dynspec itself) logs vLLM's own per-engine
stats line and the `SpecDecoding metrics` line right after it, and exports vLLM's Prometheus counters
per engine; the real sglang.bench_serving of the published 0.5.9 wheel drives it with `--backend vllm`
(POST /v1/completions, streamed, as against a real vLLM).

Expected values are read by hand from vLLM's texts: the stand-in accepts 2 of its 3 draft tokens per
step, so the mean acceptance length (1 + accepted / drafts) is 3.00 at every batch; a request of 64
tokens takes 21 such steps and a last one of 1 token (nothing accepted): 1 + 42 / 22 = 2.91 over a whole
request, so a window reads between 2.91 and 3.00. Collapsed, none are accepted: 1.00."""
import json
import os
import re
import statistics
import subprocess
import uuid

import pytest

from tests.guard.windows import assert_flagged_at_the_first_window_showing_it
from tests.run.helpers import DYNSPEC, cleanup, record, write_vllm_profile
from tests.support import bench_client
from tests.support.home import runs_dir

pytestmark = pytest.mark.wheels  # the published sglang 0.5.9 wheel's bench_serving

WINDOW = 1.5
ENV = {"VLLM_LOG_STATS_INTERVAL": "0.5"}  # vLLM's own variable: the stats lines every 0.5 s
SERVERS = {  # key -> (env, flags)
    "healthy": ({}, {}),
    "collapse": ({"STANDIN_REPLAY": "collapse@3"}, {}),
    "restart": ({"STANDIN_REPLAY": "restart@3"}, {}),
    "reset": ({"STANDIN_REPLAY": "reset@3"}, {}),
    "dp": ({}, {"data-parallel-size": 2}),
}


@pytest.fixture(scope="module")
def bench():
    return bench_client.client("0.5.9")


@pytest.fixture(scope="module")
def servers(tmp_path_factory):
    d = tmp_path_factory.mktemp("vguard")
    tag = uuid.uuid4().hex[:6]
    patched = d / "speculator.py"
    patched.write_text("# patched: EagleSpeculator patch active: num_speculative_tokens=%d\n")
    names = {k: f"vg-{k}-{tag}" for k in SERVERS}
    replay = {k: d / f"{k}.replay" for k in SERVERS}
    procs = {}
    for key, (env, flags) in SERVERS.items():
        prof = write_vllm_profile(d / f"{key}.toml", names[key], flags=flags,
                                  env={**ENV, "STANDIN_REPLAY_LOG": str(replay[key]), **env})
        procs[key] = subprocess.Popen(DYNSPEC + ["launch", str(prof), "--no-preflight", "--json"],
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        for key, p in procs.items():
            out, err = p.communicate(timeout=180)
            assert p.returncode == 0, f"{key}: {err}{out}"
        proving = {k: subprocess.Popen(DYNSPEC + ["prove", names[k], "--duration", "2", "--max-new-tokens", "24",
                                                  "--patched-file", str(patched), "--json"],
                                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for k in SERVERS}
        proofs = {}
        for key, p in proving.items():
            out, err = p.communicate(timeout=240)
            assert p.returncode == 0, f"prove {key}: {err}{out}"
            proofs[key] = json.loads(out)
        yield {"names": names, "replay": replay, "proofs": proofs}
    finally:
        for n in names.values():
            cleanup(n)
            (runs_dir() / f"{n}.receipt.json").unlink(missing_ok=True)


def bench_args(bench, name: str, out) -> list:
    return bench.cmd("--backend", "vllm", "--host", "127.0.0.1", "--port", str(record(name)["port"]),
                     "--model", "/models/tiny", "--tokenizer", str(bench.tokenizer), "--dataset-name", "random-ids",
                     "--num-prompts", "60", "--random-input-len", "16", "--random-output-len", "64",
                     "--random-range-ratio", "1", "--max-concurrency", "2", "--output-file", str(out))


def guard(bench, name: str, out) -> tuple:
    os.kill(record(name)["pid"], 10)  # SIGUSR1: the replay clock starts at the benchmark's first request
    cmd = DYNSPEC + ["guard", name, "--window", str(WINDOW), "--"] + bench_args(bench, name, out)
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=240, env=bench.env())
    report = out.with_name(out.name[:-len(".jsonl")] + ".dynspec-guard.json")
    return r, json.loads(report.read_text()) if report.exists() else None


def window_at(doc: dict, t: float) -> int:
    rel = t - doc["benchmark"]["started_at"]
    return next(w["index"] for w in doc["windows"] if w["start"] <= rel < w["end"] + 1e-6)


def replayed(servers, key: str) -> float:
    return float(servers["replay"][key].read_text().split()[0])


def test_prove_reads_the_engine_stats_and_specdecoding_lines(servers):
    doc = servers["proofs"]["healthy"]
    assert doc["engine"] == "vllm" and doc["outcome"] == "proven" and doc["threshold"] is None
    assert doc["verdict"] == "live"
    for step, batch in zip(doc["steps"], (1, 4)):  # the feature has no threshold: on at every batch
        assert step["running_mode"] == batch and step["speculation"] == "on" and step["expected"] == "on"
        assert step["accept_len"] == 3.0
    rc = json.loads((runs_dir() / f"{servers['names']['healthy']}.receipt.json").read_text())
    assert rc["engine"] == "vllm" and rc["proven"] and rc["acceptance"]["provenance"] == "real"
    g = subprocess.run(DYNSPEC + ["gate", servers["names"]["healthy"]], capture_output=True, text=True, timeout=60)
    assert g.returncode == 0 and "live and proven" in g.stdout, g.stderr


def test_healthy_vllm_run_passes_with_the_benchmarks_output(servers, bench, tmp_path):
    name = servers["names"]["healthy"]
    plain = subprocess.run(bench_args(bench, name, tmp_path / "plain.jsonl"), capture_output=True, text=True,
                           timeout=240, env=bench.env())
    r, doc = guard(bench, name, tmp_path / "healthy.jsonl")
    assert plain.returncode == r.returncode == 0, r.stderr[-3000:]
    assert "Backend:                                 vllm" in r.stdout and re.search(r"Successful requests:\s+60\s", r.stdout)

    def labels(text):
        return [ln.split(":")[0] for ln in text.splitlines() if re.match(r"^[A-Z][^:]+:\s+\S", ln)]

    assert labels(plain.stdout) == labels(r.stdout) and "dynspec guard" not in r.stdout and "VALID" not in r.stdout
    assert doc["valid"] is True and "✓ VALID" in r.stderr
    eff = [rk for w in doc["windows"] for rk in w["ranks"] if rk["state"] == "effective"]
    # per window: one short window on a loaded machine holds few steps, and each request's last step accepts
    # nothing (CI saw 1 + 36/19 = 2.895 under AIPerf); the whole run's is exact below. A collapse is 1.00
    assert eff and all(2.5 <= rk["accept_len"] <= 3.0 and rk["running_range"][1] <= 2 for rk in eff), eff
    busy = [w for w in doc["windows"] if w["counters"] and w["counters"].get("vllm:spec_decode_num_drafts_total")]
    drafts = sum(w["counters"]["vllm:spec_decode_num_drafts_total"] for w in busy)
    accepted = sum(w["counters"]["vllm:spec_decode_num_accepted_tokens_total"] for w in busy)
    assert drafts >= 60 * 22 and abs(1 + accepted / drafts - (1 + 42 / 22)) < 0.01  # 60 requests of 64 tokens


def test_collapse_mid_run_is_caught_in_its_window(servers, bench, tmp_path):
    r, doc = guard(bench, servers["names"]["collapse"], tmp_path / "collapse.jsonl")
    assert r.returncode == 65, r.stderr[-3000:]
    assert re.search(r"Successful requests:\s+60\s", r.stdout) and doc["benchmark"]["exit_code"] == 0
    reason = next(x for x in doc["reasons"] if x["code"] == "DS702")
    at = window_at(doc, replayed(servers, "collapse"))
    assert_flagged_at_the_first_window_showing_it(doc, reason, at)
    first = doc["windows"][reason["window"] - 1]
    # ~1.00 in the first collapsed window (one stats line may straddle the collapse: CI read 1.04), exactly
    # 1.00 in every later one, in the log and in the engine's own counters (the first window's /metrics
    # delta may still hold steps from before the collapse when a scrape lands late: CI read 1.81)
    assert first["state"] == "collapsed" and first["ranks"][0]["accept_len"] <= 1.1
    later = [w["ranks"][0] for w in doc["windows"][reason["window"]:] if w["ranks"]]
    logged = [rk["accept_len"] for rk in later if rk.get("accept_len") is not None]
    gauged = [rk["gauge_spec_accept_length"] for rk in later if rk.get("gauge_spec_accept_length") is not None]
    assert logged and all(a == 1.0 for a in logged) and gauged and all(g == 1.0 for g in gauged), (logged, gauged)
    # before the first collapsed window, speculation was effective (the collapse may fall late in window `at`)
    assert any(w["state"] == "effective" for w in doc["windows"][:reason["window"] - 1]), \
        ([(w["index"], w["state"], w["start"]) for w in doc["windows"]], at)


def test_restart_in_place_is_caught(servers, bench, tmp_path):
    name = servers["names"]["restart"]
    pid = record(name)["pid"]
    r, doc = guard(bench, name, tmp_path / "restart.jsonl")
    assert r.returncode == 65, r.stderr[-3000:]
    assert record(name)["pid"] == pid
    reason = next(x for x in doc["reasons"] if x["code"] == "DS701")
    at = window_at(doc, replayed(servers, "restart"))
    assert reason["window"] in (at, at + 1) and "new start-up" in reason["message"], (reason, at)


def test_counter_reset_is_caught(servers, bench, tmp_path):
    r, doc = guard(bench, servers["names"]["reset"], tmp_path / "reset.jsonl")
    assert r.returncode == 65, r.stderr[-3000:]
    reason = next(x for x in doc["reasons"] if x["code"] == "DS705")
    at = window_at(doc, replayed(servers, "reset"))
    assert reason["window"] in (at, at + 1), (reason, at)
    assert "vllm:spec_decode_num_drafts_total" in reason["message"]


def test_two_engines_are_judged_each(servers, bench, tmp_path):
    r, doc = guard(bench, servers["names"]["dp"], tmp_path / "dp.jsonl")
    assert r.returncode == 0, r.stderr[-3000:]
    assert doc["ranks"] == ["engine 0", "engine 1"]
    seen = {rk["rank"] for w in doc["windows"] for rk in w["ranks"] if rk["state"] == "effective"}
    assert seen == {"engine 0", "engine 1"}
    gauges = {}  # per engine, from its own engine="N" counters (a window's tail request may end mid-window)
    for w in doc["windows"]:
        for rk in w["ranks"]:
            if rk["gauge_spec_accept_length"] is not None:
                gauges.setdefault(rk["rank"], []).append(rk["gauge_spec_accept_length"])
    assert set(gauges) == {"engine 0", "engine 1"}
    assert all(2.8 <= statistics.median(v) <= 3.0 for v in gauges.values()), gauges
