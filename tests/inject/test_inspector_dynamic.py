"""The inspector's dynamic route under interpreters that really import sglang (tests.support.sglang_env):
sglang's own argument resolution and its own create_worker, with worker modules intercepted.
Expected values: shared/reference/cpu-dryrun.md §1, §3 and §4 (observed with the same releases)."""
from __future__ import annotations

import json
import subprocess

import pytest

from dynspec_cli.engines.sglang.knowledge import knowledge
from tests.inject.conftest import FLAG, base_args, run_inspector
from tests.support import sglang_patch

pytestmark = [pytest.mark.realsglang, pytest.mark.wheels]

TINY_LLAMA = {
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64, "intermediate_size": 128,
    "num_attention_heads": 4, "num_key_value_heads": 4, "num_hidden_layers": 2, "vocab_size": 1000,
    "max_position_embeddings": 2048, "rms_norm_eps": 1e-06, "hidden_act": "silu", "torch_dtype": "float16",
    "bos_token_id": 1, "eos_token_id": 2,
}


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    """Argument resolution reads config.json of the target and draft paths (no weights needed)."""
    d = tmp_path_factory.mktemp("tiny-llama")
    (d / "config.json").write_text(json.dumps(TINY_LLAMA))
    return d


def sglang_python(version: str):
    from tests.support import sglang_env

    try:
        return sglang_env.python_for(version)
    except (sglang_env.SglangEnvError, OSError) as e:  # the env is built by tests.support.sglang_env
        pytest.skip(f"no interpreter importing sglang=={version}: {e}")


def eagle_flags(model, algo="EAGLE3", topk=None, *extra):
    flags = ["--model-path", str(model), "--speculative-algorithm", algo, "--speculative-draft-model-path", str(model),
             "--speculative-num-steps", "3", "--speculative-num-draft-tokens", "16"]
    if topk is not None:
        flags += ["--speculative-eagle-topk", str(topk)]
    return flags + list(extra)


def dynamic(version, flags, env=None, site=None, **kw):
    e = sglang_python(version)
    args = base_args(site, dynamic=True, flags=flags, env=env or {}, **kw)
    doc = run_inspector(args, python=str(e.python), env=e.env(SGLANG_ENABLE_SPEC_V2=None), timeout=600).doc
    assert doc["ok"], doc["error"]
    assert doc["sglang"]["version"] == version
    return doc


def warnings_of(dyn):
    return [r["message"] for r in dyn["log"] if r["level"] == "WARNING"]


CASES_059 = [
    # (algo, topk, SGLANG_ENABLE_SPEC_V2, disable_overlap_schedule, worker module, class) — cpu-dryrun.md §4
    ("EAGLE3", 4, None, True, "eagle_worker", "EAGLEWorker"),
    ("EAGLE3", 1, "True", False, "eagle_worker_v2", "EAGLEWorkerV2"),
    ("STANDALONE", 1, "True", False, "standalone_worker_v2", "StandaloneWorkerV2"),
]


@pytest.mark.parametrize("algo,topk,v2,dos,module,cls", CASES_059)
def test_059_resolution_and_worker(model_dir, algo, topk, v2, dos, module, cls):
    doc = dynamic("0.5.9", eagle_flags(model_dir, algo, topk), env={"SGLANG_ENABLE_SPEC_V2": v2})
    dyn = doc["dynamic"]
    assert dyn["ok"], dyn["error"]
    assert dyn["resolution_api"] == "prepare_server_args (__post_init__)"
    r = dyn["resolved"]
    assert r["disable_overlap_schedule"] is dos and r["speculative_algorithm"] == algo
    assert r["speculative_eagle_topk"] == topk and r["max_running_requests"] == 48
    assert r["speculative_num_draft_tokens"] == (4 if topk == 1 else 16)  # adjusted to steps + 1 when topk == 1
    w = dyn["worker"]
    assert (w["module"], w["class"], w["placeholder"]) == (f"sglang.srt.speculative.{module}", cls, True)
    assert w["exists"] and w["file"].endswith(f"sglang/srt/speculative/{module}.py")
    names = [c["name"] for c in w["mro"]["classes"]]
    assert names[:len(knowledge().mro("0.5.9", cls))] == knowledge().mro("0.5.9", cls)
    msgs = warnings_of(dyn)
    assert any(m.startswith("Max running requests is reset to 48") for m in msgs)
    if dos:
        assert any(m.startswith("Overlap scheduler is disabled when spec v2 is off") for m in msgs)
    else:
        assert any(m.startswith("Spec v2 is enabled for eagle/eagle3") for m in msgs)


def test_059_topk_gt1_with_spec_v2_is_a_value_error(model_dir):
    dyn = dynamic("0.5.9", eagle_flags(model_dir, "EAGLE3", 4), env={"SGLANG_ENABLE_SPEC_V2": "True"})["dynamic"]
    assert not dyn["ok"] and dyn["error"]["stage"] == "resolve" and dyn["error"]["type"] == "ValueError"
    assert dyn["error"]["message"] == "Spec v2 currently only supports topk = 1 for speculative decoding."
    # the warning logged before the raise is kept
    assert any(m.startswith("Spec v2 is enabled for eagle/eagle3") for m in warnings_of(dyn))


@pytest.mark.parametrize("extra,v2,dos,module,cls", [
    ([], None, False, "eagle_worker_v2", "EAGLEWorkerV2"),
    ([], "False", False, "eagle_worker_v2", "EAGLEWorkerV2"),  # the env var no longer exists
    (["--enable-multi-layer-eagle"], None, False, "multi_layer_eagle_worker_v2", "MultiLayerEagleWorkerV2"),
])
def test_0523_resolution_and_worker(model_dir, extra, v2, dos, module, cls):
    doc = dynamic("0.5.23", eagle_flags(model_dir, "EAGLE3", 1 if extra else 4, *extra),
                  env={"SGLANG_ENABLE_SPEC_V2": v2})
    dyn = doc["dynamic"]
    assert dyn["ok"], dyn["error"]
    assert dyn["resolution_api"] == "resolve_once + resolving_view"
    assert dyn["resolved"]["disable_overlap_schedule"] is dos
    w = dyn["worker"]
    assert (w["module"], w["class"]) == (f"sglang.srt.speculative.{module}", cls) and w["exists"]
    names = [c["name"] for c in w["mro"]["classes"]]
    assert names[:len(knowledge().mro("0.5.23", cls))] == knowledge().mro("0.5.23", cls)
    assert not doc["env_defaults"]["SGLANG_ENABLE_SPEC_V2"]["present"]


def test_0523_device_cpu_turns_overlap_off(model_dir):
    dyn = dynamic("0.5.23", eagle_flags(model_dir, "EAGLE3", 4, "--device", "cpu"))["dynamic"]
    assert dyn["ok"] and dyn["flags"][-2:] == ["--device", "cpu"]  # no --device cuda added
    assert dyn["resolved"]["disable_overlap_schedule"] is True
    assert "Overlap schedule is not implemented for speculative decoding on CPU." in warnings_of(dyn)
    assert dyn["worker"]["class"] == "EAGLEWorkerV2"


@pytest.mark.parametrize("version", ["0.5.9", "0.5.23"])
def test_patched_flag_resolves_and_unpatched_rejects_it(model_dir, tmp_path, version):
    e = sglang_python(version)
    site = e.patched_copy(tmp_path / "patched")
    sglang_patch.patch_sglang(site)
    flags = eagle_flags(model_dir, "EAGLE3", 1, FLAG, "8")
    doc = dynamic(version, flags, env={"SGLANG_ENABLE_SPEC_V2": "True"}, site=site)
    assert doc["sglang"]["package_dir"] == str(site / "sglang") and doc["sglang"]["multiple_installs"]
    dyn = doc["dynamic"]
    assert dyn["ok"], dyn["error"]
    assert dyn["imported_from"] == str(site / "sglang")
    assert dyn["resolved"]["speculative_disable_batch_threshold"] == 8
    assert dyn["worker"]["class"] == "EAGLEWorkerV2"
    assert dyn["worker"]["file"] == str(site / "sglang/srt/speculative/eagle_worker_v2.py")
    (hit,) = doc["marker"]["hits"]
    assert hit["file"] == dyn["worker"]["file"]  # the patched class is the one create_worker picks

    dyn = dynamic(version, flags, env={"SGLANG_ENABLE_SPEC_V2": "True"})["dynamic"]
    assert not dyn["ok"] and dyn["error"]["type"] == "SystemExit" and dyn["error"]["stage"] == "resolve"
    assert "unrecognized arguments: --speculative-disable-batch-threshold 8" in dyn["error"]["message"]


_REAL_OPTIONS = r"""
import argparse, json, warnings
warnings.filterwarnings("ignore")
from sglang.srt.server_args import ServerArgs
p = argparse.ArgumentParser()
ServerArgs.add_cli_args(p)
print(json.dumps(sorted(o for o in p._option_string_actions if o not in ("-h", "--help"))))
"""


@pytest.mark.parametrize("version", ["0.5.9", "0.5.23"])
def test_static_flags_equal_the_real_parser(version):
    e = sglang_python(version)
    proc = subprocess.run([str(e.python), "-c", _REAL_OPTIONS], capture_output=True, text=True, env=e.env(),
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    real = set(json.loads(proc.stdout.strip().splitlines()[-1]))
    doc = run_inspector(base_args(list_flags=True), python=str(e.python), env=e.env()).doc
    assert set(doc["flags"]["options"]) == real
