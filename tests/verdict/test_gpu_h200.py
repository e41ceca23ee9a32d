"""Logs of a real sglang 0.5.12.post1 server on an H200 (tests/fixtures/logs/gpu-h200/), judged by the real CLI.

Every expected value below was read off the recorded files by a person (line numbers are `grep -n`'s),
not taken from dynspec's tables: if a table row or a judge disagrees with what the real server printed,
these fail.
"""
import json
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest
from packaging.version import Version

from dynspec_cli.knowledge.features import load_feature
from dynspec_cli.prove.observations import LogReader

GPU = Path(__file__).resolve().parents[1] / "fixtures" / "logs" / "gpu-h200" / "0.5.12.post1"


def verify(name: str) -> tuple[int, dict]:
    p = subprocess.run([sys.executable, "-m", "dynspec_cli", "verify", str(GPU / name), "--json"],
                       capture_output=True, text=True, timeout=60)
    return p.returncode, json.loads(p.stdout)


def line_of(name: str, text: str) -> int:
    for i, line in enumerate((GPU / name).read_bytes().split(b"\n"), 1):  # tqdm's \r is not a line end
        if text.encode() in line:
            return i
    raise AssertionError(f"{text!r} not in {name}")


@pytest.mark.parametrize("name, marker_line", [
    ("live-probe.log", 54), ("live-noprobe.log", 37), ("raw-no-dynspec.log", 40)])
def test_a_patched_v2_launch_is_live(name, marker_line):
    rc, d = verify(name)
    assert (rc, d["verdict"]) == (0, "live")
    assert d["speculative_algorithm"] == "EAGLE3"
    if name == "live-probe.log":  # the probe reports the imported version; a log alone gives a range
        assert d["sglang_version"] == "0.5.12.post1"
    else:
        low, high = (Version(v) for v in d["sglang_version"].split(" – "))
        assert low <= Version("0.5.12.post1") <= high
    assert d["worker"]["class"] == "EAGLEWorkerV2" and d["overlap_schedule"] is True
    assert d["marker"]["line"] == marker_line == line_of(name, "Dynamic speculation disable enabled")
    assert d["marker"]["fields"] == {"threshold": "5"}
    assert d["server_ready"] is True


def test_the_startup_traceback_that_is_not_a_crash():
    """0.5.12.post1 logs 'Can not initialize OpenAIServingResponses, error: Traceback ... No module named
    'openai_harmony'' during startup and serves on (it went on to serve 500+ requests): not a crash."""
    assert line_of("live-probe.log", "Can not initialize OpenAIServingResponses") == 76
    rc, d = verify("live-probe.log")
    assert d["crashed"] is not True and d["crash"] is None
    assert not [f for f in d["findings"] if f["severity"] in ("error", "warning")], d["findings"]


def test_the_entrypoint_usage_text_is_not_a_launch_command():
    """Line 5 is sglang's own usage example after its entrypoint warning
    ("  Example: sglang serve --model-path <model> [options]"); the command is the recorded argv (line 1)."""
    assert line_of("live-probe.log", "  Example: sglang serve --model-path <model> [options]") == 5
    _, d = verify("live-probe.log")
    assert d["requested"]["line"] == 1
    assert d["requested"]["flags"]["speculative_num_draft_tokens"]["requested"] == 4


def test_the_probe_saw_the_patched_worker_on_the_scheduler():
    _, d = verify("live-probe.log")
    ranks = d["probe"]["ranks"]
    assert [(r["role"], r["rank"]["tp"], r["worker"]) for r in ranks] == [("scheduler", 0, "EAGLEWorkerV2")]
    assert d["probe"]["proven"] is True and d["probe"]["errors"] == 0


def test_spec_v2_off_is_dead_before_any_weight_loads():
    name = "dead-spec-v2-false.log"
    assert line_of(name, "Spec v1 is used for eagle/eagle3/standalone speculative decoding because "
                         "SGLANG_ENABLE_SPEC_V2=False.") == 8
    assert "Load weight begin" not in (GPU / name).read_text()
    rc, d = verify(name)
    assert (rc, d["verdict"]) == (1, "dead")
    assert d["worker"]["class"] == "EAGLEWorker" and d["overlap_schedule"] is False
    assert [(f["code"], f["line"]) for f in d["findings"]] == [("DS201", 8)]


def test_decode_batch_lines_show_the_feature_switching_at_the_threshold():
    """prove drove 1, 5, 6 and 10 clients; the crafted draft always agrees with the target, so speculation
    on means accept len 4.00 (--speculative-num-draft-tokens 4) and off means 1.00."""
    sl = LogReader(load_feature("dynamic-spec-disable")).read((GPU / "live-probe.log").read_bytes(), 0)
    by_batch = defaultdict(set)
    for d in sl.decode:
        if d.stable:
            by_batch[d.running].add(d.accept_len)
    assert by_batch[1] == {4.0} and by_batch[5] == {4.0}
    assert by_batch[6] == {1.0} and by_batch[10] == {1.0}


def test_the_recorded_server_info_reads_as_the_server_was():
    from dynspec_cli.inject import loadgen
    info = json.loads((GPU / "server_info.json").read_text())
    assert info["version"] == "0.5.12.post1" and info["skip_tokenizer_init"] is True
    assert info["speculative_algorithm"] == "EAGLE3" and info["speculative_disable_batch_threshold"] == 5
    # right after start-up, before any decode, the scheduler's state has no accept length yet
    # (prove's first step then read "/server_info avg accept len - -> 4.00")
    assert "avg_spec_accept_length" not in info["internal_states"][0]
    metrics = (GPU / "metrics-after-prove.txt").read_text()
    names = {ln.split("{")[0].split(" ")[0] for ln in metrics.splitlines() if ln.startswith("sglang:")}
    assert {"sglang:spec_accept_length", "sglang:num_running_reqs", "sglang:generation_tokens_total"} <= names
    sglang_metrics = {m for m in loadgen.METRICS if m.startswith("sglang:")}  # (the vllm: ones are vLLM's)
    assert sglang_metrics - names == {"sglang:spec_verify_calls_total"}  # 0.5.12.post1 has none
