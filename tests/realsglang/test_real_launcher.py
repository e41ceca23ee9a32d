"""The real `python -m sglang.launch_server` of published releases, run live on CPU, against the committed
fixtures in tests/fixtures/logs/real-launcher/ (made by tests/tools/record_real_logs.py).

A live run must (1) print the release's real evidence lines the case expects, (2) stop at the same stage,
and (3) produce the same normalised evidence lines as the committed fixture, so a drift of the recorded
logs (or of the env that makes them) is caught.
"""
from __future__ import annotations

import json
import subprocess

import pytest

from tests.tools import record_real_logs as rec

pytestmark = pytest.mark.realsglang

LIVE = [
    "0.5.9/v2-unset-topk4",  # Overlap scheduler is disabled when spec v2 is off ...
    "0.5.9/v2-true-topk1",  # Spec v2 is enabled for eagle/eagle3 ...
    "0.5.9/v2-true-topk4",  # ValueError: Spec v2 currently only supports topk = 1
    "0.5.9/unpatched-v2-unset-topk4",  # unrecognized arguments: --speculative-disable-batch-threshold
    "0.5.12.post1/v2-unset-topk4",  # Spec v1 is used ... because spec v2 currently only supports topk = 1.
    "0.5.23/v2-true-topk4",  # server_args={...} dump, nothing about the env var, CUDA init failure
]


def _fixture(key: str):
    version, name = key.split("/")
    meta = json.loads((rec.FIXTURES / version / f"{name}.json").read_text())
    log = (rec.FIXTURES / version / f"{name}.log").read_bytes().decode("utf-8", "replace")
    return meta, log


@pytest.fixture(scope="module")
def live_results(real_envs, launcher_work):
    cache = {}

    def get(key):
        if key not in cache:
            case = rec.CASES[key]
            cache[key] = rec.run_case(case, launcher_work, env=real_envs[case.version])
        return cache[key]

    return get


@pytest.mark.parametrize("key", LIVE)
def test_live_run_matches_case_and_fixture(key, live_results):
    res = live_results(key)
    assert not res.timed_out, f"{key} hit the {rec.TIMEOUT}s timeout:\n{res.text[-3000:]}"
    assert res.check() == [], f"{key}:\n{res.text[-4000:]}"
    meta, log = _fixture(key)
    assert res.stage == meta["stage"], res.text[-3000:]
    assert res.returncode == meta["exit_code"]
    live = rec.evidence_lines(res.text)
    # same evidence as the committed fixture; compared as sets because the scheduler/detokenizer children of
    # 0.5.16+ interleave their lines differently from run to run
    assert set(live) == set(meta["evidence"]), (
        f"{key}: live evidence drifted from the fixture\n"
        f"only live: {sorted(set(live) - set(meta['evidence']))}\n"
        f"only fixture: {sorted(set(meta['evidence']) - set(live))}")


def test_0_5_9_warning_is_bare_and_precedes_the_uvicorn_stop(live_results):
    text = live_results("0.5.9/v2-unset-topk4").text
    lines = text.splitlines()
    warn = next(i for i, ln in enumerate(lines) if ln.startswith("Overlap scheduler is disabled when spec v2 is off"))
    stop = next(i for i, ln in enumerate(lines) if "No module named 'uvicorn'" in ln)
    assert warn < stop
    assert not lines[warn].startswith("["), "0.5.9 logs through logging.lastResort: no timestamp"


def test_0_5_9_topk4_v2_valueerror_comes_after_the_v2_warning(live_results):
    text = live_results("0.5.9/v2-true-topk4").text
    assert text.index(rec.V2_ON_059) < text.index(rec.TOPK_ERR_059)
    assert "uvicorn" not in text  # resolution failed: the launcher never got to the server imports


def test_0_5_12_warnings_are_timestamped(live_results):
    text = live_results("0.5.12.post1/v2-unset-topk4").text
    line = next(ln for ln in text.splitlines() if rec.V1_BECAUSE in ln)
    assert rec._TS.match(line), line
    assert "No module named 'sgl_kernel'" in text


def test_0_5_23_dumps_server_args_and_ignores_the_env_var(live_results):
    res = live_results("0.5.23/v2-true-topk4")
    dump = next(ln for ln in res.text.splitlines() if "server_args={" in ln)
    assert "'speculative_disable_batch_threshold': 5" in dump  # the patched flag reached the resolved args
    assert "'speculative_eagle_topk': 4" in dump
    assert "SGLANG_ENABLE_SPEC_V2" not in res.text
    assert res.returncode == -9  # sglang kills its own process tree after the scheduler fails


def test_unpatched_launcher_rejects_the_flag(live_results):
    res = live_results("0.5.9/unpatched-v2-unset-topk4")
    assert res.returncode == 2  # argparse
    assert "error: unrecognized arguments: --speculative-disable-batch-threshold 5" in res.text


@pytest.mark.parametrize("version", ["0.5.9", "0.5.23"])
def test_patched_flag_lands_in_server_args(version, real_envs, tmp_path):
    """In-process: the patched tree's prepare_server_args parses the flag into the new field."""
    env = real_envs[version]
    rec.ensure_model_dir()
    site = rec.patched_site(env, tmp_path)
    m = str(rec.MODEL_DIR)
    code = (
        "import sys\n"
        "from sglang.srt.server_args import prepare_server_args\n"
        f"sa = prepare_server_args(['--model-path', {m!r}, '--device', 'cuda',"
        " '--speculative-disable-batch-threshold', '7'])\n"
        "import sglang; print('FILE', sglang.__file__)\n"
        "print('VALUE', sa.speculative_disable_batch_threshold)\n"
    )
    out = subprocess.run([str(env.python), "-c", code], env=env.env(extra_paths=[site]), capture_output=True,
                         text=True, timeout=180)
    assert out.returncode == 0, out.stderr[-3000:]
    assert f"FILE {site}" in out.stdout
    assert "VALUE 7" in out.stdout
