"""Edge cases built from the exact strings in sglang's source (configs/sglang/warnings.toml)."""
import pytest

from tests.support.logs import MARKER, READY, codes, dump, judge_text, ts, warning_text

MRR = warning_text("max-running-requests-reset")


def v2_launch_059(marker=True, ready=True, threshold=5, max_running=48, tp=1):
    lines = [MRR, warning_text("spec-v2-on"),
             ts(dump(model_path="/m", tp_size=tp, speculative_algorithm="EAGLE3", speculative_eagle_topk=1,
                     max_running_requests=max_running, disable_overlap_schedule=False,
                     speculative_disable_batch_threshold=threshold)),
             ts("Load weight begin. avail mem=70.00 GB", "TP0" if tp > 1 else "")]
    if marker:
        lines += [ts(MARKER.replace("=5", f"={threshold}"), f"TP{r}" if tp > 1 else "") for r in range(tp)]
    if ready:
        lines.append(READY)
    return "\n".join(lines) + "\n"


def test_v2_on_with_marker_is_live():
    v = judge_text(v2_launch_059())
    assert v.verdict == "live" and v.exit_code == 0
    assert v.worker["class"] == "EAGLEWorkerV2" and v.speculative_algorithm == "EAGLE3"
    assert v.marker["found"] and v.marker["fields"] == {"threshold": "5"}


def test_ready_without_marker_is_dead():
    v = judge_text(v2_launch_059(marker=False))
    assert v.verdict == "dead" and "DS301" in codes(v)


def test_no_marker_not_ready_is_inconclusive_and_says_what_is_missing():
    v = judge_text(v2_launch_059(marker=False, ready=False))
    assert v.verdict == "inconclusive" and v.exit_code == 3
    assert any("marker" in m for m in v.missing)


def test_threshold_at_or_above_max_running_requests_is_dead():
    v = judge_text(v2_launch_059(threshold=48))
    assert v.verdict == "dead" and "DS103" in codes(v)
    (f,) = [f for f in v.findings if f.code == "DS103"]
    assert "--max-running-requests" in f.fix
    assert judge_text(v2_launch_059(threshold=47)).verdict == "live"


def test_threshold_unreachable_from_the_reset_warning_alone():
    text = MRR + "\n" + warning_text("spec-v2-on") + "\n" + ts(MARKER.replace("=5", "=64")) + "\n"
    v = judge_text(text)
    assert v.verdict == "dead" and "DS103" in codes(v)


def test_appended_launches_judge_the_last_one():
    first = v2_launch_059(marker=True)
    second = warning_text("overlap-off-spec-v2-off") + "\n" + ts(dump(model_path="/m", speculative_algorithm="EAGLE3")) + "\n"
    v = judge_text(first + second)
    assert v.launch["index"] == 2 and v.launch["of"] == 2
    assert v.verdict == "dead" and "DS201" in codes(v) and "DS305" in codes(v)
    assert not v.marker["found"]


def test_feature_flag_rejected_is_dead():
    text = ("usage: launch_server.py [-h] --model-path MODEL_PATH\n"
            "launch_server.py: error: unrecognized arguments: --speculative-disable-batch-threshold 5\n")
    v = judge_text(text)
    assert v.verdict == "dead" and "DS101" in codes(v)
    assert v.crashed  # the crash is still reported
    assert v.crash["exception"] == "SystemExit"


def test_spec_v2_topk_error_is_a_crash_with_its_exception():
    text = "\n".join([
        MRR, warning_text("spec-v2-on"),
        "Traceback (most recent call last):",
        '  File "/x/sglang/srt/server_args.py", line 2381, in _handle_speculative_decoding',
        "    raise ValueError(",
        "ValueError: Spec v2 currently only supports topk = 1 for speculative decoding.",
    ]) + "\n"
    v = judge_text(text)
    assert v.verdict == "crashed" and v.exit_code == 4
    assert v.crash["exception"] == "ValueError" and v.crash["line"] == 6
    assert "DS107" in codes(v)


def test_dead_outranks_crashed():
    text = warning_text("overlap-off-spec-v2-off") + "\nTraceback (most recent call last):\n  File \"x\", line 1\nRuntimeError: boom\n"
    v = judge_text(text)
    assert v.verdict == "dead" and v.crashed and v.crash["exception"] == "RuntimeError"


def test_traceback_followed_by_progress_is_not_a_crash():
    text = "Traceback (most recent call last):\n  File \"x\", line 1\nImportError: optional thing\n" + v2_launch_059()
    v = judge_text(text)
    assert v.verdict == "live" and not v.crashed


def test_speculation_off_in_dump_is_dead():
    v = judge_text(ts(dump(model_path="/m", speculative_algorithm=None, disable_overlap_schedule=False)) + "\n")
    assert v.verdict == "dead" and "DS102" in codes(v)


def test_decode_lines_without_accept_len_mean_no_speculation():
    lines = [ts("Decode batch, #running-req: 3, #token: 100, token usage: 0.01, cuda graph: True, gen throughput (token/s): 50.00, #queue-req: 0", "TP0")] * 3
    v = judge_text("\n".join(lines) + "\n")
    assert v.verdict == "dead" and "DS102" in codes(v)


def test_v1_patch_is_absent_on_0523_dict_dump():
    text = ts(dump("dict", model_path="/m", speculative_algorithm="EAGLE3", disable_overlap_schedule=False)) + "\n"
    v = judge_text(text, patched=["EAGLEWorker"], version="0.5.23")
    assert v.verdict == "dead" and "DS202" in codes(v)


def test_0523_env_var_set_is_noted_as_ignored_on_0516():
    text = warning_text("spec-v2-env-removed") + " Use --disable-overlap-schedule to select the non-overlap (synchronous) path.\n"
    v = judge_text(text)
    assert "DS104" in codes(v)
    assert v.engine_version == "0.5.14 – 0.5.20"


def test_topk_fallback_to_v1_on_0512():
    text = warning_text("spec-v1-used", "spec v2 currently only supports topk = 1") + "\n"
    v = judge_text(text)
    assert v.verdict == "dead" and {"DS106", "DS201"} <= set(codes(v))
    assert v.worker["class"] == "EAGLEWorker"


def test_nextn_is_rewritten_to_eagle():
    text = warning_text("spec-v2-on") + "\n" + ts(dump(model_path="/m", speculative_algorithm="NEXTN", disable_overlap_schedule=False)) + "\n"
    v = judge_text(text)
    assert v.speculative_algorithm == "EAGLE" and v.worker["class"] == "EAGLEWorkerV2"


def test_marker_on_some_tp_ranks_only_is_flagged_once_ready():
    text = v2_launch_059(tp=4).replace(ts(MARKER, "TP3") + "\n", "")
    v = judge_text(text)
    assert v.verdict == "live" and "DS306" in codes(v)


def test_pinned_unknown_version_withholds_conclusions():
    v = judge_text(warning_text("overlap-off-spec-v2-off") + "\n", version="0.9.1")
    assert "DS307" in codes(v) and v.verdict != "dead"


def test_pinned_version_contradicting_the_log():
    v = judge_text(warning_text("overlap-off-spec-v2-off") + "\n", version="0.5.23")
    assert "DS308" in codes(v)


@pytest.mark.parametrize("wid, version, worker", [
    ("overlap-off-eagle", "0.5.3", "EAGLEWorker"),
    ("overlap-off-eagle3-or-standalone", "0.5.4.post1", "EAGLEWorker"),
    ("spec-v2-default", "0.5.11", "EAGLEWorkerV2"),
    ("non-overlap-spec-v2", "0.5.13", "EAGLEWorkerV2"),
    ("overlap-spec-v2-default", "0.5.13", "EAGLEWorkerV2"),
])
def test_each_release_family_names_its_worker(wid, version, worker):
    text = warning_text(wid) + "\n" + ts(dump(model_path="/m", speculative_algorithm="EAGLE3")) + "\n"
    v = judge_text(text)
    assert v.worker["class"] == worker
    assert version in (v.engine_version or "")
