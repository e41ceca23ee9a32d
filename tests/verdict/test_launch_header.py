"""The DYNSPEC-LAUNCH line dynspec writes before starting a server holds the command it started:
what was asked for, used until sglang's own server_args dump says what it resolved."""
import json

from tests.support.logs import codes, judge_text

SEED_ARGV = ["python3", "-m", "sglang.launch_server", "--model-path", "/models/k2", "--speculative-algorithm",
             "EAGLE3", "--speculative-eagle-topk", "1", "--speculative-disable-batch-threshold", "5"]
# 0.5.9's bare warning (no timestamp: logging is not configured yet), SGLANG_ENABLE_SPEC_V2 unset
OVERLAP_OFF = ("Overlap scheduler is disabled when spec v2 is off or using unsupported speculative algorithm. "
               "You can set env SGLANG_ENABLE_SPEC_V2=True to enable the experimental overlap scheduler. ")


def header(argv):
    return "DYNSPEC-LAUNCH " + json.dumps({"name": "seed", "argv": argv, "env": {}, "started_at": 1.0,
                                           "feature": "dynamic-spec-disable"})


def test_launch_argv_names_the_algorithm_and_settles_the_worker():
    v = judge_text(header(SEED_ARGV) + "\n" + OVERLAP_OFF + "\n")
    assert v.speculative_algorithm == "EAGLE3"
    assert v.worker["class"] == "EAGLEWorker"  # overlap off on 0.5.7 - 0.5.10.post1: the V1 worker
    assert v.verdict == "dead" and "DS201" in codes(v)
    assert "DS203" not in codes(v)  # the argv says multi-layer EAGLE is off: the worker is determined


def test_the_dump_wins_over_the_argv():
    argv = [a if a != "EAGLE3" else "EAGLE" for a in SEED_ARGV]
    dump = "[2026-02-27 19:49:17] server_args=ServerArgs(speculative_algorithm='EAGLE3', disable_overlap_schedule=True)"
    v = judge_text(header(argv) + "\n" + OVERLAP_OFF + "\n" + dump + "\n")
    assert v.speculative_algorithm == "EAGLE3"
