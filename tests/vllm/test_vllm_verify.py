"""`dynspec verify` on vLLM logs. Each message below is copied by hand from the published wheel's
source (the file and line are named), never produced from dynspec's tables; the prefix is vLLM's
default logging format (vllm/logger.py: `%(levelname)s %(asctime)s [%(fileinfo)s:%(lineno)d] %(message)s`,
date format `%m-%d %H:%M:%S`)."""
import json
import subprocess
import sys

import pytest

from dynspec_cli import engines
from dynspec_cli.verdict.pipeline import Pipeline
from dynspec_cli.knowledge.features import load_feature

FEATURE = load_feature("vllm-eagle-speculator-example")

# vllm 0.33.0 vllm/v1/engine/core.py:140, with a config repr as vLLM prints it
CONFIG_033 = ("(EngineCore_DP0 pid=4242) INFO 12-03 09:00:01 [core.py:140] Initializing a V1 LLM engine (v0.33.0) with config: "
              "model='meta-llama/Llama-3.1-8B-Instruct', speculative_config=SpeculativeConfig(method='eagle3', "
              "model='yuhuili/EAGLE3-LLaMA3.1-Instruct-8B', num_spec_tokens=3), tokenizer='meta-llama/Llama-3.1-8B-Instruct', "
              "tensor_parallel_size=1, pipeline_parallel_size=1, data_parallel_size={dp}, disable_custom_all_reduce=False")
# vllm 0.33.0 vllm/config/vllm.py:758-762 (logger.warning_once, "%s" joined unsupported features)
FALLBACK_033 = ("(EngineCore_DP0 pid=4242) WARNING 12-03 09:00:01 [vllm.py:759] Model Runner V2 does not yet support "
                "parallel drafting for EAGLE speculative decoding; using the V1 model runner instead.")
# vllm 0.33.0 vllm/config/vllm.py:751-753
TRITON_033 = ("(EngineCore_DP0 pid=4242) WARNING 12-03 09:00:01 [vllm.py:751] Model Runner V2 requires Triton; "
              "using the V1 model runner instead.")
# vllm 0.33.0 vllm/v1/worker/gpu/spec_decode/eagle/eagle3_utils.py:39
AUX_033 = "(Worker pid=4300) INFO 12-03 09:00:30 [eagle3_utils.py:39] Using Eagle3 auxiliary layers from model: [2, 16, 29]"
# vllm 0.33.0 vllm/config/vllm.py:1119-1126 (%d = num_speculative_tokens)
DP_OFF_033 = ("(EngineCore_DP0 pid=4242) WARNING 12-03 09:00:01 [vllm.py:1119] Dynamic speculative decoding is not supported "
              "with data parallelism because data-parallel ranks can select different speculative-token counts, causing DP "
              "divergence and deadlocks. Disabling num_speculative_tokens_per_batch_size and falling back to static "
              "num_speculative_tokens=3.")
# vllm 0.33.0 vllm/v1/spec_decode/metrics.py:120-128
METRICS = ("(APIServer pid=4000) INFO 12-03 09:01:00 [metrics.py:120] SpecDecoding metrics: Mean acceptance length: 2.61, "
           "Accepted throughput: 41.20 tokens/s, Drafted throughput: 76.80 tokens/s, Accepted: 412 tokens, Drafted: 768 tokens, "
           "Per-position acceptance rate: 0.740, 0.520, 0.350, Avg Draft acceptance rate: 53.6%")
STATS = ("(APIServer pid=4000) INFO 12-03 09:01:00 [loggers.py:273] Engine 000: Avg prompt throughput: 12.0 tokens/s, "
         "Avg generation throughput: 80.0 tokens/s, Running: 1 reqs, Waiting: 0 reqs, GPU KV cache usage: 1.0%, Prefix cache hit rate: 0.0%")
READY = "(APIServer pid=4000) INFO:     Application startup complete."
MARKER = "(Worker pid=4300) INFO 12-03 09:00:31 [speculator.py:20] EagleSpeculator patch active: num_speculative_tokens=3"


def judge(*lines, version=None):
    p = Pipeline(FEATURE, None, version, engine=engines.get("vllm"))
    p.feed(("\n".join(lines) + "\n").encode())
    return p.final().to_json()


def codes(v):
    return {x["code"] for x in v["findings"]}


def test_fallback_line_makes_a_v2_speculator_patch_dead_on_033():
    v = judge(CONFIG_033.format(dp=1), FALLBACK_033)
    assert v["verdict"] == "dead" and v["exit_code"] == 1
    assert v["model_runner"] == "v1" and v["engine_version"] == "0.33.0"
    assert v["worker"]["class"] == "EagleProposer" and v["worker"]["module"] == "vllm/v1/spec_decode/eagle.py"
    ds601 = next(x for x in v["findings"] if x["code"] == "DS601")
    assert ds601["line"] == 2 and "parallel drafting" in ds601["fix"]


def test_v2_path_is_live_with_the_marker_and_not_dead_without():
    v = judge(CONFIG_033.format(dp=1), AUX_033)
    assert v["verdict"] == "inconclusive" and v["model_runner"] == "v2"
    assert v["worker"]["class"] == "EagleSpeculator"
    v = judge(CONFIG_033.format(dp=1), AUX_033, MARKER, READY, STATS, METRICS)
    assert v["verdict"] == "live" and v["exit_code"] == 0
    assert v["launch"]["last_decode"] == {"accept_len": "2.61"}


def test_ready_without_marker_is_dead():
    v = judge(CONFIG_033.format(dp=1), AUX_033, READY, STATS, METRICS)
    assert v["verdict"] == "dead" and "DS301" in codes(v)


def test_triton_fallback():
    v = judge(CONFIG_033.format(dp=1), TRITON_033)
    assert v["verdict"] == "dead" and {"DS601", "DS607"} <= codes(v)


def test_dynamic_speculation_switched_off_by_dp():
    v = judge(CONFIG_033.format(dp=2), DP_OFF_033, AUX_033, MARKER)
    assert "DS604" in codes(v) and v["verdict"] == "live"


def test_speculation_off():
    v = judge("(EngineCore_DP0 pid=1) INFO 12-03 09:00:01 [core.py:140] Initializing a V1 LLM engine (v0.33.0) with config: "
              "model='m', speculative_config=None, tokenizer='m', data_parallel_size=1")
    assert v["verdict"] == "dead" and "DS602" in codes(v)


def test_speculation_not_observed():
    v = judge(CONFIG_033.format(dp=1), AUX_033, MARKER, READY, STATS, STATS)
    assert "DS605" in codes(v)


# vllm 0.16.0 vllm/entrypoints/utils.py logs the non-default args dict; disable_by_batch_size is declared
# in vllm/config/speculative.py:102 (Field(default=None, ge=2)) and read nowhere else in the wheel.
ARGS_016 = ("(APIServer pid=7) INFO 12-03 09:00:00 [utils.py:253] non-default args: {'model': 'meta-llama/Llama-3.1-8B-Instruct', "
            "'speculative_config': {'method': 'eagle3', 'model': 'yuhuili/EAGLE3-LLaMA3.1-Instruct-8B', "
            "'num_speculative_tokens': 3, 'disable_by_batch_size': 8}}")


@pytest.mark.parametrize("version,dead", [("0.10.1", True), ("0.14.1", True), ("0.16.0", True), ("0.10.0", False)])
def test_disable_by_batch_size_is_dead_on_010_to_016(version, dead):
    cfg = CONFIG_033.replace("v0.33.0", f"v{version}").format(dp=1)
    v = judge(ARGS_016, cfg)
    ds603 = [x for x in v["findings"] if x["code"] == "DS603"]
    assert bool(ds603) == dead
    if dead:
        assert v["verdict"] == "dead" and "disable_by_batch_size" in ds603[0]["message"]


def test_env_opt_in_release_with_v1_runner_frames():
    # 0.20.0 runs V1 unless VLLM_USE_V2_MODEL_RUNNER=1: a V1 proposer frame decides
    cfg = CONFIG_033.replace("v0.33.0", "v0.20.0").format(dp=1)
    frame = ('(EngineCore_DP0 pid=4242) ERROR 12-03 09:00:40 [core.py:900]   File "/usr/lib/python3/site-packages/vllm/v1/spec_decode/'
             'llm_base_proposer.py", line 512, in propose')
    v = judge(cfg, frame)
    assert v["verdict"] == "dead" and v["model_runner"] == "v1"
    assert "VLLM_USE_V2_MODEL_RUNNER=1" in next(x for x in v["findings"] if x["code"] == "DS601")["fix"]


def test_cli_engine_option_and_auto(tmp_path):
    log = tmp_path / "server.log"
    log.write_text(CONFIG_033.format(dp=1) + "\n" + FALLBACK_033 + "\n")
    for extra in ([], ["--engine", "vllm"], ["--engine", "auto"]):
        r = subprocess.run([sys.executable, "-m", "dynspec_cli", "verify", str(log), "--feature",
                            "vllm-eagle-speculator-example", "--json", *extra], capture_output=True, text=True, timeout=60)
        assert r.returncode == 1, r.stderr
        assert json.loads(r.stdout)["engine"] == "vllm"
    r = subprocess.run([sys.executable, "-m", "dynspec_cli", "verify", str(log), "--engine", "nope"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "nope" in r.stderr and "Traceback" not in r.stderr
    # the same log read as sglang's: no vLLM knowledge, so no verdict of dead
    r = subprocess.run([sys.executable, "-m", "dynspec_cli", "verify", str(log), "--engine", "sglang", "--json"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 3


def test_console_report_names_the_vllm_facts(tmp_path):
    log = tmp_path / "server.log"
    log.write_text(CONFIG_033.format(dp=1) + "\n" + FALLBACK_033 + "\n")
    r = subprocess.run([sys.executable, "-m", "dynspec_cli", "verify", str(log), "--feature", "vllm-eagle-speculator-example"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 1
    assert "0.33.0" in r.stdout and "model runner" in r.stdout and "EagleProposer" in r.stdout
    assert "overlap scheduler" not in r.stdout
