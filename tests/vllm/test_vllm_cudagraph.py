"""vLLM's CUDA-graph mode (issue 31), judged from real excerpts (tests/fixtures/logs/vllm/ with an
`expected_compute_path`) and checked against the wheels where a message is assembled from several
literals (the runner's attention-backend check, which the table's `text` cannot name whole)."""
import json
import re
from pathlib import Path

import pytest

from dynspec_cli.engines.vllm.knowledge import knowledge
from dynspec_cli.knowledge.features import load_feature
from dynspec_cli import engines
from dynspec_cli.verdict.pipeline import judge_file
from tests.support import vllm_wheels

HERE = Path(__file__).resolve().parent.parent / "fixtures" / "logs" / "vllm"
CASES = sorted(p for p in HERE.glob("*.json") if "expected_compute_path" in json.loads(p.read_text()))
K = knowledge()


def _verify(log: Path) -> dict:
    feature = load_feature(None)
    return judge_file(str(log), feature, engine=engines.get(engines.resolve("auto", str(log), feature))).to_json()


def test_there_is_a_graph_mode_excerpt():
    assert CASES


@pytest.mark.parametrize("meta", CASES, ids=lambda p: p.stem)
def test_excerpt_graph_mode(meta):
    m = json.loads(meta.read_text())
    doc = _verify(meta.with_suffix(".log"))
    assert doc["engine"] == "vllm"
    for key, value in m["expected_compute_path"].items():
        assert doc["compute_path"][key] == value, key
    assert sorted({f["code"] for f in doc["findings"]} & {"DS616", "DS617"}) == m["expected_findings"]
    assert doc["verdict"] != "live"  # the graph mode never makes a verdict


@pytest.mark.wheels
@pytest.mark.parametrize("version", K.releases)
def test_runner_mode_message_in_the_wheels(version):
    """The runner's message ("CUDAGraphMode.%s is not supported with %s backend (support: %s)" +
    "; setting cudagraph_mode=%s ...") is built from f-strings and `msg +=` in
    v1/worker/gpu_model_runner.py (0.11.0 - 0.15.x) or config/compilation.py (0.15.0+); the row's
    range is where the pieces are."""
    row = K.line_by_id["cudagraph-mode-resolved"]
    root = vllm_wheels.members(version)
    files = [root / "vllm/v1/worker/gpu_model_runner.py", root / "vllm/config/compilation.py"]
    text = "".join(p.read_text() for p in files if p.is_file())
    has = "; setting cudagraph_mode=PIECEWISE because " in text and re.search(r"is not supported\s*\"\s*f?\"\s*with|is not supported \"|is not supported with", text) is not None \
        and "backend (support: " in text
    assert has == bool(K.mask(row.versions) & K.mask_of(version)), version
