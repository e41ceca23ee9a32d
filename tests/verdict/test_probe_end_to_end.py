"""The probe's real output (a real process tree: the probe's stand-in package, schedulers spawned
like sglang's) judged by `dynspec verify`: per-rank proof, and the worker reported from inside."""
import json
import subprocess
import sys

from tests.inject.standin_pkg.harness import injected_env, run, standin_cmd, v2_init


def verify(log_text: str, tmp_path, *extra):
    log = tmp_path / "server.log"
    log.write_text(log_text)
    feat = tmp_path / "feat.toml"
    # the stand-in package logs its own marker line; the feature file says which one
    feat.write_text("name='standin'\ntitle='stand-in'\n[marker]\npattern='Dynamic speculation disable enabled'\n"
                    "literal='Dynamic speculation disable enabled'\n[[patch]]\nmodule='eagle_worker_v2'\nclass='EAGLEWorkerV2'\n")
    r = subprocess.run([sys.executable, "-m", "dynspec_cli", "verify", "--json", "--feature", str(feat), *extra, str(log)],
                       capture_output=True, text=True, timeout=60)
    return r.returncode, json.loads(r.stdout)


def test_v2_launch_with_the_probe_is_proven_on_every_rank(tmp_path):
    env = injected_env([v2_init().as_target()])
    r = run(standin_cmd(sys.executable, "--tp-size", "2", "--speculative-algorithm", "EAGLE",
                        "--speculative-disable-batch-threshold", "4", "--steps", "2"), env)
    assert r.returncode == 0, r.stderr[-2000:]
    code, doc = verify(r.stderr, tmp_path)
    ranks = [x for x in doc["probe"]["ranks"] if x["role"] == "scheduler"]
    assert len(ranks) == 2 and all(x["hits"] >= 1 and x["worker"].endswith("EAGLEWorkerV2") for x in ranks)
    assert doc["probe"]["proven"] and doc["worker"]["basis"].startswith("probe")
    if doc["marker"]["found"]:
        assert code == 0 and doc["verdict"] == "live"


def test_v1_launch_with_the_probe_is_dead_from_inside(tmp_path):
    env = injected_env([v2_init().as_target()])  # the patch is in V2 only; V1 runs
    r = run(standin_cmd(sys.executable, "--speculative-algorithm", "EAGLE", "--speculative-eagle-topk", "2",
                        "--steps", "2"), env)
    code, doc = verify(r.stderr, tmp_path)
    assert code == 1 and doc["verdict"] == "dead"
    assert "DS310" in [f["code"] for f in doc["findings"]]
    assert doc["worker"]["class"].endswith("EAGLEWorker")


# --- the probe watching every hunk of a diff (schema v2) ------------------------------------------
# Decode batch lines recorded on the lent H200 (sglang 0.5.12.post1), appended after the stand-in's
# run: the server "served" them. The judge needs 3 of them (DS325's N) before a hunk that never ran is dead.
RECORDED = "tests/fixtures/logs/gpu-h200/0.5.12.post1/live-probe.log"


def decode_lines(n: int) -> str:
    lines = [ln for ln in open(RECORDED).read().splitlines() if "Decode batch" in ln][:n]
    assert len(lines) == n
    return "\n".join(lines) + "\n"


def test_behaviour_hunk_that_runs_on_every_rank_is_live(tmp_path):
    from tests.inject.standin_pkg.harness import v2_forward

    env = injected_env([{**v2_forward().as_target(), "hunk": 0, "role": "behaviour"},
                        {**v2_init().as_target(), "hunk": 1, "role": "marker"}])
    r = run(standin_cmd(sys.executable, "--tp-size", "2", "--speculative-algorithm", "EAGLE", "--steps", "3"), env)
    assert r.returncode == 0, r.stderr[-2000:]
    code, doc = verify(r.stderr + decode_lines(3), tmp_path)
    codes = [f["code"] for f in doc["findings"]]
    assert "DS323" in codes and "DS325" not in codes, codes
    assert doc["probe"]["hunks"]["live"] is True and len(doc["probe"]["hunks"]["ranks"]) == 2
    assert code == 0 and doc["verdict"] == "live"


def test_behaviour_hunk_in_a_class_that_never_runs_is_dead_though_the_marker_logs(tmp_path):
    from tests.inject.standin_pkg.harness import v1_forward

    # issue 29's false LIVE: the marker in EAGLEWorkerV2.__init__, the behaviour only in the V1 worker
    env = injected_env([{**v1_forward().as_target(), "hunk": 0, "role": "behaviour"},
                        {**v2_init().as_target(), "hunk": 1, "role": "marker"}])
    r = run(standin_cmd(sys.executable, "--tp-size", "2", "--speculative-algorithm", "EAGLE", "--steps", "3"), env)
    assert r.returncode == 0, r.stderr[-2000:]
    code, doc = verify(r.stderr + decode_lines(2), tmp_path)  # under N: not yet dead
    assert "DS325" not in [f["code"] for f in doc["findings"]] and doc["verdict"] != "live"
    code, doc = verify(r.stderr + decode_lines(3), tmp_path)
    codes = [f["code"] for f in doc["findings"]]
    assert "DS325" in codes and "DS323" not in codes, codes
    assert code == 1 and doc["verdict"] == "dead"
