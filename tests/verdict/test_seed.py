"""The log that started the project (sglang 0.5.9, 8-GPU box): dead from its first line."""
from tests.support.logs import codes, judge_text

SEED = (
    "[2026-02-27 19:49:17] WARNING server_args.py:2386: Overlap scheduler is disabled when spec v2 is off or using unsupported "
    "speculative algorithm. You can set env SGLANG_ENABLE_SPEC_V2=True to enable the experimental overlap scheduler. \n"
    "[2026-02-27 19:49:17] server_args=ServerArgs(model_path='/shared/kimi-k2.5-int4', tokenizer_path='/shared/kimi-k2.5-int4', "
    "tokenizer_mode='auto', tokenizer_worker_num=1, skip_tokenizer_init=False, load_format='auto', model_loader_extra_config='{}', "
    "trust_remote_cod\n"
)


def test_seed_is_dead_from_its_first_line():
    first_line_only = SEED.splitlines(keepends=True)[0]
    v = judge_text(first_line_only)
    assert v.verdict == "dead" and v.exit_code == 1
    assert v.worker["class"] == "EAGLEWorker"
    assert v.worker["module"] == "sglang.srt.speculative.eagle_worker"
    assert v.overlap_schedule is False
    assert v.engine_version == "0.5.7 – 0.5.10.post1"
    (ds201,) = [f for f in v.findings if f.code == "DS201"]
    assert ds201.line == 1
    assert "export SGLANG_ENABLE_SPEC_V2=True" in ds201.fix
    assert "--speculative-eagle-topk 1" in ds201.fix
    assert "eagle_worker.py" in ds201.fix


def test_seed_json_contract():
    doc = judge_text(SEED).to_json()
    for key in ("verdict", "exit_code", "feature", "sglang_version", "speculative_algorithm", "overlap_schedule",
                "worker", "server_ready", "crashed", "crash", "marker", "findings"):
        assert key in doc
    assert doc["verdict"] == "dead" and doc["exit_code"] == 1
    assert doc["feature"] == "dynamic-spec-disable"
    assert doc["speculative_algorithm"] is None  # the dump is cut before it: the log does not say
    assert doc["overlap_schedule"] is False
    assert set(doc["worker"]) >= {"class", "module", "basis"}
    # one start-up line: nothing says whether the server became ready or crashed (null, never a guessed false)
    assert doc["server_ready"] is None and doc["crashed"] is None and doc["crash"] is None
    assert doc["marker"]["found"] is False and doc["marker"]["line"] is None and doc["marker"]["fields"] == {}
    for f in doc["findings"]:
        assert set(f) >= {"code", "severity", "message", "line", "fix"}
    assert codes(judge_text(SEED)) == ["DS201"]


def test_patch_in_v1_worker_is_on_the_path_of_the_seed_launch():
    v = judge_text(SEED, patched=["EAGLEWorker"])
    assert v.verdict == "inconclusive"  # on the path, but the marker is not logged yet
    assert "DS201" not in codes(v)
