"""Preflight on a vLLM "install": the real published wheel's vllm/ package (its source members,
tests/support/vllm_wheels.py) copied to a temporary site directory and patched by the test, read by
the real inspector in a child interpreter (stdlib only, vllm never imported). Expected runners and
classes come from reading the wheels (file and line named below), not from configs/vllm/."""
import json
import os
import shutil
import subprocess
import sys

import pytest

from dynspec_cli.knowledge.features import load_feature
from dynspec_cli.transport.local import LocalHost
from dynspec_cli.engines.vllm import preflight as vp
from tests.support import vllm_wheels

pytestmark = pytest.mark.wheels
FEATURE = load_feature("vllm-eagle-speculator-example")
MARKER_LINE = '        logger.info("EagleSpeculator patch active: num_speculative_tokens=%d", 3)\n'


def install(tmp_path, version, patch_file, cls, triton=True):
    site = tmp_path / f"site-{version}"
    shutil.copytree(vllm_wheels.members(version), site)
    if triton:  # the server's triton: only its package __init__ (what find_spec looks at), from the real wheel
        shutil.copytree(vllm_wheels.package_members("triton", "3.5.1", ("triton/__init__.py",)) / "triton", site / "triton")
    path = site / patch_file
    import ast

    lines = path.read_text().splitlines(keepends=True)
    node = next(n for n in ast.walk(ast.parse("".join(lines))) if isinstance(n, ast.ClassDef) and n.name == cls)
    at = node.body[0].lineno - 1  # the patch goes first in the class body
    if isinstance(node.body[0], ast.Expr):  # after the docstring
        at = node.body[0].end_lineno
    new = ["    def __init__(self, *args, **kwargs):\n", "        super().__init__(*args, **kwargs)\n", MARKER_LINE]
    path.write_text("import logging\nlogger = logging.getLogger(__name__)\n" + "".join(lines[:at] + new + lines[at:]))
    return site


def run(site, flags, env=None):
    return vp.run(LocalHost(), sys.executable, FEATURE, flags, env or {}, vllm_path=str(site))


SPEC = '{"method": "eagle3", "model": "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B", "num_speculative_tokens": 3}'
SPEC_PD = '{"method": "eagle3", "model": "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B", "num_speculative_tokens": 3, "parallel_drafting": true}'
V2_FILE = "vllm/v1/worker/gpu/spec_decode/eagle/speculator.py"


def test_033_v2_config_is_reachable_and_fallback_config_is_dead(tmp_path):
    site = install(tmp_path, "0.33.0", V2_FILE, "EagleSpeculator")
    r = run(site, ["--speculative-config", SPEC])
    assert r["vllm_version"] == "0.33.0"
    assert r["runner"]["runner"] == "v2"
    assert r["proposer"]["class"] == "EagleSpeculator" and r["proposer"]["module"] == V2_FILE
    # 0.33 eagle/speculator.py: class EagleSpeculator(TargetDependentARSpeculator)
    assert r["proposer"]["mro"][:2] == ["EagleSpeculator", "TargetDependentARSpeculator"]
    assert r["patched"][0]["class"] == "EagleSpeculator" and r["patched"][0]["file"] == V2_FILE
    assert r["patch_on_path"] is True and r["verdict"] == "reachable" and r["exit_code"] == 0
    # vllm/config/vllm.py:3075-3080 (0.33): parallel_drafting for a method other than dflash/dspark
    # is an unsupported feature, so use_v2_model_runner logs the fallback and returns False.
    r = run(site, ["--speculative-config", SPEC_PD])
    assert r["runner"]["runner"] == "v1" and r["proposer"]["class"] == "EagleProposer"
    assert r["runner"]["log_line"].startswith("Model Runner V2 does not yet support")
    assert r["verdict"] == "dead" and r["exit_code"] == 1
    assert any(f["code"] == "DS601" and "parallel drafting" in (f["fix"] or "") for f in r["findings"])
    # VLLM_USE_V2_MODEL_RUNNER=0 decides before any support check (envs.py: maybe_convert_bool)
    r = run(site, ["--speculative-config", SPEC], {"VLLM_USE_V2_MODEL_RUNNER": "0"})
    assert r["runner"]["runner"] == "v1" and r["verdict"] == "dead"


def test_033_without_triton_falls_back(tmp_path):
    site = install(tmp_path, "0.33.0", V2_FILE, "EagleSpeculator", triton=False)
    r = run(site, ["--speculative-config", SPEC])
    assert r["runner"]["runner"] == "v1" and r["verdict"] == "dead"
    assert {"DS601", "DS607"} <= {f["code"] for f in r["findings"]}


def test_020_runs_v1_unless_opted_in(tmp_path):
    site = install(tmp_path, "0.20.0", V2_FILE, "EagleSpeculator")
    r = run(site, ["--speculative-config", SPEC])
    assert r["runner"]["runner"] == "v1" and r["verdict"] == "dead"
    r = run(site, ["--speculative-config", SPEC], {"VLLM_USE_V2_MODEL_RUNNER": "1"})
    assert r["runner"]["runner"] == "v2" and r["verdict"] == "reachable"


@pytest.mark.parametrize("version,status", [("0.10.1", "dead"), ("0.16.0", "dead"), ("0.17.0", "rejected")])
def test_disable_by_batch_size(tmp_path, version, status):
    # the patch in the V1 proposer, so only the knob can make it dead
    site = install(tmp_path, version, "vllm/v1/spec_decode/eagle.py", "EagleProposer")
    spec = json.dumps({"method": "eagle", "model": "d", "num_speculative_tokens": 3, "disable_by_batch_size": 4})
    r = run(site, ["--speculative-config", spec])
    assert r["knobs"] and r["knobs"][0]["status"] == status
    assert r["verdict"] == "dead" and any(f["code"] == "DS603" for f in r["findings"])


def test_marker_not_installed_and_no_vllm(tmp_path):
    site = tmp_path / "plain"
    shutil.copytree(vllm_wheels.members("0.33.0"), site)
    r = run(site, ["--speculative-config", SPEC])
    assert r["verdict"] == "dead" and any(f["code"] == "DS609" for f in r["findings"])
    empty = tmp_path / "empty"
    empty.mkdir()
    r = run(empty, ["--speculative-config", SPEC])
    assert r["verdict"] == "dead" and r["findings"][0]["code"] == "DS608"


def test_inspector_prints_json_on_bad_input():
    from dynspec_cli import inject

    FOLDER = inject.script("engines/vllm/inspector")  # shipped as one program (its modules, the shared one)

    p = subprocess.run([sys.executable, "-c", inject.program("engines/vllm/inspector"), "{not json"],
                       capture_output=True, text=True, timeout=30)
    doc = json.loads(p.stdout)
    assert p.returncode == 1 and doc["ok"] is False and "JSONDecodeError" in doc["error"]
    # stdlib only; vllm itself is imported by the dynamic route's function alone
    import ast

    def imported(node):
        return {(a.name if isinstance(n, ast.Import) else n.module or "").split(".")[0]
                for n in ast.walk(node) if isinstance(n, (ast.Import, ast.ImportFrom)) and getattr(n, "level", 0) == 0
                for a in (n.names if isinstance(n, ast.Import) else [n])}

    trees = {f.stem: ast.parse(f.read_text()) for f in FOLDER.glob("*.py")}
    resolve = next(n for n in trees["dynamic"].body if isinstance(n, ast.FunctionDef) and n.name == "resolve")
    others = [t for name, t in trees.items() if name != "dynamic"] + [
        ast.Module(body=[n for n in trees["dynamic"].body if n is not resolve], type_ignores=[])]
    shared = {"dynspec_cli"}  # run in place, the shared inspector module (bundled: a module of the program)
    assert set().union(*map(imported, others)) <= set(sys.stdlib_module_names) | shared
    assert imported(resolve) - set(sys.stdlib_module_names) == {"vllm"}


def test_bad_speculative_config_is_a_usage_error():
    with pytest.raises(vp.SpecConfigError, match="not valid JSON"):
        vp.server_settings(["--speculative-config", "{method: eagle}"])
    assert vp.server_settings(["--speculative_config={\"method\": \"mtp\"}", "-dp", "2"]) == ({"method": "mtp"}, {"data_parallel_size": 2})


def test_cli(tmp_path):
    site = install(tmp_path, "0.33.0", V2_FILE, "EagleSpeculator")
    base = [sys.executable, "-m", "dynspec_cli", "preflight", "--feature", "vllm-eagle-speculator-example",
            "--python", sys.executable, "--env", f"PYTHONPATH={site}"]
    r = subprocess.run(base + ["--json", "--", "--speculative-config", SPEC], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["proposer"]["class"] == "EagleSpeculator"
    r = subprocess.run(base + ["--", "--speculative-config", SPEC_PD], capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and "DEAD" in r.stdout and "EagleProposer" in r.stdout
    r = subprocess.run(base + ["--", "--speculative-config", "{nope"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "not valid JSON" in r.stderr and "Traceback" not in r.stderr


DYN_PY = os.environ.get("DYNSPEC_VLLM_DYNAMIC_PYTHON")


@pytest.mark.skipif(not DYN_PY, reason="the dynamic route needs a python with vllm and a CPU torch "
                    "(DYNSPEC_VLLM_DYNAMIC_PYTHON; see the report: ~40 packages installed with --no-deps)")
def test_dynamic_route_agrees_with_the_tables(tmp_path):
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64, "intermediate_size": 128,
        "num_attention_heads": 4, "num_key_value_heads": 4, "num_hidden_layers": 2, "vocab_size": 1000,
        "max_position_embeddings": 2048, "rms_norm_eps": 1e-6, "torch_dtype": "float32"}))
    spec = '{"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 3, "parallel_drafting": true}'
    r = vp.run(LocalHost(), DYN_PY, FEATURE, [str(model), "--skip-tokenizer-init", "--speculative-config", spec],
               {"VLLM_TARGET_DEVICE": "cpu", "HF_HUB_OFFLINE": "1"}, dynamic=True)
    d = r["dynamic"]
    assert d["ok"], d
    assert d["unsupported_v2"] == ["parallel drafting for EAGLE speculative decoding"]
    assert d["use_v2_model_runner"] is False and r["runner"]["runner"] == "v1" and d["static_agrees"]


def test_no_speculative_config_is_dead(tmp_path):
    # vllm/engine/arg_utils.py: speculative_config defaults to None, and with no SpeculativeConfig
    # the model runner builds no drafter, so a patched proposer never runs
    site = install(tmp_path, "0.33.0", V2_FILE, "EagleSpeculator")
    r = run(site, ["--tensor-parallel-size", "1"])
    assert r["verdict"] == "dead" and r["exit_code"] == 1
    assert [f["code"] for f in r["findings"] if f["severity"] == "error"] == ["DS602"]
