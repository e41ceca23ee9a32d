"""sglang's own adaptive speculation (configs/features/speculative-adaptive.toml) and method-level
reachability (configs/sglang/modules.toml [[override]]), judged from logs and from preflight facts.

Expected verdicts come from reading the wheels: the fallback line is what
arg_groups/speculative_hook.py _maybe_disable_adaptive logs (0.5.13+), with the reason strings of
speculative/adaptive_spec_params.py adaptive_unsupported_reason; StandaloneWorkerV2.__init__ of
0.5.8 - 0.5.16 builds the worker itself and never calls EAGLEWorkerV2.__init__, that of 0.5.17+
calls BaseSpecWorker.__init__(self) directly (standalone_worker_v2.py line 148 in 0.5.17), and
StandaloneWorker.__init__ (0.5.3 - 0.5.12.post1) calls TpModelWorker.__init__ (line 76 in 0.5.9)."""
import copy

import pytest

from dynspec_cli.knowledge.features import load_feature
from dynspec_cli.engines.sglang import preflight
from tests.support.logs import MARKER, READY, codes, dump, judge_text, ts

ADAPTIVE = "speculative-adaptive"
FALLBACK = ("speculative_adaptive disabled: speculative_eagle_topk=4 (only topk=1 is supported). "
            "Falling back to static speculative params.")


def adaptive_log(*, fallback: bool, marker: bool) -> str:
    lines = [ts(dump(form="dict", model_path="/m", speculative_algorithm="EAGLE3", speculative_eagle_topk=4 if fallback else 1,
                     speculative_adaptive=not fallback, disable_overlap_schedule=False))]
    if fallback:
        lines.insert(0, ts(f"WARNING speculative_hook.py:1381: {FALLBACK}"))
    if marker:
        lines.append(ts("AdaptiveSpeculativeParams initialized: steps=3, candidate_steps=[1, 3, 5, 7]"))
    lines.append(READY)
    return "\n".join(lines) + "\n"


def test_adaptive_fallback_line_makes_it_dead_with_the_reason():
    v = judge_text(adaptive_log(fallback=True, marker=False), feature=ADAPTIVE, version="0.5.23")
    assert v.verdict == "dead" and "DS112" in codes(v)
    f = next(f for f in v.findings if f.code == "DS112")
    assert "speculative_eagle_topk=4 (only topk=1 is supported)" in f.message and f.line == 1


def test_adaptive_marker_is_live():
    v = judge_text(adaptive_log(fallback=False, marker=True), feature=ADAPTIVE, version="0.5.23")
    assert v.verdict == "live", [f.message for f in v.findings]
    assert v.marker["fields"] == {"steps": "3", "candidate_steps": "1, 3, 5, 7"}


def test_the_seed_feature_ignores_the_adaptive_line():
    v = judge_text(ts(FALLBACK) + "\n", version="0.5.23")
    assert "DS112" not in codes(v)


# --- preflight predicts the fallback from the release's own rules ---------------------------
PKG = "/opt/venv/lib/python3.11/site-packages/sglang"


def facts(version):
    return copy.deepcopy({"ok": True, "sglang": {"found": True, "version": version, "package_dir": PKG},
                          "marker": {"hits": []}, "files": [],
                          "flags": {"feature_flag": {"defined": True}, "user_flags": []}, "dynamic": None})


def pre(version, *flags, feature=ADAPTIVE, env=None, f=None):
    r = preflight.judge(f or facts(version), load_feature(feature), ["--model-path", "m", *flags], env or {})
    return r["verdict"], {x["code"]: x["message"] for x in r["findings"]}


BASE = ["--speculative-algorithm", "EAGLE3", "--speculative-eagle-topk", "1", "--speculative-adaptive"]


@pytest.mark.parametrize("version, extra, reason", [
    # every release with the flag: only EAGLE/EAGLE3
    ("0.5.11", ["--speculative-algorithm", "NGRAM"], "speculative_algorithm=NGRAM (only EAGLE/EAGLE3 are supported)"),
    ("0.5.23", ["--speculative-algorithm", "STANDALONE"], "speculative_algorithm=STANDALONE (only EAGLE/EAGLE3 are supported)"),
    ("0.5.16", ["--speculative-eagle-topk", "4"], "speculative_eagle_topk=4 (only topk=1 is supported)"),
    ("0.5.12", ["--enable-dp-attention"], "enable_dp_attention=True is not supported"),
    # 0.5.22 rewords it and also counts --attn-dp-size (attn_dp_enabled_of: attn_dp_size > 1)
    ("0.5.22", ["--attn-dp-size", "2"], "attention DP is not supported"),
    ("0.5.12.post1", ["--enable-multi-layer-eagle"], "(MultiLayerEagleWorker does not implement adaptive)"),
    ("0.5.13", ["--enable-multi-layer-eagle"], "(MultiLayerEagleWorkerV2 does not implement adaptive)"),
    ("0.5.20", ["--enable-two-batch-overlap"], "enable_two_batch_overlap=True is not supported"),
    ("0.5.18", ["--enable-pdmux"], "enable_pdmux=True is not supported"),
    # 0.5.11 only: adaptive lives in the V1 EAGLEWorker, and 0.5.11 runs V2 (overlap on) by default
    ("0.5.11", [], "the overlap scheduler (spec v2) is enabled"),
])
def test_preflight_predicts_the_fallback(version, extra, reason):
    verdict, found = pre(version, *BASE, *extra)
    assert verdict == "dead" and "DS112" in found and reason in found["DS112"], found


@pytest.mark.parametrize("version, extra", [
    ("0.5.11", ["--disable-overlap-schedule"]),  # the V1 worker: supported there
    ("0.5.12", []),  # 0.5.12 dropped the overlap rule
    ("0.5.23", []),
    ("0.5.21", ["--enable-dp-attention"]),  # not requested: no prediction
])
def test_preflight_no_fallback(version, extra):
    flags = [*BASE, *extra]
    if version == "0.5.21":
        flags.remove("--speculative-adaptive")
    assert "DS112" not in pre(version, *flags)[1]


def test_preflight_unset_topk_is_unknown_before_0_5_14_and_fine_after():
    flags = ["--speculative-algorithm", "EAGLE", "--speculative-adaptive", "--enable-pdmux"]
    # 0.5.13: `speculative_eagle_topk != 1` is checked before pdmux on a value resolution chose:
    # dead either way, but the logged reason may be the topk one
    msg = pre("0.5.13", *flags)[1]["DS112"]
    assert "enable_pdmux" in msg and "speculative_eagle_topk first" in msg
    # 0.5.14: `is not None and != 1`, so an unset topk passes and pdmux is the reason
    msg = pre("0.5.14", *flags)[1]["DS112"]
    assert "enable_pdmux" in msg and "first" not in msg
    # unset topk alone decides nothing on 0.5.13
    assert "DS112" not in pre("0.5.13", "--speculative-algorithm", "EAGLE", "--speculative-adaptive")[1]


def test_preflight_0_5_23_platform_check_does_not_hide_a_later_reason():
    msg = pre("0.5.23", *BASE, "--enable-two-batch-overlap")[1]["DS112"]
    assert "enable_two_batch_overlap=True is not supported" in msg and "platform_worker_cls first" in msg


# --- method-level reachability ----------------------------------------------------------------
def test_standalone_v2_never_runs_the_eagle_v2_init_from_a_log():
    log = ts(dump(model_path="/m", speculative_algorithm="STANDALONE", speculative_eagle_topk=1,
                  disable_overlap_schedule=False, enable_multi_layer_eagle=False)) + "\n" + READY + "\n"
    v = judge_text(log, version="0.5.16")
    assert v.worker["class"] == "StandaloneWorkerV2"
    assert v.verdict == "dead" and "DS211" in codes(v) and "DS201" not in codes(v)
    msg = next(f.message for f in v.findings if f.code == "DS211")
    assert "StandaloneWorkerV2.__init__ does not call EAGLEWorkerV2.__init__" in msg


def test_eagle3_on_the_same_release_is_not_blocked():
    log = ts(dump(model_path="/m", speculative_algorithm="EAGLE3", speculative_eagle_topk=1,
                  disable_overlap_schedule=False, enable_multi_layer_eagle=False)) + "\n" + ts(MARKER) + "\n" + READY + "\n"
    v = judge_text(log, version="0.5.16")
    assert v.verdict == "live" and "DS211" not in codes(v)


def test_preflight_standalone_v2_patch_in_eagle_v2_init_is_dead():
    f = facts("0.5.20")
    f["marker"]["hits"] = [{"file": f"{PKG}/srt/speculative/eagle_worker_v2.py", "class": "EAGLEWorkerV2",
                            "function": "__init__", "line": 120}]
    flags = ["--speculative-algorithm", "STANDALONE", "--speculative-eagle-topk", "1",
             "--speculative-disable-batch-threshold", "5", "--max-running-requests", "64"]
    verdict, found = pre("0.5.20", *flags, feature=None, f=f)
    assert verdict == "dead" and "DS211" in found and "BaseSpecWorker.__init__" not in found["DS211"]
    assert "StandaloneWorkerV2.__init__ does not call EAGLEWorkerV2.__init__" in found["DS211"]
    # the same patch in a method StandaloneWorkerV2 inherits untouched runs
    f["marker"]["hits"][0]["function"] = "forward_batch_generation"
    verdict, found = pre("0.5.20", *flags, feature=None, f=f)
    assert verdict == "reachable" and "DS211" not in found, found


def test_tiers_table_shows_where_speculation_stops():
    from dynspec_cli.engines.sglang.knowledge import knowledge
    from dynspec_cli.engines.sglang import tiers

    f, k = load_feature(ADAPTIVE), knowledge()
    # 0.5.20 adaptive_spec_params.py DEFAULT_ADAPTIVE_CONFIG: "1": [1, 3, 5, 7], "8": [0, 1, 3],
    # "32": [0, 1], "64": [0]
    assert tiers.tiers_of(k, f, "0.5.20") == {1: [1, 3, 5, 7], 8: [0, 1, 3], 32: [0, 1], 64: [0]}
    text = tiers.render(k, f, "0.5.20")
    assert [ln.split()[-1] for ln in text.splitlines()[2:]] == ["always", "sometimes", "sometimes", "never"]
    assert tiers.tiers_of(k, f, "0.5.10") is None


def test_preflight_adaptive_marker_in_its_helper_class_is_reached_through_the_worker():
    # the marker sits in AdaptiveSpeculativeParams.__init__, which EAGLEWorkerV2.__init__ builds
    # (0.5.16 eagle_worker_v2.py:1060): reachable, and dead only by sglang's own fallback
    f = facts("0.5.16")
    f["marker"]["hits"] = [{"file": f"{PKG}/srt/speculative/adaptive_spec_params.py", "class": "AdaptiveSpeculativeParams",
                            "function": "__init__", "line": 287}]
    assert pre("0.5.16", *BASE, f=copy.deepcopy(f)) == ("reachable", {})
    verdict, found = pre("0.5.16", *BASE, "--speculative-eagle-topk", "4", f=f)
    assert verdict == "dead" and set(found) == {"DS112"}


def test_adaptive_fallback_is_dead_at_its_line_before_the_server_is_ready():
    # what verify --follow sees first: the fallback warning and server_args, no ready line yet
    first = "\n".join(adaptive_log(fallback=True, marker=False).splitlines()[:2]) + "\n"
    v = judge_text(first, feature=ADAPTIVE, version="0.5.23")
    assert v.verdict == "dead" and "DS112" in codes(v)


def test_standalone_v2_is_dead_from_server_args_alone():
    log = ts(dump(model_path="/m", speculative_algorithm="STANDALONE", speculative_eagle_topk=1,
                  disable_overlap_schedule=False, enable_multi_layer_eagle=False)) + "\n"
    v = judge_text(log, version="0.5.16")
    assert v.verdict == "dead" and "DS211" in codes(v)
