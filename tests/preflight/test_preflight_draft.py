"""preflight reads the draft's config.json (issue 20 item 3): `--speculative-algorithm EAGLE` with an
EAGLE3 draft (sglang PR #21272: silently degrades, accept_len 1.00) is DS113 before launch, on a real
published sglang 0.5.9 patched in the test. The configs are what the drafts' repositories ship
(architectures of yuhuili/EAGLE3-LLaMA3.1-Instruct-8B and yuhuili/EAGLE-LLaMA3-Instruct-8B)."""
import json

import pytest

from tests.preflight.test_preflight_real_wheels import preflight

pytestmark = pytest.mark.wheels

EAGLE3 = {"architectures": ["LlamaForCausalLMEagle3"], "model_type": "llama", "hidden_size": 4096, "draft_vocab_size": 32000}
EAGLE1 = {"architectures": ["LlamaForCausalLMEagle"], "model_type": "llama", "hidden_size": 4096}


def draft(tmp_path, name, cfg):
    d = tmp_path / name
    d.mkdir()
    (d / "config.json").write_text(json.dumps(cfg))
    return d


def flags(algorithm, path):
    return ["--model-path", "/m", "--speculative-algorithm", algorithm, "--speculative-draft-model-path", str(path),
            "--speculative-num-steps", "3", "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4",
            "--speculative-disable-batch-threshold", "5"]


@pytest.mark.parametrize("algorithm", ["EAGLE", "NEXTN"])  # NEXTN runs as EAGLE
def test_eagle_with_an_eagle3_draft_is_ineffective(sglang_python, tmp_path, algorithm):
    py, _, _ = sglang_python("0.5.9")
    d = draft(tmp_path, "eagle3-draft", EAGLE3)
    r = preflight(py, *flags(algorithm, d), env=["SGLANG_ENABLE_SPEC_V2=True"])
    assert r["verdict"] == "ineffective" and r["exit_code"] == 5, r["findings"]
    assert r["worker"]["class"] == "EAGLEWorkerV2"  # the patch itself is reachable
    (f,) = [f for f in r["findings"] if f["code"] == "DS113"]
    assert "LlamaForCausalLMEagle3" in f["message"] and str(d / "config.json") in f["message"]
    assert f["fix"].startswith("Pass `--speculative-algorithm EAGLE3`")


@pytest.mark.parametrize("algorithm, cfg", [("EAGLE3", EAGLE3), ("EAGLE", EAGLE1)])
def test_matching_pairs_stay_reachable(sglang_python, tmp_path, algorithm, cfg):
    py, _, _ = sglang_python("0.5.9")
    r = preflight(py, *flags(algorithm, draft(tmp_path, "d", cfg)), env=["SGLANG_ENABLE_SPEC_V2=True"])
    assert r["verdict"] == "reachable" and "DS113" not in r["codes"]


def test_a_hub_id_is_not_fetched_and_not_judged(sglang_python):
    py, _, _ = sglang_python("0.5.9")
    r = preflight(py, *flags("EAGLE", "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B"), env=["SGLANG_ENABLE_SPEC_V2=True"])
    assert r["verdict"] == "reachable" and "DS113" not in r["codes"]


def test_relaxed_acceptance_thresholds_are_reported_before_launch(sglang_python, tmp_path):
    py, _, _ = sglang_python("0.5.9")
    d = draft(tmp_path, "d", EAGLE3)
    r = preflight(py, *flags("EAGLE3", d), "--speculative-accept-threshold-single", "0.6",
                  env=["SGLANG_ENABLE_SPEC_V2=True"])
    assert r["verdict"] == "reachable"  # the patch runs; its acceptance will not be the draft's
    (f,) = [f for f in r["findings"] if f["code"] == "DS114"]
    assert f["severity"] == "warning" and f["message"].startswith("acceptance will be lossy: "
                                                                  "--speculative-accept-threshold-single 0.6")
