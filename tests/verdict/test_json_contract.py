"""The JSON's own contract (issue 19): `null` means "the evidence does not say". The top-level
`crashed`, `server_ready`, `speculative_algorithm` and `speculative` are the `claims` values of the
same output, for both engines; `false` needs its line; `crashed: false` is never said of a log that
ends inside a traceback or holds a crash line."""
import json
from pathlib import Path

import pytest

from dynspec_cli.knowledge.features import load_feature
from dynspec_cli import engines
from dynspec_cli.verdict.pipeline import Pipeline, judge_file

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "logs"
LOGS = sorted(FIXTURES.glob("issues/*.log")) + sorted(FIXTURES.glob("vllm/*.log"))
TOP = ("crashed", "server_ready", "speculative_algorithm", "speculative")


def _verify_json(path: Path) -> dict:
    """What `dynspec verify --json LOG` prints: engine `auto`, the default feature."""
    feature = load_feature(None)
    return judge_file(str(path), feature, engine=engines.get(engines.resolve("auto", str(path), feature))).to_json()


@pytest.mark.parametrize("log", LOGS, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_top_level_is_the_claims(log):
    doc = _verify_json(log)
    for key in TOP:
        assert doc[key] == doc["claims"][key]["value"], key
        assert doc[key] is None or doc["claims"][key]["line"], key  # a value names its line


# Real lines (tests/fixtures/logs/issues/73-..., vllm/03-...) put together: a served request, then a
# traceback the log ends in; the same with a crash line after the served request.
SERVED_SG = '[2026-05-05 02:22:14] INFO:     127.0.0.1:56304 - "POST /generate HTTP/1.1" 200 OK\n'
TRACEBACK_SG = ('[2026-05-05 02:22:14] Scheduler hit an exception: Traceback (most recent call last):\n'
                '  File "/home/ubuntu/sglang/python/sglang/srt/managers/scheduler.py", line 3875, in run_scheduler_process\n'
                '    scheduler.run_event_loop()\n')
BARE_TRACEBACK = ('Traceback (most recent call last):\n'
                  '  File "/usr/lib/python3.12/multiprocessing/process.py", line 314, in _bootstrap\n'
                  '    self.run()\n')
SERVED_VLLM = ('(APIServer pid=1) INFO 05-06 06:11:23 [loggers.py:271] Engine 000: Avg prompt throughput: 1436.3 tokens/s, '
               'Avg generation throughput: 93.9 tokens/s, Running: 3 reqs, Waiting: 0 reqs, GPU KV cache usage: 36.1%, '
               'Prefix cache hit rate: 27.4%\n'
               '(APIServer pid=1) INFO:     192.168.1.108:39394 - "POST /v1/chat/completions HTTP/1.1" 200 OK\n')
VLLM_TRACEBACK = ('(EngineCore_DP0 pid=395) Process EngineCore_DP0:\n'
                  '(EngineCore_DP0 pid=395) Traceback (most recent call last):\n'
                  '(EngineCore_DP0 pid=395)   File "/usr/lib/python3.12/multiprocessing/process.py", line 314, in _bootstrap\n')


@pytest.mark.parametrize("text", [SERVED_SG + TRACEBACK_SG, SERVED_SG + BARE_TRACEBACK, SERVED_VLLM + VLLM_TRACEBACK,
                                  SERVED_VLLM + BARE_TRACEBACK],
                         ids=["sglang-scheduler", "sglang-bare", "vllm-enginecore", "vllm-bare"])
def test_a_log_ending_inside_a_traceback_is_never_crashed_false(tmp_path, text):
    log = tmp_path / "server.log"
    log.write_text(text)
    doc = _verify_json(log)
    assert doc["crashed"] is True and doc["claims"]["crashed"]["line"] is not None
    assert doc["verdict"] in ("crashed", "dead")


def test_served_requests_with_nothing_after_them_are_crashed_false(tmp_path):
    log = tmp_path / "server.log"
    log.write_text(SERVED_VLLM)
    doc = _verify_json(log)
    assert doc["crashed"] is False and doc["claims"]["crashed"]["line"] == 2  # the 200 OK: served, nothing after


def test_nothing_seen_is_null_not_false(tmp_path):
    log = tmp_path / "server.log"
    log.write_text("(APIServer pid=1) INFO 06-19 15:35:00 [api_utils.py:339] non-default args: {'model': 'Qwen/Qwen3.5-2B'}\n"
                   "(APIServer pid=1) INFO 06-19 15:35:08 [model.py:611] Resolved architecture: Qwen3_5ForConditionalGeneration\n")
    doc = _verify_json(log)
    assert (doc["crashed"], doc["server_ready"], doc["speculative_algorithm"]) == (None, None, None)


@pytest.mark.parametrize("engine,text", [("sglang", "[2026-02-27 19:49:17] Load weight begin. avail mem=78.00 GB\n"),
                                         ("vllm", "(Worker_TP1 pid=530) INFO 10-06 18:54:29 [v1/worker/gpu_model_runner.py:2641] "
                                                  "Loading drafter model...\n")])
def test_a_process_that_exited_is_crashed_in_claims_too(engine, text):
    p = Pipeline(load_feature(None), engine=engines.get(engine))
    p.feed(text.encode())
    doc = p.final(exited=True).to_json()
    assert doc["crashed"] is True and doc["claims"]["crashed"]["value"] is True
    assert doc["claims"]["crashed"]["line"] == 1 and doc["crash"]["exception"] == "ProcessExited"


def test_labels_show_false_with_its_line_somewhere():
    """The collection proves `false` both ways for each engine (not only nulls)."""
    seen = set()
    for meta in FIXTURES.glob("*/*.json"):
        exp = json.loads(meta.read_text())["expected"]
        engine = "vllm" if meta.parent.name == "vllm" else "sglang"
        seen |= {(engine, k) for k in ("crashed", "server_ready") if exp.get(k) is False}
    assert seen == {("sglang", "crashed"), ("sglang", "server_ready"), ("vllm", "crashed"), ("vllm", "server_ready")}
