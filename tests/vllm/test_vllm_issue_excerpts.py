"""Real vLLM log excerpts quoted from public vllm-project threads (tests/fixtures/logs/vllm/): the
facts a person read in each excerpt (the .json beside it) must be what `dynspec verify` reads,
with the engine recognised from the log alone (`--engine auto`)."""
import json
from pathlib import Path

import pytest

from dynspec_cli.verdict import engines
from dynspec_cli.verdict.pipeline import judge_file
from dynspec_cli.knowledge.features import load_feature

HERE = Path(__file__).resolve().parent.parent / "fixtures" / "logs" / "vllm"
CASES = sorted(HERE.glob("*.json"))
FEATURE = load_feature("vllm-eagle-speculator-example")


def test_there_are_enough_real_excerpts():
    assert len(CASES) >= 20
    repos = {json.loads(p.read_text())["repo"] for p in CASES}
    assert all(r.startswith("vllm-project/") for r in repos)


@pytest.mark.parametrize("meta", CASES, ids=lambda p: p.stem)
def test_excerpt_facts(meta):
    doc = json.loads(meta.read_text())
    exp = doc["expected"]
    log = str(meta.with_suffix(".log"))
    assert engines.resolve("auto", log, load_feature(None)) == "vllm"  # recognised without the feature's hint
    v = judge_file(log, FEATURE, None, None, engine="vllm").to_json()
    assert v["engine"] == "vllm"
    assert v["verdict"] == exp["verdict"], v["findings"]
    assert v["exit_code"] == {"live": 0, "dead": 1, "inconclusive": 3, "crashed": 4}[exp["verdict"]]
    assert v["engine_version"] == exp["engine_version"]
    assert v["speculative_algorithm"] == exp["speculative_method"]
    assert v["model_runner"] == exp["model_runner"]
    assert v["server_ready"] == exp["server_ready"]
    assert v["crashed"] == exp["crashed"]
    if exp["crash_exception"]:
        assert v["crash"]["exception"] == exp["crash_exception"]
    codes = {f["code"] for f in v["findings"]}
    assert ("DS602" in codes) == exp["speculation_off"]
    assert v["launch"]["decode_lines"] == exp["spec_metrics_lines"]
    got_accept = (v["launch"]["last_decode"] or {}).get("accept_len")
    assert got_accept == exp["last_accept_len"]
    if "release_known" in exp:
        assert ("DS606" in codes) == (not exp["release_known"])
    if "launches" in exp:
        assert v["launch"]["of"] == exp["launches"]
    assert v["verdict"] != "live"  # no excerpt carries the example feature's marker


def test_sglang_excerpts_are_not_taken_for_vllm():
    sg = sorted((HERE.parent / "issues").glob("*.log"))
    assert sg
    wrong = [p.name for p in sg if engines.resolve("auto", str(p)) != "sglang"]
    assert not wrong


@pytest.mark.parametrize("wrap", ["", "vllm-1  | ", "2026-02-27T19:49:17.123456789Z stderr F "])
def test_detection_through_wrappers(tmp_path, wrap):
    src = (HERE / "03-mtp-gemma4-serving-metrics-low-acceptance.log").read_text().splitlines()
    p = tmp_path / "x.log"
    p.write_text("".join(wrap + line + "\n" for line in src))
    assert engines.resolve("auto", str(p)) == "vllm"
    v = judge_file(str(p), FEATURE, None, None, engine="vllm").to_json()
    assert v["launch"]["decode_lines"] == 2


def test_unknown_engine_is_a_usage_error(tmp_path, capsys):
    from dynspec_cli.cli.verify import run_verify

    p = tmp_path / "x.log"
    p.write_text("hello\n")
    assert run_verify(str(p), engine="trtllm") == 2
    err = capsys.readouterr().err
    assert "trtllm" in err and "Traceback" not in err
