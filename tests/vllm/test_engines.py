"""The engine plug-in interface (dynspec_cli/engines/__init__.py): each engine gives knowledge, a classifier and
a judge behind the same calls, and the one judging pipeline (verdict/pipeline.py) drives either."""
import pytest

from dynspec_cli import engines
from dynspec_cli.verdict.pipeline import Pipeline
from dynspec_cli.knowledge.features import load_feature


@pytest.mark.parametrize("name,feature,log,verdict", [
    ("sglang", "dynamic-spec-disable",
     b"[2026-02-27 19:49:17] Spec v2 is enabled by default for eagle/eagle3/standalone speculative decoding.\n", "inconclusive"),
    ("vllm", "vllm-eagle-speculator-example",
     b"(EngineCore_DP0 pid=1) INFO 12-03 09:00:01 [core.py:140] Initializing a V1 LLM engine (v0.33.0) with config: "
     b"model='m', speculative_config=None, tokenizer='m'\n", "dead"),
])
def test_each_engine_plugs_into_the_same_feeder(name, feature, log, verdict):
    e = engines.get(name)
    assert e.name == name and e.knowledge() is e.knowledge()  # loaded once
    f = load_feature(feature)
    assert hasattr(e.classifier(f), "classify") and hasattr(e.judge(f), "feed")
    p = Pipeline(f, engine=e)
    p.feed(log)
    v = p.final()
    assert v.verdict == verdict and v.exit_code == {"dead": 1, "inconclusive": 3}[verdict]
    assert p.decided(v) == (verdict == "dead")
    assert len(p.judge.launches) == 1
    assert p.final(exited=True).verdict == ("dead" if verdict == "dead" else "crashed")


def test_resolve():
    with pytest.raises(engines.EngineError, match="trtllm"):
        engines.get("trtllm")
    with pytest.raises(engines.EngineError):
        engines.resolve("TRT")
    assert engines.resolve("VLLM") == "vllm"
    assert engines.resolve(None) == "sglang"
    assert engines.resolve("auto", None, load_feature("vllm-eagle-speculator-example")) == "vllm"


def test_empty_log_follows_the_feature(tmp_path):
    p = tmp_path / "empty.log"
    p.write_text("")
    assert engines.resolve("auto", str(p), load_feature("vllm-eagle-speculator-example")) == "vllm"
    assert engines.resolve("auto", str(p), load_feature(None)) == "sglang"
