"""The H100 run on the installed wheel (tests/fixtures/logs/gpu-h100/0.5.12.post1-wheel, README there):
expectations read from the logs by hand."""
import json
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parents[1] / "fixtures" / "logs" / "gpu-h100" / "0.5.12.post1-wheel"


def verify(name: str) -> tuple[int, dict]:
    r = subprocess.run([sys.executable, "-m", "dynspec_cli", "verify", "--json", str(HERE / name)],
                       capture_output=True, text=True, timeout=120)
    return r.returncode, json.loads(r.stdout)


def test_the_working_patch_is_live_marker_and_effect_agreeing():
    rc, d = verify("tiny-eagle3.log")
    assert (rc, d["verdict"]) == (0, "live")
    effect = d["evidence"]["effect"]
    assert effect["speculation_off_at"] == [6, 10] and {1, 5} <= set(effect["speculation_on_at"])
    assert d["stopped"]["signal"] == "SIGTERM" and d["crashed"] is False


def test_case_d_marker_logged_behaviour_never_ran_is_dead_from_its_decode_lines():
    """The issue's false live: the marker in EAGLEWorkerV2.__init__ logged (line 53), the behaviour sat in
    EAGLEWorker.draft, which does not run; accept len 4.00 at running batch 6 and 10."""
    rc, d = verify("tiny-md.log")
    assert (rc, d["verdict"]) == (1, "dead")
    assert d["marker"]["line"] == 53
    (f,) = [f for f in d["findings"] if f["code"] == "DS321"]
    assert "running batch 6" in f["message"] and "running batch 10" in f["message"]
    # prove on the same server failed at the same batches: the two commands agree
    prove = json.loads((HERE / "prove-md.json").read_text())
    assert (prove["outcome"], prove["exit_code"], prove["verdict"]) == ("fails", 1, "dead")


def test_case_d_preflight_said_dead_before_launch():
    # (run.sh's timing line follows the JSON document in that file)
    pre = json.loads((HERE / "preflight-md.json").read_text().splitlines()[0])
    assert pre["verdict"] == "dead" and "DS226" in [f["code"] for f in pre["findings"]]
    (behaviour,) = [h for h in pre["hunks"] if h["role"] == "behaviour"]
    assert (behaviour["class"], behaviour["function"], behaviour["reach"]) == ("EAGLEWorker", "draft", "not reachable")


def test_the_dead_launch_was_stopped_before_any_weight_loaded():
    rc, d = verify("tiny-dead.log")
    assert (rc, d["verdict"]) == (1, "dead") and "DS201" in [f["code"] for f in d["findings"]]
    assert "Load weight end" not in (HERE / "tiny-dead.log").read_text()
