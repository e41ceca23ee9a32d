"""A vLLM patch shipped as a general plugin, or as a custom proposer class, judged before launch.

The server's "install" is the real published vllm wheel's source (tests/support/vllm_wheels.py) in a
site directory; the plugins are small real distributions (tests/support/plugins.py) that the real pip
installs there. Expected behaviour was read from the wheels, not from configs/vllm/plugins.toml:
- vllm 0.33.0 vllm/plugins/__init__.py load_plugins_by_group: `plugins[plugin.name] = plugin.load()`
  over entry_points(group="vllm.general_plugins"), so of two distributions declaring one name the
  last one discovered runs; a load error is logged ("Failed to load plugin %s") and skipped.
- vllm 0.33.0 vllm/envs.py:1170-1174: VLLM_PLUGINS is `os.environ["VLLM_PLUGINS"].split(",")`, no strip.
- vllm 0.33.0 vllm/config/speculative.py:1236-1239, 1335: method custom_class, class path in "model";
  vllm/v1/spec_decode/custom_class_proposer.py: import_module, getattr, user_class(vllm_config), and
  "must have a 'propose' method". vllm 0.34.0 ships no custom_class_proposer.py.
- vllm 0.33.0: the V2 runner's EAGLE proposer is EagleSpeculator (vllm/v1/worker/gpu/spec_decode/eagle/
  speculator.py:12, defines load_draft_model at :13); V1's is EagleProposer (vllm/v1/spec_decode/eagle.py:10)."""
import shutil
import subprocess
import sys

import pytest

from dynspec_cli.knowledge.features import load_feature
from dynspec_cli.transport.local import LocalHost
from dynspec_cli.engines.vllm import preflight as vp
from tests.support import plugins as P
from tests.support import vllm_wheels

pytestmark = pytest.mark.wheels

MARKER = "EagleSpeculator plugin active"
SPEC = '{"method": "eagle3", "model": "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B", "num_speculative_tokens": 3}'
V2_TARGET = "vllm.v1.worker.gpu.spec_decode.eagle.speculator.EagleSpeculator.load_draft_model"
V1_TARGET = "vllm.v1.spec_decode.eagle.EagleProposer.propose"  # inherited from SpecDecodeBaseProposer


def feature(tmp_path, target=V2_TARGET):
    """The feature file: the marker the patch logs and, unless target is None (a custom proposer class,
    no plugin), the [plugin] section of a general plugin that patches `target`."""
    f = tmp_path / "feature.toml"
    plugin = f'[plugin]\nentry_point = "eagle_patch"\ntarget = "{target}"\nhook = "patch"\n' if target else ""
    f.write_text(f'''name = "eagle-patch"
title = "A patch to vLLM's EAGLE speculator"
engine = "vllm"
[marker]
pattern = 'EagleSpeculator plugin active: k=(?P<k>\\d+)'
literal = "{MARKER}"
{plugin}''')
    return load_feature(str(f))


PLUGIN = f'''import logging
logger = logging.getLogger("eagle_patch")


def register():
    from vllm.v1.worker.gpu.spec_decode.eagle import speculator
    original = speculator.EagleSpeculator.load_draft_model

    def load_draft_model(self, *args, **kwargs):
        logger.info("{MARKER}: k=%d", 3)
        return original(self, *args, **kwargs)

    speculator.EagleSpeculator.load_draft_model = load_draft_model
'''


def site(tmp_path, version="0.33.0"):
    d = tmp_path / f"site-{version}"
    if not d.exists():
        shutil.copytree(vllm_wheels.members(version), d)
        # the server's triton (V2 needs it): its package __init__ from the real wheel, as test_vllm_preflight.py
        shutil.copytree(vllm_wheels.package_members("triton", "3.5.1", ("triton/__init__.py",)) / "triton", d / "triton")
    return d


def install(tmp_path, into, name="eagle-patch", version="0.2", module="eagle_patch", text=PLUGIN, ep="eagle_patch"):
    whl = P.build_wheel(tmp_path / f"wheels-{name}-{version}", name, version, {f"{module}.py": text},
                        {"vllm.general_plugins": {ep: f"{module}:register"}})
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index", "--disable-pip-version-check",
                    "--target", str(into), str(whl)], check=True, capture_output=True, timeout=120)
    return whl


def preflight(feat, where, flags, env=None):
    return vp.run(LocalHost(), sys.executable, feat, flags, env or {}, vllm_path=str(where))


def codes(r):
    return [f["code"] for f in r["findings"]]


def test_a_live_plugin_on_the_runner_that_runs_is_reachable(tmp_path):
    s = site(tmp_path)
    install(tmp_path, s)
    r = preflight(feature(tmp_path), s, ["--speculative-config", SPEC])
    assert r["runner"]["runner"] == "v2" and r["proposer"]["class"] == "EagleSpeculator"
    pl = r["plugin"]
    assert pl["loaded"]["distribution"] == "eagle-patch" and pl["loaded"]["version"] == "0.2"
    assert pl["loaded"]["metadata"].endswith("eagle_patch-0.2.dist-info") and pl["candidates"] == 1
    assert pl["target_found"]["class"] == "EagleSpeculator" and pl["target_found"]["line"] == 13
    assert r["patched"] == [] and r["patch_on_path"] is True, r["findings"]
    assert r["verdict"] == "reachable" and r["exit_code"] == 0, r["findings"]


def test_the_same_plugin_is_dead_when_vllm_falls_back_to_v1(tmp_path):
    s = site(tmp_path)
    install(tmp_path, s)
    r = preflight(feature(tmp_path), s, ["--speculative-config", SPEC], {"VLLM_USE_V2_MODEL_RUNNER": "0"})
    assert r["runner"]["runner"] == "v1" and r["proposer"]["class"] == "EagleProposer"
    (f,) = [f for f in r["findings"] if f["code"] == "DS601"]
    assert "patches EagleSpeculator" in f["message"] and "EagleProposer" in f["message"]
    assert r["verdict"] == "dead" and r["exit_code"] == 1


def test_an_inherited_method_is_a_target_that_exists(tmp_path):
    """EagleProposer.propose is defined on its base in vllm (0.33 vllm/v1/spec_decode/llm_base_proposer.py)."""
    s = site(tmp_path)
    install(tmp_path, s)
    r = preflight(feature(tmp_path, target=V1_TARGET), s, ["--speculative-config", SPEC], {"VLLM_USE_V2_MODEL_RUNNER": "0"})
    t = r["plugin"]["target_found"]
    assert "missing" not in t and t["class"] == "EagleProposer" and t["defined_in"] == "SpecDecodeBaseProposer"
    assert r["verdict"] == "reachable", r["findings"]


def test_the_allow_list_filters_it_and_is_not_stripped(tmp_path):
    s = site(tmp_path)
    install(tmp_path, s)
    feat = feature(tmp_path)
    r = preflight(feat, s, ["--speculative-config", SPEC], {"VLLM_PLUGINS": "other_plugin"})
    (f,) = [f for f in r["findings"] if f["code"] == "DS611"]
    assert f["fix"].startswith("export VLLM_PLUGINS=other_plugin,eagle_patch") and r["verdict"] == "dead"
    r = preflight(feat, s, ["--speculative-config", SPEC], {"VLLM_PLUGINS": "other_plugin, eagle_patch"})
    (f,) = [f for f in r["findings"] if f["code"] == "DS611"]
    assert "' eagle_patch' is not 'eagle_patch'" in f["message"] and "does not strip" in f["message"]
    assert r["verdict"] == "dead"
    r = preflight(feat, s, ["--speculative-config", SPEC], {"VLLM_PLUGINS": "other_plugin,eagle_patch"})
    assert "DS611" not in codes(r) and r["verdict"] == "reachable"


def test_not_installed_is_dead_and_names_what_the_group_has(tmp_path):
    s = site(tmp_path)
    install(tmp_path, s, name="other-plugin", module="other_plugin", ep="other")
    r = preflight(feature(tmp_path), s, ["--speculative-config", SPEC])
    (f,) = [f for f in r["findings"] if f["code"] == "DS610"]
    assert "'eagle_patch'" in f["message"] and "(it has: other)" in f["message"]
    assert "DS609" not in codes(r) and r["verdict"] == "dead"


def test_a_stale_second_distribution_later_on_sys_path_is_the_one_that_runs(tmp_path):
    s = site(tmp_path)
    install(tmp_path, s)  # the good one, first on sys.path
    checkout = tmp_path / "checkout"  # an old develop install of another name, declaring the same entry point
    P.stale_egg_info(checkout, "eagle-patch-legacy", "0.1", {"vllm.general_plugins": {"eagle_patch": "legacy_patch:register"}},
                     files={"legacy_patch.py": "def register():\n    pass\n"})
    r = preflight(feature(tmp_path), s, ["--speculative-config", SPEC], {"PYTHONPATH": str(checkout)})
    pl = r["plugin"]
    assert pl["candidates"] == 2 and pl["loaded"]["distribution"] == "eagle-patch-legacy"
    (amb,) = [f for f in r["findings"] if f["code"] == "DS612"]
    assert "vLLM keeps the last it discovers, eagle-patch-legacy 0.1" in amb["message"] and "not eagle-patch 0.2" in amb["message"]
    assert "DS609" in codes(r) and r["verdict"] == "dead"  # the code that runs has no marker


def test_an_entry_point_whose_function_is_gone_is_never_loaded(tmp_path):
    s = site(tmp_path)
    install(tmp_path, s, text="def other():\n    pass\n")
    r = preflight(feature(tmp_path), s, ["--speculative-config", SPEC])
    (f,) = [f for f in r["findings"] if f["code"] == "DS613"]
    assert "defines no register" in f["message"] and "Failed to load plugin eagle_patch" in f["message"]
    assert r["verdict"] == "dead"


def test_a_target_that_this_release_does_not_have(tmp_path):
    """vllm 0.34.0 ships no vllm/v1/spec_decode/eagle.py."""
    s = site(tmp_path, "0.34.0")
    install(tmp_path, s)
    r = preflight(feature(tmp_path, target=V1_TARGET), s, ["--speculative-config", SPEC])
    (f,) = [f for f in r["findings"] if f["code"] == "DS614"]
    assert f["message"].startswith(V1_TARGET) and "vllm 0.34.0" in f["message"]
    assert r["verdict"] == "dead"


CUSTOM = f'''import logging
logger = logging.getLogger(__name__)


class Base:
    def propose(self, *args, **kwargs):
        return None


class MyProposer(Base):
    def __init__(self, vllm_config):
        self.k = vllm_config.speculative_config.num_speculative_tokens
        logger.info("{MARKER}: k=%d", self.k)
'''


def custom_spec(path, method=True):
    return (f'{{"method": "custom_class", "model": "{path}", "num_speculative_tokens": 3}}' if method
            else f'{{"model": "{path}", "num_speculative_tokens": 3}}')


def test_a_custom_proposer_class_is_the_proposer_and_its_marker_is_reachable(tmp_path):
    s = site(tmp_path)
    (s / "my_proposer.py").write_text(CUSTOM)
    for method in (True, False):  # a dotted "model" without a method is custom_class too
        r = preflight(feature(tmp_path, target=None), s, ["--speculative-config", custom_spec("my_proposer.MyProposer", method)])
        assert r["proposer"]["class"] == "MyProposer" and r["proposer"]["custom_class"] == "my_proposer.MyProposer"
        assert r["proposer"]["line"] == 10 and r["patch_on_path"] is True
        assert r["verdict"] == "reachable", r["findings"]


@pytest.mark.parametrize("text,path,says", [
    (CUSTOM.replace("    def propose(self, *args, **kwargs):\n        return None\n", "    pass\n"),
     "my_proposer.MyProposer", "defines no propose()"),
    (CUSTOM.replace("def __init__(self, vllm_config)", "def __init__(self)").replace("vllm_config.speculative_config.num_speculative_tokens", "3"),
     "my_proposer.MyProposer", "takes no vllm_config"),
    (CUSTOM, "my_proposer.TheirProposer", "defines no class TheirProposer"),
    (CUSTOM, "missing_module.MyProposer", "no module missing_module on the server's sys.path"),
])
def test_a_custom_proposer_vllm_cannot_load_is_dead(tmp_path, text, path, says):
    s = site(tmp_path)
    (s / "my_proposer.py").write_text(text)
    r = preflight(feature(tmp_path, target=None), s, ["--speculative-config", custom_spec(path)])
    assert any(f["code"] == "DS615" and says in f["message"] for f in r["findings"]), r["findings"]
    assert r["verdict"] == "dead"


def test_a_release_without_custom_class(tmp_path):
    s = site(tmp_path, "0.34.0")
    (s / "my_proposer.py").write_text(CUSTOM)
    r = preflight(feature(tmp_path, target=None), s, ["--speculative-config", custom_spec("my_proposer.MyProposer")])
    (f,) = [f for f in r["findings"] if f["code"] == "DS615"]
    assert "vllm 0.34.0 has no vllm/v1/spec_decode/custom_class_proposer.py" in f["message"] and r["verdict"] == "dead"
