"""`preflight --patch` on vLLM: each hunk of a diff against the real vllm 0.33.0 wheel's files
(tests/support/vllm_wheels.py), applied to a copy of the package, judged against the model runner
and the proposer class that will run. The expectations come from vLLM's own source (0.33.0):

- vllm/config/vllm.py:748-750 `use_v2_model_runner`: VLLM_USE_V2_MODEL_RUNNER, when set, decides
  (envs.py:2149 maybe_convert_bool); unset, :752-767 V2 unless Triton is missing or a feature is
  unsupported (eagle3 without parallel drafting is supported);
- vllm/v1/worker/gpu_worker.py:570-584 `_make_model_runner`: V2 is vllm/v1/worker/gpu/model_runner.py,
  V1 vllm/v1/worker/gpu_model_runner.py;
- V1: gpu_model_runner.py:650-651 builds EagleProposer (vllm/v1/spec_decode/eagle.py:10, `class
  EagleProposer(SpecDecodeBaseProposer)`, whose base is llm_base_proposer.py:73) for use_eagle()
  (eagle3 included, config/speculative.py:2116), and :614-617 NgramProposer only for method "ngram";
- V2: vllm/v1/worker/gpu/spec_decode/__init__.py:76-80 builds EagleSpeculator
  (gpu/spec_decode/eagle/speculator.py:12) for use_eagle().
"""
import difflib
import json
import shutil
import subprocess
import sys

import pytest

from dynspec_cli.knowledge.features import load_feature
from dynspec_cli.transport.local import LocalHost
from dynspec_cli.engines.vllm import preflight as vp
from dynspec_cli.verdict.preflight import PatchError
from tests.support import vllm_wheels

pytestmark = pytest.mark.wheels
FEATURE = load_feature("vllm-eagle-speculator-example")
SPEC = '{"method": "eagle3", "model": "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B", "num_speculative_tokens": 3}'
V2_SPECULATOR = "vllm/v1/worker/gpu/spec_decode/eagle/speculator.py"
V1_EAGLE = "vllm/v1/spec_decode/eagle.py"
V1_BASE = "vllm/v1/spec_decode/llm_base_proposer.py"
V1_NGRAM = "vllm/v1/spec_decode/ngram_proposer.py"
MARKER = '        logger.info("EagleSpeculator patch active: num_speculative_tokens=%d", 3)\n'


def site_of(tmp_path):
    site = tmp_path / "site"
    shutil.copytree(vllm_wheels.members("0.33.0"), site)
    # the server's triton (V2 needs it, config/vllm.py:752): its package __init__, from the real wheel
    shutil.copytree(vllm_wheels.package_members("triton", "3.5.1", ("triton/__init__.py",)) / "triton", site / "triton")
    return site


def patch(site, edits):
    """Apply `edits` [(file under site, unique line, lines inserted after it)] to the installed files;
    the unified diff of all of them, as `git diff` in a vllm checkout writes it (a/vllm/..., b/vllm/...)."""
    before = {}
    for rel, after, new in edits:
        path = site / rel
        old = path.read_text()
        before.setdefault(rel, old)
        assert old.count(after) == 1, (rel, after)
        path.write_text(old.replace(after, after + new))
    return "".join("".join(difflib.unified_diff(old.splitlines(True), (site / rel).read_text().splitlines(True),
                                                "a/" + rel, "b/" + rel)) for rel, old in before.items())


# the announcement: a log call in SpecDecodeBaseProposer.__init__ (llm_base_proposer.py:74-87, the V1
# proposers' base; the module has `logger`, :70)
ANNOUNCE = (V1_BASE, "        self._share_mtp_indices = False\n", MARKER)
# behaviour in V2's EagleSpeculator.load_draft_model (gpu/spec_decode/eagle/speculator.py:13-18)
ACT_V2 = (V2_SPECULATOR, "    ) -> nn.Module:\n", "        self.draft_loads = getattr(self, 'draft_loads', 0) + 1\n")
# behaviour in SpecDecodeBaseProposer.propose (llm_base_proposer.py:511, :532) and NgramProposer.propose
# (ngram_proposer.py:138, :148)
ACT_BASE = (V1_BASE, "        self._last_draft_probs = None\n", "        self.proposals = getattr(self, 'proposals', 0) + 1\n")
ACT_NGRAM = (V1_NGRAM, "        assert num_speculative_tokens <= self.k\n", "        self.proposals = getattr(self, 'proposals', 0) + 1\n")


def run(site, diff, env=None):
    return vp.run(LocalHost(), sys.executable, FEATURE, ["--speculative-config", SPEC], env or {},
                  vllm_path=str(site), patch_diff=diff)


def by_class(r):
    return {e["class"]: e for e in r["hunks"]}


def codes(r, severity=None):
    return [f["code"] for f in r["findings"] if severity is None or f["severity"] == severity]


def test_a_v2_hunk_is_dead_while_v1_runs_and_reachable_when_v2_runs(tmp_path):
    site = site_of(tmp_path)
    diff = patch(site, [ANNOUNCE, ACT_V2])
    # VLLM_USE_V2_MODEL_RUNNER=0 decides (config/vllm.py:748-750): V1 runs, EagleProposer
    r = run(site, diff, {"VLLM_USE_V2_MODEL_RUNNER": "0"})
    assert r["runner"]["runner"] == "v1" and r["proposer"]["class"] == "EagleProposer"
    h = by_class(r)
    assert set(h) == {"SpecDecodeBaseProposer", "EagleSpeculator"}
    act, mark = h["EagleSpeculator"], h["SpecDecodeBaseProposer"]
    assert (act["role"], act["function"], act["reach"]) == ("behaviour", "load_draft_model", "not reachable")
    assert "V1 model runner" in act["reason"] and "VLLM_USE_V2_MODEL_RUNNER=0" in act["reason"]
    assert (mark["role"], mark["function"], mark["reach"]) == ("marker", "__init__", "reachable")
    # the marker alone would say reachable (it is on EagleProposer's MRO); the behaviour decides
    assert r["verdict"] == "dead" and r["exit_code"] == 1
    assert codes(r, "error") == ["DS618"] and "DS601" not in codes(r)
    dead = next(f for f in r["findings"] if f["code"] == "DS618")
    assert "EagleSpeculator.load_draft_model" in dead["message"] and "V1 model runner" in dead["message"]
    # unset, eagle3 with Triton runs V2 (config/vllm.py:748-767): the same hunk runs, the announcement does not
    for env in ({}, {"VLLM_USE_V2_MODEL_RUNNER": "1"}):
        r = run(site, diff, env)
        assert r["runner"]["runner"] == "v2" and r["proposer"]["class"] == "EagleSpeculator"
        h = by_class(r)
        assert h["EagleSpeculator"]["reach"] == "reachable" and h["SpecDecodeBaseProposer"]["reach"] == "not reachable"
        assert r["verdict"] == "reachable" and r["exit_code"] == 0
        assert codes(r, "warning") == ["DS619"] and "DS601" not in codes(r)


def test_a_hunk_in_the_running_proposers_base_runs_and_another_methods_proposer_does_not(tmp_path):
    site = site_of(tmp_path)
    diff = patch(site, [ANNOUNCE, ACT_BASE, ACT_NGRAM])
    r = run(site, diff, {"VLLM_USE_V2_MODEL_RUNNER": "0"})
    assert r["proposer"]["class"] == "EagleProposer"
    h = by_class(r)
    # EagleProposer(SpecDecodeBaseProposer) (eagle.py:10): the base's propose runs
    init = [e for e in r["hunks"] if e["class"] == "SpecDecodeBaseProposer" and e["function"] == "__init__"]
    assert [(e["role"], e["reach"]) for e in init] == [("marker", "reachable")]
    base = [e for e in r["hunks"] if e["class"] == "SpecDecodeBaseProposer" and e["function"] == "propose"]
    assert len(base) == 1 and base[0]["reach"] == "reachable" and base[0]["role"] == "behaviour"
    # NgramProposer is built for method "ngram" only (gpu_model_runner.py:614-617), though its file is V1's
    ngram = h["NgramProposer"]
    assert ngram["function"] == "propose" and ngram["reach"] == "not reachable" and "ngram" in ngram["reason"]
    assert r["verdict"] == "reachable" and r["exit_code"] == 0 and not codes(r, "error")


def test_only_another_methods_proposer_is_dead(tmp_path):
    site = site_of(tmp_path)
    r = run(site, patch(site, [ANNOUNCE, ACT_NGRAM]), {"VLLM_USE_V2_MODEL_RUNNER": "0"})
    assert by_class(r)["NgramProposer"]["reach"] == "not reachable"
    assert r["verdict"] == "dead" and codes(r, "error") == ["DS618"]


def test_cli_patch_verdicts_and_a_diff_that_does_not_apply(tmp_path):
    site = site_of(tmp_path)
    f = tmp_path / "p.diff"
    f.write_text(patch(site, [ANNOUNCE, ACT_V2]))
    base = [sys.executable, "-m", "dynspec_cli", "preflight", "--feature", "vllm-eagle-speculator-example",
            "--python", sys.executable, "--env", f"PYTHONPATH={site}", "--patch", str(f)]
    r = subprocess.run(base + ["--env", "VLLM_USE_V2_MODEL_RUNNER=0", "--json", "--", "--speculative-config", SPEC],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 1, r.stderr
    doc = json.loads(r.stdout)
    assert [e["reach"] for e in doc["hunks"]] == ["reachable", "not reachable"]
    r = subprocess.run(base + ["--", "--speculative-config", SPEC], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "hunks of --patch" in r.stdout and "EagleSpeculator.load_draft_model" in r.stdout
    # the installed file no longer has the diff's text (another release's diff): one line, exit 2
    spec = site / V2_SPECULATOR
    spec.write_text(spec.read_text().replace("self.draft_loads = getattr(self, 'draft_loads', 0) + 1",
                                             "self.draft_loads = 7"))
    r = subprocess.run(base + ["--", "--speculative-config", SPEC], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "does not apply to" in r.stderr and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    with pytest.raises(PatchError, match="vllm 0.33.0"):
        run(site, f.read_text())
