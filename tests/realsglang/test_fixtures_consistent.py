"""The committed real-launcher fixtures are complete and say what their cases claim (no env needed)."""
from __future__ import annotations

import json

import pytest

from tests.tools import record_real_logs as rec

KEYS = [c.key for c in rec.MATRIX]


def test_every_case_has_a_fixture_and_nothing_else_is_there():
    on_disk = {f"{p.parent.name}/{p.stem}" for p in rec.FIXTURES.glob("*/*.log")}
    assert on_disk == set(KEYS)
    assert {f"{p.parent.name}/{p.stem}" for p in rec.FIXTURES.glob("*/*.json")} == set(KEYS)


@pytest.mark.parametrize("key", KEYS)
def test_fixture_meets_its_case(key):
    case = rec.CASES[key]
    meta = json.loads((rec.FIXTURES / case.version / f"{case.name}.json").read_text())
    text = (rec.FIXTURES / case.version / f"{case.name}.log").read_bytes().decode("utf-8", "replace")
    res = rec.Result(case, meta["argv"], meta["env_delta"], meta["exit_code"], meta["duration_s"],
                     meta["timed_out"], text.encode())
    assert res.check() == []
    assert meta["expectation_problems"] == []
    assert not meta["timed_out"]
    assert meta["sglang_version"] == case.version
    assert meta["stage"] == rec.stage_of(text, meta["exit_code"], False)
    assert meta["evidence"] == rec.evidence_lines(text)
    assert meta["argv"][1:] == case.launcher_args()
    assert ("--speculative-disable-batch-threshold" in meta["argv"])
    for k, v in case.env.items():
        assert meta["env_delta"][k] == v


EXPECTED_STAGE = {
    "0.5.9": "import:uvicorn",
    "0.5.12.post1": "import:sgl_kernel",
    "0.5.16": "scheduler-cuda-init",
    "0.5.23": "scheduler-cuda-init",
}


@pytest.mark.parametrize("key", KEYS)
def test_fixture_stops_where_the_reference_table_says(key):
    case = rec.CASES[key]
    meta = json.loads((rec.FIXTURES / case.version / f"{case.name}.json").read_text())
    if not case.patched:
        assert meta["stage"] == "argparse-error" and meta["exit_code"] == 2
    elif key == "0.5.9/v2-true-topk4":
        assert meta["stage"] == "error:ValueError"
    else:
        assert meta["stage"] == EXPECTED_STAGE[case.version], meta["stage"]


def test_normalize_and_evidence():
    assert rec.normalize("[2026-12-02 16:02:15] Spec v2 x") == "[ts] Spec v2 x"
    assert rec.normalize("[2026-12-02 16:02:15 TP0] Spec v2 x") == "[TP0] Spec v2 x"
    assert rec.normalize("[2026-12-02 16:02:15] server_args=ServerArgs(model_path='/x', a=1)") == \
        "[ts] server_args=ServerArgs..."
    text = "noise\nOverlap scheduler is disabled when spec v2 is off\n[2026-12-02 16:02:15] Spec v1 is used\n" \
           "[2026-12-02 16:02:16] Spec v1 is used\n"
    assert rec.evidence_lines(text) == ["Overlap scheduler is disabled when spec v2 is off", "[ts] Spec v1 is used"]
    assert rec.stage_of("x\nModuleNotFoundError: No module named 'uvicorn'\n", 1, False) == "import:uvicorn"
    assert rec.stage_of("x: error: unrecognized arguments: --a", 2, False) == "argparse-error"
    assert rec.stage_of("", None, True) == "timeout"
