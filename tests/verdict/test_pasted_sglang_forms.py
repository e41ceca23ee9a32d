"""sglang logs as people paste them (issue 19 d), built from the real excerpts in
tests/fixtures/logs/issues/ (numbers below); the expected values are the hand labels of those
excerpts, or what the changed line says (a cut frame still names its file)."""
import json
from pathlib import Path

from tests.support.logs import judge_text

HERE = Path(__file__).resolve().parent.parent / "fixtures" / "logs" / "issues"


def _fixture(prefix: str) -> tuple[list[str], dict]:
    log = next(HERE.glob(f"{prefix}-*.log"))
    return log.read_text().splitlines(), json.loads(log.with_suffix(".json").read_text())["expected"]


def _claims(text: str) -> dict:
    doc = judge_text(text).to_json()
    return {k: c["value"] for k, c in doc["claims"].items()} | {"_of": doc["launch"]["of"], "_verdict": doc["verdict"]}


def test_command_pasted_after_the_traceback_is_the_same_launch():
    """78 (sglang #5448): the poster's command, the sigquit line and the crash; pasted the other way
    round ("the crash, and my command was ...") it is the same one launch with the same claims."""
    lines, exp = _fixture("78")
    command, crash = lines[0], lines[1:]
    want = _claims("\n".join(lines))
    got = _claims("\n".join(crash + ["", "my command was:", command]) + "\n")
    assert got["_of"] == 1 and got == want
    assert (got["crashed"], got["server_ready"], got["speculative_algorithm"]) == (exp["crashed"], exp["server_ready"], "EAGLE3")


def test_a_command_before_new_start_up_lines_is_the_new_launchs():
    lines, _ = _fixture("78")
    fresh = "[2025-04-16 14:30:02] server_args=ServerArgs(model_path='/Meta-Llama-3.1-8B-Instruct_', tp_size=4, speculative_algorithm=None)"
    doc = judge_text("\n".join(lines[1:] + [lines[0], fresh]) + "\n").to_json()
    assert doc["launch"]["of"] == 2 and doc["requested"]["line"] == len(lines)  # the command moved to launch 2
    assert doc["speculative"] is False  # and its dump says speculation is off


def test_served_request_then_device_assert_is_a_crash():
    """32's served request, then 75's device-side assert lines (no traceback): not crashed: false."""
    served, _ = _fixture("32")
    asserts, _ = _fixture("75")
    c = _claims("\n".join(served[:1] + asserts[:2]) + "\n")
    assert c["crashed"] is True and c["_verdict"] == "crashed"


def test_a_frame_cut_mid_way_still_names_its_file():
    """69's worker frame cut after its file name (as terminals and search tools cut lines)."""
    lines, exp = _fixture("69")
    frame = next(i for i, x in enumerate(lines) if "eagle_worker_v2.py" in x)
    cut = lines[frame][:lines[frame].index('.py"') + len('.py", lin')]
    c = _claims("\n".join(lines[:frame] + [cut]) + "\n")
    assert c["worker"] == exp["worker_class"] == "EAGLEWorkerV2" and c["crashed"] is True
    c = _claims("\n".join(lines[:frame] + [lines[frame][:lines[frame].index('.py"') + 4]]) + "\n")
    assert c["worker"] == "EAGLEWorkerV2"


def test_speculative_modules_that_are_not_workers_name_the_family():
    """58: a frame in eagle_draft_extend_cuda_graph_runner.py: a draft-model worker ran (not NGRAM);
    the same traceback through ngram_info.py (an sglang 0.5.9 method) names NGRAMWorker and NGRAM."""
    lines, exp = _fixture("58")
    doc = judge_text("\n".join(lines) + "\n").to_json()
    assert doc["claims"]["worker"]["value"] is None and exp["worker_class"] is None
    assert "EAGLEWorker" in doc["worker"]["candidates"] and "NGRAMWorker" not in doc["worker"]["candidates"]
    assert doc["claims"]["speculative"]["value"] is True
    ngram = [lines[0], '  File "/sgl-workspace/sglang/python/sglang/srt/speculative/ngram_info.py", line 77, in prepare_for_verify',
             "    self._fill_requests(batch)"]
    c = _claims("\n".join(ngram) + "\n")
    assert (c["worker"], c["speculative_algorithm"], c["speculative"]) == ("NGRAMWorker", "NGRAM", True)


def test_decode_batches_with_accept_len_prove_speculation_on():
    """08, 09, 11, 12: 'Decode batch' lines with 'accept len' and no algorithm named; 12 in a custom
    logging format ('2026-03-18 ... INFO 120984 [ TP0 file.py:415] Decode batch, ...')."""
    for prefix in ("08", "09", "11", "12"):
        lines, exp = _fixture(prefix)
        doc = judge_text("\n".join(lines) + "\n").to_json()
        c = doc["claims"]["speculative"]
        assert c["value"] is True and "accept len" in c["basis"] and "accept len" in c["text"], prefix
        assert doc["launch"]["last_decode"]["accept_len"], prefix
    lines, _ = _fixture("12")
    doc = judge_text("\n".join(lines) + "\n").to_json()
    assert doc["claims"]["speculative"]["line"] == 1 and doc["launch"]["decode_lines"] == 1


def test_flags_without_the_command_head():
    lines, exp = _fixture("73")
    doc = judge_text("\n".join(lines) + "\n").to_json()
    assert {k: v["requested"] for k, v in doc["requested"]["flags"].items()} == exp["requested"]
    assert doc["speculative_algorithm"] == "EAGLE" and doc["requested"]["line"] == 1
