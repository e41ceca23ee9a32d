"""`dynspec launch / watch / stop / status` on a vLLM profile (`engine = "vllm"`), end to end, with the
vLLM GPU-server stand-in (tests/standin/fake_vllm_server.py) as the server.

The expected verdicts are a person's reading of the lines the stand-in replays (its docstring names the
recorded excerpt of tests/fixtures/logs/vllm/ each comes from):
* with STANDIN_V2_UNSUPPORTED the log says "Model Runner V2 does not yet support LoRA; using the V1 model
  runner instead." and then "[v1/worker/gpu_model_runner.py:2641] Loading drafter model..." (11-eagle3-
  gptoss-drafter-loading-v1-runner.log): the V1 runner's EagleProposer runs, the patch is in V2's
  EagleSpeculator and its line never comes: dead;
* without it the patch's own line "EagleSpeculator patch active: num_speculative_tokens=3" comes, then
  uvicorn's "Application startup complete." (21-v1-api-server-start-and-ready.log) and /health answers
  200: live and ready.
"""
import json
import sys
import uuid

import pytest

from tests.run.helpers import cleanup, dynspec, group_alive, record, write_vllm_profile


@pytest.fixture
def name():
    n = f"v-{uuid.uuid4().hex[:8]}"
    yield n
    cleanup(n)


def test_v1_fallback_is_dead_and_the_server_is_stopped(tmp_path, name):
    prof = write_vllm_profile(tmp_path / "p.toml", name, env={"STANDIN_V2_UNSUPPORTED": "LoRA"})
    r = dynspec("launch", str(prof), "--no-preflight", "--json", timeout=120)
    assert r.returncode == 1, r.stderr + r.stdout
    doc = json.loads(r.stdout)
    assert doc["verdict"] == "dead" and doc["engine"] == "vllm" and doc["model_runner"] == "v1"
    assert not doc["marker"]["found"]
    assert doc["run"]["stopped"] is True
    rec = record(name)
    assert rec["engine"] == "vllm" and rec["verdict"] == "dead" and rec["stopped_at"]
    assert rec["argv"][1:5] == ["-m", "fake_vllm_server", "serve", "/models/tiny"]
    assert not group_alive(rec["pgid"])


def test_patched_v2_is_live_ready_on_health_then_status_and_stop(tmp_path, name):
    prof = write_vllm_profile(tmp_path / "p.toml", name)
    r = dynspec("launch", str(prof), "--no-preflight", "--json", timeout=120)
    assert r.returncode == 0, r.stderr + r.stdout
    doc = json.loads(r.stdout)
    assert doc["verdict"] == "live" and doc["engine"] == "vllm" and doc["server_ready"]
    assert doc["marker"]["found"] and doc["marker"]["fields"] == {"tokens": "3"}
    assert doc["run"]["why"] == "ready" and doc["run"]["health"] == "/health 200"  # vLLM has no /health_generate
    rec = record(name)
    assert rec["engine"] == "vllm" and group_alive(rec["pgid"])
    access = [ln for ln in open(rec["log"]) if ln.startswith("INFO:     127.0.0.1:")]  # the stand-in's access log
    assert access and all('"GET /health HTTP' in ln for ln in access)  # vLLM's readiness path only
    st = dynspec("status", name, "--json")
    assert st.returncode == 0, st.stderr
    row = next(x for x in json.loads(st.stdout)["runs"] if x["name"] == name)
    assert row["alive"] and row["verdict"] == "live"  # judged with the vLLM judge: sglang's would not say live
    s = dynspec("stop", name)
    assert s.returncode == 0 and "no process remains" in s.stdout
    assert not group_alive(rec["pgid"])


def test_no_watch_then_watch_judges_with_the_recorded_engine(tmp_path, name):
    prof = write_vllm_profile(tmp_path / "p.toml", name, env={"STANDIN_PACE": "0.1"})
    assert dynspec("launch", str(prof), "--no-preflight", "--no-watch", "--json").returncode == 0
    w = dynspec("watch", name, "--json", timeout=120)
    assert w.returncode == 0, w.stderr + w.stdout
    doc = json.loads(w.stdout)
    assert doc["verdict"] == "live" and doc["engine"] == "vllm" and doc["run"]["health"] == "/health 200"
    assert dynspec("stop", name).returncode == 0


def test_the_preflight_gate_is_vllms(tmp_path, name):
    # the test's python has no vllm: vLLM's preflight (not sglang's) says so, and the launch is refused
    prof = write_vllm_profile(tmp_path / "p.toml", name)
    r = dynspec("launch", str(prof), timeout=120)
    assert r.returncode == 1, r.stderr + r.stdout
    assert "vllm preflight: DEAD" in r.stdout and "DS608" in r.stdout and "no module named vllm" in r.stdout
    assert "not started" in r.stdout
    with pytest.raises(FileNotFoundError):
        record(name)  # nothing was started


def test_preflight_of_a_vllm_profile_is_vllms(tmp_path, name):
    # engine = "vllm" in the profile: `dynspec preflight PROFILE` reads `vllm serve` flags with vLLM's inspector
    prof = write_vllm_profile(tmp_path / "p.toml", name)
    r = dynspec("preflight", str(prof), "--json")
    assert r.returncode == 1, r.stderr + r.stdout
    doc = json.loads(r.stdout)
    assert doc["engine"] == "vllm" and doc["verdict"] == "dead" and doc["findings"][0]["code"] == "DS608"


@pytest.mark.parametrize("extra, words", [
    ('engine = "tensorrt"', "engine 'tensorrt': choose one of sglang, vllm"),
    ('feature = "dynamic-spec-disable"', "is a sglang patch"),
])
def test_bad_engine_is_one_line_exit_2(tmp_path, name, extra, words):
    prof = write_vllm_profile(tmp_path / "p.toml", name)
    text = prof.read_text()
    key = extra.split(" = ")[0]
    prof.write_text("\n".join(extra if ln.startswith(key + " =") else ln for ln in text.splitlines()) + "\n")
    r = dynspec("launch", str(prof), "--no-preflight")
    assert r.returncode == 2 and words in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr
    with pytest.raises(FileNotFoundError):
        record(name)  # nothing was started


def test_group_launch_of_a_vllm_profile_is_refused(tmp_path, name):
    prof = write_vllm_profile(tmp_path / "p.toml", name, extra='hosts = ["local", "local"]')
    r = dynspec("group", "launch", str(prof), "--no-preflight")
    assert r.returncode == 2 and "built for sglang only, not vllm" in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_argv_per_engine():
    from dynspec_cli.run.profiles import Profile

    v = Profile(name="v", engine="vllm", model="/m", python="py", port=8001, flags={"speculative-config": "{}"})
    assert v.argv() == ["py", "-m", "vllm.entrypoints.cli.main", "serve", "/m", "--speculative-config", "{}",
                        "--port", "8001"]
    s = Profile(name="s", model="/m", python="py", port=30001)
    assert s.argv() == ["py", "-m", "sglang.launch_server", "--model-path", "/m", "--port", "30001"]
    assert Profile(name="x", python=sys.executable).argv()[2] == "sglang.launch_server"
