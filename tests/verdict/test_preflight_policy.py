"""Preflight's conclusions from inspector facts (the JSON dynspec_cli/engines/sglang/inspector/ prints),
fast and without wheels: one test per rule that makes a preflight `dead`, so removing the rule (or
its effect in configs/findings.toml) fails here. Expected verdicts are what a reader of the named
sglang release concludes; the comments cite it (../shared/reference/sglang-internals.md)."""
import copy

import pytest

from dynspec_cli.knowledge.features import load_feature
from dynspec_cli.engines.sglang import preflight

PKG = "/opt/venv/lib/python3.11/site-packages/sglang"
V2_FILE = f"{PKG}/srt/speculative/eagle_worker_v2.py"
FLAGS = ["--model-path", "m", "--speculative-algorithm", "EAGLE3", "--speculative-eagle-topk", "1",
         "--speculative-disable-batch-threshold", "5"]
ON = {"SGLANG_ENABLE_SPEC_V2": "True"}


def facts(version="0.5.9", **over):
    base = {"ok": True, "sglang": {"found": True, "version": version, "package_dir": PKG},
            "marker": {"hits": [{"file": V2_FILE, "class": "EAGLEWorkerV2", "function": "__init__", "line": 120}]},
            "files": [], "flags": {"feature_flag": {"defined": True}, "user_flags": []}, "dynamic": None}
    out = copy.deepcopy(base)
    for k, v in over.items():
        out[k] = v
    return out


def judge(f, flags=FLAGS, env=ON, patched=None):
    r = preflight.judge(f, load_feature(None), flags, env, patched=patched)
    return r["verdict"], [x["code"] for x in r["findings"]]


def test_the_seed_fix_is_reachable():
    # 0.5.9, SGLANG_ENABLE_SPEC_V2=True, EAGLE3, topk 1: overlap on, EAGLEWorkerV2 (0.5.9 spec_info dispatch)
    assert judge(facts()) == ("reachable", [])


@pytest.mark.parametrize("case, change, code", [
    ("feature flag not defined: server_args.py unpatched", {"flags": {"feature_flag": {"defined": False}, "user_flags": []}}, "DS101"),
    ("a flag this release does not have", {"flags": {"feature_flag": {"defined": True},
                                                     "user_flags": [{"flag": "--bogus", "accepted": False}]}}, "DS109"),
    ("no file holds the marker", {"marker": {"hits": []}}, "DS204"),
    ("the marker is only in another install", {"marker": {"hits": [], "hits_in_other_installs": [{"file": "/home/u/sglang/x.py"}]}}, "DS208"),
    ("the patched file does not compile", {"files": [{"file": V2_FILE, "syntax_error": {"line": 3, "message": "invalid syntax"}}]}, "DS205"),
    ("sglang not importable", {"sglang": {"found": False}}, "DS210"),
])
def test_facts_that_make_preflight_dead(case, change, code):
    verdict, codes = judge(facts(**change))
    assert verdict == "dead" and code in codes, case


def test_seed_mistake_is_dead():
    # 0.5.9 without the env var: "Overlap scheduler is disabled when spec v2 is off" -> EAGLEWorker runs
    assert judge(facts(), env={})[0] == "dead"
    assert "DS201" in judge(facts(), env={})[1]


def test_no_speculative_algorithm_is_dead():
    flags = ["--model-path", "m", "--speculative-disable-batch-threshold", "5"]
    assert judge(facts(), flags=flags) == ("dead", ["DS102"])


def test_unreachable_threshold_is_dead_with_its_numbers():
    # 0.5.9 resets max_running_requests to 48 for speculative decoding when the flag is not given
    flags = [x if x != "5" else "48" for x in FLAGS]
    r = preflight.judge(facts(), load_feature(None), flags, ON)
    (f,) = [x for x in r["findings"] if x["code"] == "DS103"]
    assert r["verdict"] == "dead"
    assert "--max-running-requests 96" in f["fix"] and "below 48" in f["fix"]


def test_topk_above_one_with_spec_v2_raises_on_0_5_9():
    # 0.5.9 server_args: "Spec v2 currently only supports topk = 1 for speculative decoding." (ValueError)
    flags = [x if x != "1" else "4" for x in FLAGS]
    verdict, codes = judge(facts(), flags=flags)
    assert verdict == "dead" and "DS107" in codes


def test_v1_class_patched_on_a_release_without_it_is_dead():
    # eagle_worker.py (EAGLEWorker) is gone since 0.5.13
    verdict, codes = judge(facts("0.5.23"), env={}, patched=["EAGLEWorker"])
    assert verdict == "dead" and "DS202" in codes


@pytest.mark.parametrize("code, why", [
    ("DS202", "the patched module does not exist in the release: the patch cannot run"),
    ("DS111", "argument resolution raises before any worker exists: the patch cannot run"),
    ("DS210", "the server's python cannot import sglang: no server, no patch"),
])
def test_rules_whose_evidence_always_comes_with_another_dead_rule(code, why):
    """These findings usually arrive together with DS201 (or alone only with releases dynspec does
    not cover yet); each must still make a preflight dead on its own."""
    from dynspec_cli.knowledge.findings import Finding, forced_verdict

    assert forced_verdict([Finding(code, why)], "preflight") == "dead", why


def test_patched_v1_class_on_a_release_without_it_is_dead_from_the_log_alone():
    # --sglang-version 0.5.23: eagle_worker.py (EAGLEWorker) was removed in 0.5.13, so a patch in it
    # cannot run, whatever else the log says (here: nothing about the worker yet)
    from tests.support.logs import codes, judge_text, ts

    v = judge_text(ts("Load weight begin. avail mem=78.50 GB") + "\n", version="0.5.23", patched=["EAGLEWorker"])
    assert v.verdict == "dead" and "DS202" in codes(v) and "DS201" not in codes(v)


def test_a_flag_value_the_parser_refuses_is_dead():
    # 0.5.9 server_args.py: parser.add_argument("--tp-size", type=int, ...): "one" is an invalid int value
    f = facts(flags={"feature_flag": {"defined": True},
                     "user_flags": [{"flag": "--tp-size", "accepted": True, "values": {"type": "int"}}]})
    verdict, codes = judge(f, flags=FLAGS + ["--tp-size", "one"])
    assert verdict == "dead" and "DS110" in codes
