"""vLLM's serving evidence as prove and guard read it: each engine's stats line (`Engine 000: ...
Running: N reqs`) with the `SpecDecoding metrics` line vLLM logs right after it (real recorded logs,
tests/fixtures/logs/vllm/), and the texts and metric names those readings rest on, checked against
the published vLLM wheels (vllm/v1/metrics/loggers.py, vllm/v1/spec_decode/metrics.py)."""
import re
from pathlib import Path

import pytest

from dynspec_cli.knowledge.features import load_feature
from dynspec_cli.prove.observations import LogReader
from tests.support import vllm_wheels
VLLM = Path(__file__).resolve().parent.parent / "fixtures" / "logs" / "vllm"


def read(name: str) -> list:
    data = (VLLM / name).read_bytes()
    return LogReader(load_feature("vllm-eagle-speculator-example")).read(data, 0).decode


def test_each_stats_line_takes_the_specdecoding_line_after_it():
    # 06: a SpecDecoding line first (its stats line is before the excerpt: no batch, not read), then
    # 'Engine 000: ... Running: 8 reqs' + 'Mean acceptance length: 2.77', 'Running: 9 reqs' + 2.67
    got = [(d.running, d.accept_len) for d in read("06-mtp-metrics-under-load.log")]
    assert got == [(8, 2.77), (9, 2.67)]


def test_idle_engines_give_no_batch():
    # 05 (-dp 8, 0.10.1's 'Draft acceptance rate' first): Engine 000-002 each 'Running: 0 reqs'
    assert read("05-ngram-dp8-metrics-per-engine.log") == []


def test_a_stats_line_with_no_specdecoding_line_had_no_drafts():
    line = ("(APIServer pid=5020) INFO 05-19 10:30:43 [loggers.py:271] Engine 001: Avg prompt throughput: 0.0 tokens/s, "
            "Avg generation throughput: 1004.4 tokens/s, Running: 8 reqs, Waiting: 7 reqs, GPU KV cache usage: 82.5%\n")
    data = (line * 2).encode()
    got = LogReader(load_feature("vllm-eagle-speculator-example")).read(data, 0).decode
    assert [(d.running, d.accept_len, d.stable) for d in got] == [(8, None, False), (8, None, True)]


@pytest.mark.wheels
@pytest.mark.parametrize("version", ["0.23.0", "0.33.0"])
def test_the_texts_and_names_are_vllms(version):
    root = vllm_wheels.package_members("vllm", version, ("vllm/v1/metrics/loggers.py",))
    loggers = (root / "vllm/v1/metrics/loggers.py").read_text()
    metrics = vllm_wheels.read(version, "vllm/v1/spec_decode/metrics.py")
    assert '"Engine {:03d}: ".format(self.engine_index)' in loggers
    for part in ("Avg prompt throughput: %.1f tokens/s", "Avg generation throughput: %.1f tokens/s", "Running: %d reqs"):
        assert f'"{part}"' in loggers
    # the SpecDecoding line is logged by the same call right after the engine's stats line
    log = loggers[loggers.index("self.log_prefix + \", \".join(log_parts)"):]
    assert re.match(r'self\.log_prefix \+ ", "\.join\(log_parts\),\s*\*log_args,\s*\)\s*self\.spec_decoding_logging\.log'
                    r'\(log_fn=log_fn\)', log)
    assert '"SpecDecoding metrics: "\n            "Mean acceptance length: %.2f, "' in metrics
    for name in ("vllm:spec_decode_num_drafts", "vllm:spec_decode_num_draft_tokens", "vllm:spec_decode_num_accepted_tokens",
                 "vllm:spec_decode_num_accepted_tokens_per_pos"):
        assert re.search(rf'(name=|\()"{name}"', metrics), name  # 0.23: name="..."; 0.33: a (name, doc) table
    assert 'labelnames = ["model_name", "engine"]' in loggers
    assert 'name="vllm:generation_tokens"' in loggers and 'name="vllm:num_requests_running"' in loggers
