"""`dynspec guard` around the real sglang.bench_serving (published 0.5.9 wheel) driving the GPU-server
stand-in, each server replaying one thing that goes wrong mid-run (tests/guard/conftest.py). Each
invalid run is caught in the window where it happened (the stand-in notes the moment in its replay
log); a healthy run passes; the benchmark's output and exit status are its own."""
import json
import re
import subprocess
import sys

import pytest

from tests.guard.conftest import TH, arm, port
from tests.run.helpers import DYNSPEC
from tests.support.home import runs_dir

pytestmark = pytest.mark.wheels  # the published sglang 0.5.9 wheel's bench_serving

WINDOW = 1.5
RESULT_KEYS = ("Backend:", "Successful requests:", "Benchmark duration (s):", "Output token throughput (tok/s):",
               "Mean TPOT (ms):")


def bench_args(bench, p: int, out) -> list:
    return bench.cmd("--backend", "sglang", "--host", "127.0.0.1", "--port", str(p), "--tokenizer", str(bench.tokenizer),
                     "--dataset-name", "random-ids", "--num-prompts", "60", "--random-input-len", "16",
                     "--random-output-len", "64", "--random-range-ratio", "1", "--max-concurrency", "2",
                     "--output-file", str(out))


def guard(bench, name: str, out, *extra: str) -> tuple:
    arm(name)
    cmd = DYNSPEC + ["guard", name, "--window", str(WINDOW), *extra, "--"] + bench_args(bench, port(name), out)
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=240, env=bench.env())
    report = out.with_name(out.name[:-len(".jsonl")] + ".dynspec-guard.json")
    return r, json.loads(report.read_text()) if report.exists() else None


def replayed(servers, key: str) -> float:
    """When the stand-in did it (unix time, from its replay log)."""
    return float(servers["replay"][key].read_text().split()[0])


def window_at(doc: dict, t: float) -> int:
    rel = t - doc["benchmark"]["started_at"]
    return next(w["index"] for w in doc["windows"] if w["start"] <= rel < w["end"] + 1e-6)


def test_healthy_run_passes_with_the_benchmarks_output_and_exit_status(servers, bench, tmp_path):
    name = servers["names"]["healthy"]
    r, doc = guard(bench, name, tmp_path / "healthy.jsonl")
    assert r.returncode == 0, r.stderr[-3000:]
    assert "Serving Benchmark Result" in r.stdout and re.search(r"Successful requests:\s+60\s", r.stdout)
    assert "dynspec guard" not in r.stdout and "VALID" not in r.stdout  # the guard's own lines go to stderr
    assert "✓ VALID" in r.stderr and "gate ok" in r.stderr
    assert doc["valid"] is True and doc["exit_code"] == 0 and doc["benchmark"]["exit_code"] == 0
    states = [w["state"] for w in doc["windows"]]
    # before the first Decode batch line the first requests are in flight with nothing logged yet: a window
    # there may be silent (seen on a loaded machine); from the first effective window on, none may
    assert "effective" in states and set(states[states.index("effective"):]) <= {"effective", "idle", "undecided", "plain"}, states
    assert set(states[:states.index("effective")]) <= {"idle", "undecided", "silent"}, states
    eff = [rk for w in doc["windows"] for rk in w["ranks"] if rk["state"] == "effective"]
    assert all(rk["accept_len"] > 1.5 and rk["running_range"][1] <= TH for rk in eff)  # 2 clients, threshold 3
    # the benchmark's own result file is there, untouched, beside the report
    rows = (tmp_path / "healthy.jsonl").read_text().splitlines()
    assert len(rows) == 1 and json.loads(rows[0])["completed"] == 60


def test_output_and_exit_status_are_the_benchmarks_own(servers, bench, tmp_path):
    """Unguarded and guarded, sglang.bench_serving prints the same result block; a command's bytes
    and status pass through exactly (no traffic from a failing command is its failure, not ours)."""
    name = servers["names"]["healthy"]
    plain = subprocess.run(bench_args(bench, port(name), tmp_path / "plain.jsonl"), capture_output=True, text=True,
                           timeout=240, env=bench.env())
    guarded, _ = guard(bench, name, tmp_path / "guarded.jsonl")
    assert plain.returncode == guarded.returncode == 0

    def labels(text):
        return [ln.split(":")[0] for ln in text.splitlines() if re.match(r"^[A-Z][^:]+:\s+\S", ln)]

    assert labels(plain.stdout) == labels(guarded.stdout) and all(k in guarded.stdout for k in RESULT_KEYS)
    cmd = DYNSPEC + ["guard", name, "--window", "0.5", "--report", str(tmp_path / "sh.json"), "--",
                     "sh", "-c", "printf 'out\\000\\377put'; printf 'err' >&2; exit 3"]
    r = subprocess.run(cmd, capture_output=True, timeout=60)
    assert r.returncode == 3 and r.stdout == b"out\x00\xffput" and r.stderr.startswith(b"dynspec guard: gate ok")
    assert b"err" in r.stderr


def test_collapse_mid_run_is_caught_in_its_window(servers, bench, tmp_path):
    r, doc = guard(bench, servers["names"]["collapse"], tmp_path / "collapse.jsonl")
    assert r.returncode == 65, r.stderr[-3000:]
    assert "Serving Benchmark Result" in r.stdout  # the benchmark ran to its end and printed its result
    assert doc["valid"] is False and doc["benchmark"]["exit_code"] == 0
    reason = next(x for x in doc["reasons"] if x["code"] == "DS702")
    at = window_at(doc, replayed(servers, "collapse"))
    assert reason["window"] in (at, at + 1)  # the window it happened in (or the next, if at its very end)
    first = doc["windows"][reason["window"] - 1]
    # ~1.00 in the first collapsed window (a Decode batch line may straddle the collapse), exactly 1.00 after
    assert first["state"] == "collapsed" and first["ranks"][0]["accept_len"] <= 1.1
    logged = [w["ranks"][0]["accept_len"] for w in doc["windows"][reason["window"]:]
              if w["ranks"] and w["ranks"][0].get("accept_len") is not None]
    assert logged and all(a == 1.0 for a in logged), logged
    # it was fine before the first collapsed window (the collapse may fall late in window `at`)
    assert any(w["state"] == "effective" for w in doc["windows"][:reason["window"] - 1])
    assert "✗ INVALID" in r.stderr and "DS702" in r.stderr


def test_restart_in_place_is_caught_although_pid_and_command_line_stay(servers, bench, tmp_path):
    name = servers["names"]["restart"]
    from tests.run.helpers import record

    pid = record(name)["pid"]
    r, doc = guard(bench, name, tmp_path / "restart.jsonl")
    assert r.returncode == 65, r.stderr[-3000:]
    assert record(name)["pid"] == pid  # exec in place: the gate's process checks cannot see it
    reason = next(x for x in doc["reasons"] if x["code"] == "DS701")
    at = window_at(doc, replayed(servers, "restart"))
    assert reason["window"] in (at, at + 1), (reason, at)
    assert "new start-up" in reason["message"]


def test_counter_reset_is_caught_in_its_window(servers, bench, tmp_path):
    r, doc = guard(bench, servers["names"]["reset"], tmp_path / "reset.jsonl")
    assert r.returncode == 65, r.stderr[-3000:]
    reason = next(x for x in doc["reasons"] if x["code"] == "DS705")
    at = window_at(doc, replayed(servers, "reset"))
    assert reason["window"] in (at, at + 1), (reason, at)
    assert "sglang:generation_tokens_total" in reason["message"]


def test_dp_server_whose_rank0_reports_nothing_is_invalid(servers, bench, tmp_path):
    r, doc = guard(bench, servers["names"]["dp"], tmp_path / "dp.jsonl")
    assert r.returncode == 65, r.stderr[-3000:]
    assert "Accept length:" not in r.stdout  # bench_serving reads internal_states[0] only (sglang PR #34743)
    assert doc["ranks"] == ["DP0", "DP1"]
    reason = next(x for x in doc["reasons"] if x["code"] == "DS703")
    assert "DP0" in reason["message"] and "DP1" in reason["message"]
    busy = [w["index"] for w in doc["windows"] if w["traffic"]]
    assert reason["window"] == busy[0]  # silent from the first window with traffic on
    notes = [e["message"] for w in doc["windows"] for e in w["events"] if not e["fatal"]]
    assert any("internal_states[0]" in n for n in notes)


def test_gate_refusal_starts_nothing(servers, tmp_path):
    name = servers["names"]["healthy"]
    flag = tmp_path / "ran"
    r = subprocess.run(DYNSPEC + ["guard", name, "--max-age", "0s", "--", "touch", str(flag)], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 125 and "gate FAILED age" in r.stderr and not flag.exists()
    r = subprocess.run(DYNSPEC + ["guard", name, "--", "no-such-benchmark-xyz"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 127 and r.stderr.strip() == "dynspec guard: no-such-benchmark-xyz: command not found"
    r = subprocess.run(DYNSPEC + ["guard", name], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1


def one_request(p: int) -> list:
    code = ("import json,sys,urllib.request as u;u.urlopen(u.Request('http://127.0.0.1:%d/generate',data=json.dumps("
            "{'text':'hi','sampling_params':{'max_new_tokens':200}}).encode(),headers={'Content-Type':'application/json'}"
            "),timeout=60).read();print('done')" % p)
    return [sys.executable, "-c", code]


def test_relaxed_acceptance_is_refused_unless_accepted(servers, tmp_path):
    """--speculative-accept-threshold-single 0.5: sglang accepts drafts the target would not sample,
    so its accept length is not the draft's (lossy). gate and guard refuse it; --accept-synthetic passes."""
    name = servers["names"]["lossy"]
    rc = json.loads((runs_dir() / f"{name}.receipt.json").read_text())
    assert rc["acceptance"]["provenance"] == "lossy"
    assert rc["acceptance"]["evidence"][0]["setting"] == "--speculative-accept-threshold-single"
    g = subprocess.run(DYNSPEC + ["gate", name], capture_output=True, text=True, timeout=60)
    assert g.returncode == 1 and "FAILED acceptance" in g.stderr and "lossy" in g.stderr
    g = subprocess.run(DYNSPEC + ["gate", name, "--accept-synthetic"], capture_output=True, text=True, timeout=60)
    assert g.returncode == 0 and "acceptance lossy" in g.stdout
    r = subprocess.run(DYNSPEC + ["guard", name, "--", *one_request(port(name))], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 125 and "FAILED acceptance" in r.stderr and r.stdout == ""
    report = tmp_path / "lossy.json"
    r = subprocess.run(DYNSPEC + ["guard", name, "--accept-synthetic", "--window", "1", "--report", str(report), "--",
                                  *one_request(port(name))], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout == "done\n", r.stderr
    assert json.loads(report.read_text())["provenance"]["provenance"] == "lossy"


def replay_times(servers, key: str) -> dict:
    """EVENT -> unix time, from the stand-in's replay log."""
    rows = [ln.split() for ln in servers["replay"][key].read_text().splitlines() if ln.strip()]
    return {name: float(t) for t, name in rows}


def test_healthy_adaptive_run_passes_with_its_tier_named(servers, bench, tmp_path):
    """sglang 0.5.23 with --speculative-adaptive, its controller moving as sglang's does: valid, and each
    judged window names the tier its batches ran in. Expected tier and candidates from the 0.5.23
    wheel's DEFAULT_ADAPTIVE_CONFIG (adaptive_spec_params.py): batches 1-7 go to "1": [1, 3, 5, 7]."""
    r, doc = guard(bench, servers["names"]["adaptive"], tmp_path / "adaptive.jsonl")
    assert r.returncode == 0, r.stderr[-3000:]
    assert doc["valid"] is True and "Serving Benchmark Result" in r.stdout
    judged = [rk["adaptive"] for w in doc["windows"] for rk in w["ranks"] if rk.get("adaptive")]
    assert judged and all(a["tier"] == 1 and a["candidates"] == [1, 3, 5, 7] for a in judged), (judged, doc["notes"])
    assert all(a["steps"] in (1, 3, 5, 7) for a in judged)
    assert not any(w["state"] == "pinned" for w in doc["windows"])
    assert doc["adaptive"]["tiers"] == {"1": [1, 3, 5, 7], "8": [0, 1, 3], "32": [0, 1], "64": [0]}


def test_adaptive_tier_pinned_mid_run_is_caught(servers, bench, tmp_path):
    """pin@3: acceptance dips until the controller logs its way down to steps 1, then it stops being fed
    while acceptance is back (0.9 per draft: ~0.9 accepted drafts per request at 1 step, above sglang's
    1 - 0.5 step-up point). No accept len ~1.00 to see: only the controller's silence gives it away."""
    name = servers["names"]["pinned"]
    r, doc = guard(bench, name, tmp_path / "pinned.jsonl")
    assert r.returncode == 65, r.stderr[-3000:]
    assert "Serving Benchmark Result" in r.stdout and doc["benchmark"]["exit_code"] == 0
    assert [x["code"] for x in doc["reasons"]] == ["DS708"], doc["reasons"]
    reason = doc["reasons"][0]
    at = window_at(doc, replay_times(servers, "pinned")["pinned"])
    assert reason["window"] in (at, at + 1), (reason, at)  # the window after the controller's last line at the latest
    assert "held 1 draft step in tier 1 (batches 1–7; draft steps 1, 3, 5, 7)" in reason["message"], reason
    first = doc["windows"][reason["window"] - 1]["ranks"][0]
    assert first["state"] == "pinned" and first["adaptive"]["steps"] == 1 and first["adaptive"]["controller_lines"] == 0
    assert 1.5 < first["accept_len"] <= 2.0  # at 1 draft step a verify yields 2 tokens at most
    assert first["spec_num_steps"] == 1  # the 0.5.23 gauge agrees with the log
    assert "DS708 guard-adaptive-pinned" in r.stderr and "✗ INVALID" in r.stderr
    svg = (tmp_path / "pinned.dynspec-guard.svg").read_text()  # the chart, beside the report
    assert doc["chart"].endswith("pinned.dynspec-guard.svg") and "DS708 pinned from window" in svg and ">pinned<" in svg
