"""The recorded H100 runs of issue 31 (decode in graphs or eager) and issue 29 (a killed scheduler),
judged in CI. Expectations were written by reading the files (their READMEs say what each line shows),
not from dynspec's tables."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "fixtures" / "logs" / "gpu-h100"
CG = ROOT / "0.5.12.post1-cudagraph"
CRASH = ROOT / "0.5.12.post1-crash"


def verify(log: Path) -> tuple[int, dict]:
    r = subprocess.run([sys.executable, "-m", "dynspec_cli", "verify", "--json", str(log)],
                       capture_output=True, text=True, timeout=120)
    return r.returncode, json.loads(r.stdout)


def codes(d: dict) -> list[str]:
    return [f["code"] for f in d["findings"]]


def test_graphs_captured_to_4_and_batch_8_decoding_eager_names_only_batch_8():
    rc, d = verify(CG / "tiny-cg4.log")
    assert (rc, d["verdict"], d["crashed"]) == (0, "live", False)
    cp = d["compute_path"]
    assert cp["target_captured"] is True and cp["captured_bs"] == [1, 2, 3, 4]  # line 40
    assert cp["graph_batches"] == {"2": 110} and cp["eager_batches"] == {"8": 25}
    (eager,) = [f for f in d["findings"] if f["code"] == "DS316"]
    assert "running batch 8" in eager["message"] and "running batch 2" not in eager["message"]
    # the run ended with `dynspec stop`: a SIGTERM stop, not a crash
    assert d["stopped"]["signal"] == "SIGTERM" and "DS303" not in codes(d)


def test_graphs_disabled_is_the_users_choice_not_an_eager_fallback():
    rc, d = verify(CG / "tiny-eager.log")
    assert (rc, d["verdict"]) == (0, "live")
    assert "DS317" in codes(d) and "DS316" not in codes(d)
    assert d["compute_path"]["graphs_disabled"] is True
    assert d["compute_path"]["graph_batches"] == {} and d["compute_path"]["eager_batches"] == {"2": 27, "8": 31}


@pytest.mark.parametrize("name, decode_graph, decode_none", [
    ("cg4-c2", 4426, None), ("cg4-c8", 4435, 998), ("eager-c2", None, 1093), ("eager-c8", None, 2354)])
def test_the_recorded_metrics_count_graph_and_eager_decode_passes(name, decode_graph, decode_none):
    """sglang:cuda_graph_passes_total by mode, as the server exported it (read in the files)."""
    modes = {}
    for ln in (CG / f"metrics-{name}.txt").read_text().splitlines():
        if ln.startswith("sglang:cuda_graph_passes_total{"):
            mode = ln.split('mode="', 1)[1].split('"', 1)[0]
            modes[mode] = float(ln.rsplit(" ", 1)[1])
    assert modes.get("decode_cuda_graph") == decode_graph and modes.get("decode_none") == decode_none


def test_graph_decode_is_faster_than_eager_on_the_same_build():
    graphs = json.loads((CG / "throughput-cg4-c2.json").read_text())
    eager = json.loads((CG / "throughput-eager-c2.json").read_text())
    assert graphs["mean_accept_length"] == eager["mean_accept_length"] == 4.0
    assert graphs["tokens_per_s"] > 3 * eager["tokens_per_s"]  # 2279.4 vs 561.2


def test_the_killed_scheduler_is_crashed_as_on_the_gpu():
    rc, d = verify(CRASH / "tiny-crash.log")
    assert (rc, d["verdict"], d["crashed"]) == (4, "crashed", True)
    assert d["crash"]["line"] == 226 and "SIGKILL" in d["crash"]["message"] and "scheduler_0" in d["crash"]["message"]
    assert d["stopped"] is None
    on_gpu = json.loads((CRASH / "verify-crash.json").read_text())
    assert (on_gpu["verdict"], on_gpu["crash"]["line"]) == ("crashed", 226)
