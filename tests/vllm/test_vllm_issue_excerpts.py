"""Real vLLM log excerpts quoted from public vllm-project threads (tests/fixtures/logs/vllm/): the
facts a person read in each excerpt (the .json beside it) must be what `dynspec verify` reads,
with the engine recognised from the log alone (`--engine auto`)."""
import json
from pathlib import Path

import pytest

from dynspec_cli import engines
from dynspec_cli.verdict.pipeline import judge_file
from dynspec_cli.knowledge.features import load_feature

HERE = Path(__file__).resolve().parent.parent / "fixtures" / "logs" / "vllm"
CASES = sorted(HERE.glob("*.json"))
FEATURE = load_feature("vllm-eagle-speculator-example")


def test_there_are_enough_real_excerpts():
    assert len(CASES) >= 20
    repos = [json.loads(p.read_text())["repo"] for p in CASES]
    assert sum(r.startswith("vllm-project/") for r in repos) >= 30  # the rest: projects that run vLLM


CLAIMS = ("crashed", "server_ready", "speculative_algorithm", "worker", "speculative")


def _judge(meta):
    log = str(meta.with_suffix(".log"))
    assert engines.resolve("auto", log, load_feature(None)) == "vllm"  # recognised without the feature's hint
    return judge_file(log, FEATURE, None, None, engine=engines.get("vllm")).to_json()


@pytest.mark.parametrize("meta", CASES, ids=lambda p: p.stem)
def test_excerpt_facts(meta):
    exp = json.loads(meta.read_text())["expected"]
    v = _judge(meta)
    assert v["engine"] == "vllm"
    if "verdict" in exp:
        assert v["verdict"] == exp["verdict"], v["findings"]
        assert v["exit_code"] == {"live": 0, "dead": 1, "inconclusive": 3, "crashed": 4}[exp["verdict"]]
    for key, got in (("engine_version", v["engine_version"]), ("model_runner", v["model_runner"]),
                     ("spec_metrics_lines", v["launch"]["decode_lines"]),
                     ("last_accept_len", (v["launch"]["last_decode"] or {}).get("accept_len"))):
        if key in exp:
            assert got == exp[key], key
    if exp.get("crash_exception"):
        assert v["crash"]["exception"].rsplit(".", 1)[-1] == exp["crash_exception"]
    codes = {f["code"] for f in v["findings"]}
    if "speculation_off" in exp:
        assert ("DS602" in codes) == exp["speculation_off"]
    if "release_known" in exp:
        assert ("DS606" in codes) == (not exp["release_known"])
    if "launches" in exp:
        assert v["launch"]["of"] == exp["launches"]
    assert v["verdict"] != "live"  # no excerpt carries the example feature's marker


@pytest.mark.parametrize("meta", CASES, ids=lambda p: p.stem)
def test_excerpt_claims(meta):
    """Each claim as the person read it (null included), and the top-level fields are the claims'."""
    exp = json.loads(meta.read_text())["expected"]
    v = _judge(meta)
    for name in CLAIMS:
        assert v["claims"][name]["value"] == exp[name], (name, v["claims"][name])
    for name in ("crashed", "server_ready", "speculative_algorithm", "speculative"):
        assert v[name] == v["claims"][name]["value"], name
    if exp["crashed"]:
        assert v["verdict"] in ("crashed", "dead")


@pytest.mark.parametrize("meta", CASES, ids=lambda p: p.stem)
def test_every_claim_names_its_line(meta):
    v = _judge(meta)
    lines = meta.with_suffix(".log").read_bytes().decode("utf-8", "replace").split("\n")
    for name, c in v["claims"].items():
        if c["value"] is None:
            continue
        assert isinstance(c["line"], int) and c["basis"], (name, c)
        assert lines[c["line"] - 1].rstrip("\r").startswith(c["text"].rstrip("…")), (name, c)


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
    v = judge_file(str(p), FEATURE, None, None, engine=engines.get("vllm")).to_json()
    assert v["launch"]["decode_lines"] == 2


def test_unknown_engine_is_a_usage_error(tmp_path, capsys):
    from dynspec_cli.cli.verify import run_verify

    p = tmp_path / "x.log"
    p.write_text("hello\n")
    assert run_verify(str(p), engine="trtllm") == 2
    err = capsys.readouterr().err
    assert "trtllm" in err and "Traceback" not in err
