"""0.5.13+ releases: no V1 worker exists, so the tables and the report must speak of the overlap
scheduler being on or off (synchronous V2), never of a V1 worker. Checked against the wheels
(hand-read facts: 0.5.13 deletes eagle_worker.py, standalone_worker.py and
multi_layer_eagle_worker.py; from 0.5.14 SpeculativeAlgorithm.create_worker does not look at the
overlap setting at all) and on logs built from each release's own lines."""
from __future__ import annotations

import ast

import pytest

from dynspec_cli.knowledge.features import load_feature
from dynspec_cli.engines.sglang.knowledge import knowledge
from dynspec_cli.engines.sglang import preflight
from tests.support import wheels
from tests.support.logs import MARKER, READY, dump, judge_text, ts

pytestmark = pytest.mark.wheels

K = knowledge()
LATE = K.versions_in(K.mask(">=0.5.13"))
V1_MODULES = ("eagle_worker", "standalone_worker", "multi_layer_eagle_worker")


@pytest.mark.parametrize("version", K.releases)
def test_every_release_has_one_dispatch_and_one_overlap_range(version):
    bit = K.mask_of(version)
    assert sum(1 for r in K.dispatch_ranges if K.mask(r.versions) & bit) == 1
    assert sum(1 for r in K.overlap_ranges if K.mask(r.versions) & bit) == 1


def _create_worker(version: str) -> str:
    t = ast.parse((wheels.unpacked(version) / "sglang/srt/speculative/spec_info.py").read_bytes())
    return ast.unparse(next(n for n in ast.walk(t) if isinstance(n, ast.FunctionDef) and n.name == "create_worker"))


@pytest.mark.parametrize("version", LATE)
def test_no_v1_worker_and_the_tables_agree(version):
    spec = wheels.unpacked(version) / "sglang/srt/speculative"
    assert not [m for m in V1_MODULES if (spec / f"{m}.py").exists()]
    for algo in ("EAGLE", "EAGLE3", "STANDALONE"):
        on, off = K.worker(version, algo, True), K.worker(version, algo, False)
        assert on == off and on.module not in V1_MODULES and on.cls.endswith("V2"), (algo, on, off)
    if K.mask_of(version) & K.mask(">=0.5.14"):
        assert "overlap" not in _create_worker(version)  # one worker whatever the overlap setting
        assert all(r.overlap is None for r in K.dispatch_rules(version).rules)


@pytest.mark.parametrize("version", LATE)
def test_non_overlap_log_names_the_v2_worker_and_overlap_off(version):
    """--disable-overlap-schedule on 0.5.13+: sglang logs that synchronous spec v2 is used; the
    report says overlap off and EAGLEWorkerV2, and no finding talks of a V1 worker."""
    form = next(f for f, spec in next(x for x in K.log_lines if x.id == "server-args-dump").versions_by_form.items()
                if K.mask(spec) & K.mask_of(version))
    lines = [ts("Non-overlap (synchronous) spec v2 is used for eagle/eagle3/standalone speculative decoding."),
             ts(dump(form="repr" if form == "ServerArgs(" else "dict", model_path="/m", speculative_algorithm="EAGLE3",
                     speculative_eagle_topk=1, disable_overlap_schedule=True, enable_multi_layer_eagle=False,
                     max_running_requests=64, speculative_disable_batch_threshold=5)),
             ts(MARKER), READY]
    v = judge_text("\n".join(lines) + "\n", version=version)
    assert v.overlap_schedule is False and v.worker["class"] == "EAGLEWorkerV2" and v.verdict == "live"
    assert not [f.message for f in v.findings if "V1" in f.message]


@pytest.mark.parametrize("version", LATE)
def test_preflight_topk4_does_not_fall_back_to_v1(version):
    facts = {"ok": True, "sglang": {"found": True, "version": version, "package_dir": "/p/sglang"},
             "marker": {"hits": [{"file": "/p/sglang/srt/speculative/eagle_worker_v2.py", "class": "EAGLEWorkerV2",
                                  "function": "__init__", "line": 1}]},
             "files": [], "flags": {"feature_flag": {"defined": True}, "user_flags": []}, "dynamic": None}
    flags = ["--model-path", "m", "--speculative-algorithm", "EAGLE3", "--speculative-eagle-topk", "4",
             "--speculative-disable-batch-threshold", "5", "--max-running-requests", "64"]
    r = preflight.judge(facts, load_feature(None), flags, {})
    assert r["worker"]["class"] == "EAGLEWorkerV2" and r["verdict"] == "reachable"
    assert not [f for f in r["findings"] if "V1" in f["message"]]
