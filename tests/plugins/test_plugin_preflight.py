"""Preflight of plugin-delivered patches against real published sglang wheels: small real plugin
distributions (wheels built here, installed by the real pip into a venv whose sglang is the real
wheel), each case with the verdict and the evidence line sglang's code implies.

Expected values are read by hand from the wheels: sglang/srt/plugins/__init__.py (entry_points(
group="sglang.srt.plugins"), SGLANG_PLUGINS split on "," and stripped, "Skipping plugin %s (not in
SGLANG_PLUGINS)"), hook_registry.py (setattr on the resolved class), and which process functions
call load_plugins(): 0.5.12.post1 scheduler.py:3999 inside run_scheduler_process; its
run_detokenizer_process (detokenizer_manager.py:419) does not; 0.5.23's does (line 552)."""
import json
import subprocess
import sys

import pytest

from tests.support import plugins as P

pytestmark = pytest.mark.wheels

V2_INIT = "sglang.srt.speculative.eagle_worker_v2.EAGLEWorkerV2.__init__"
SPEC = ["--model-path", "/m", "--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", "/d",
        "--speculative-num-steps", "3", "--speculative-num-draft-tokens", "4", "--speculative-eagle-topk", "1"]
MARKER = "Dynamic speculation disable enabled"


def plugin_code(target: str, hook: str = "AFTER") -> str:
    return f'''import logging

logger = logging.getLogger(__name__)


def _hook(*args, **kwargs):
    logger.info("{MARKER}: threshold=%d", 5)


def register():
    from sglang.srt.plugins.hook_registry import HookRegistry, HookType

    HookRegistry.register("{target}", _hook, HookType.{hook})
'''


def feature(tmp_path, target=V2_INIT, hook="after", processes=("scheduler",), extra=""):
    f = tmp_path / "feature.toml"
    f.write_text(f'''name = "dsd-plugin"
title = "Dynamic speculation disable, as a plugin"
[marker]
pattern = '{MARKER}: threshold=(?P<threshold>-?\\d+)'
literal = "{MARKER}"
[plugin]
entry_point = "dsd"
target = "{target}"
hook = "{hook}"
processes = {json.dumps(list(processes))}
{extra}''')
    return str(f)


def install(tmp_path, version, target=V2_INIT, hook="AFTER", name="dsd-plugin", dist_version="0.2", module="dsd_plugin"):
    py = P.sglang_venv(tmp_path, version) if not (tmp_path / f"venv-{version}").exists() else \
        str(tmp_path / f"venv-{version}" / "bin" / "python")
    whl = P.build_wheel(tmp_path / "wheels" / name, name, dist_version, {f"{module}/__init__.py": plugin_code(target, hook)},
                        {"sglang.srt.plugins": {"dsd": f"{module}:register"}})
    P.pip_install(py, whl)
    return py


def preflight(py, feat, *flags, env=()):
    cmd = [sys.executable, "-m", "dynspec_cli", "preflight", "--feature", feat, "--python", py, "--json",
           *[f"--env={e}" for e in env], "--", *(flags or SPEC)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
    assert r.stdout, r.stderr
    doc = json.loads(r.stdout)
    assert r.returncode == doc["exit_code"]
    doc["by_code"] = {f["code"]: f for f in doc["findings"]}
    return doc


def test_live_plugin_is_reachable_with_its_distribution_and_the_schedulers_loading_it(tmp_path):
    py = install(tmp_path, "0.5.12.post1")
    d = preflight(py, feature(tmp_path))
    assert d["verdict"] == "reachable" and d["exit_code"] == 0, d["findings"]
    assert d["worker"]["class"] == "EAGLEWorkerV2" and not d["findings"]
    pl = d["plugin"]
    assert pl["distribution"]["distribution"] == "dsd-plugin" and pl["distribution"]["version"] == "0.2"
    assert pl["distribution"]["metadata"].endswith("site-packages/dsd_plugin-0.2.dist-info")
    assert pl["distribution"]["kind"] == "dist-info" and pl["candidates"] == 1
    assert pl["processes"] == "scheduler yes (srt/managers/scheduler.py:3999)"
    assert pl["target_kind"] == "method"
    (p,) = d["patched"]  # the marker in the plugin's own code: logger.info(...) is line 7 of plugin_code
    assert p["file"].endswith("site-packages/dsd_plugin/__init__.py") and p["line"] == 7 and p["function"] == "_hook"


def test_allow_list_without_the_plugin_is_dead_with_sglangs_skip_line(tmp_path):
    py = install(tmp_path, "0.5.12.post1")
    d = preflight(py, feature(tmp_path), env=["SGLANG_PLUGINS=other_plugin"])
    assert d["verdict"] == "dead" and list(d["by_code"]) == ["DS214"]
    f = d["by_code"]["DS214"]
    assert f["message"] == ("SGLANG_PLUGINS=other_plugin does not list 'dsd': sglang logs "
                            "'Skipping plugin dsd (not in SGLANG_PLUGINS)'.")
    assert f["fix"] == "export SGLANG_PLUGINS=other_plugin,dsd (or unset SGLANG_PLUGINS)."
    # sglang strips the names it splits on ","
    assert preflight(py, feature(tmp_path), env=["SGLANG_PLUGINS=other_plugin, dsd "])["verdict"] == "reachable"


def test_stale_egg_info_first_on_sys_path_shadows_the_wheel(tmp_path):
    py = install(tmp_path, "0.5.12.post1")
    checkout = tmp_path / "checkout"  # an old `setup.py develop` of 0.1, when the hook lived in old_hooks
    P.stale_egg_info(checkout, "dsd-plugin", "0.1", {"sglang.srt.plugins": {"dsd": "dsd_plugin.old_hooks:register"}})
    d = preflight(py, feature(tmp_path), env=[f"PYTHONPATH={checkout}"])
    assert d["verdict"] == "dead"
    assert d["by_code"]["DS216"]["message"].startswith(
        f"the entry point sglang loads, dsd_plugin.old_hooks:register from dsd-plugin 0.1 ({checkout}/dsd_plugin.egg-info), "
        "names module dsd_plugin.old_hooks, which is not on the server's sys.path")
    dup = d["by_code"]["DS215"]["message"]
    assert dup.startswith(f"2 declare entry point 'dsd': sglang loads dsd-plugin 0.1 ({checkout}/dsd_plugin.egg-info); not dsd-plugin 0.2 (")
    assert dup.endswith("site-packages/dsd_plugin-0.2.dist-info).")
    assert d["plugin"]["distribution"]["kind"] == "egg-info"


def test_stale_egg_info_after_site_packages_is_only_a_warning(tmp_path):
    py = install(tmp_path, "0.5.12.post1")
    checkout = tmp_path / "checkout"
    P.stale_egg_info(checkout, "dsd-plugin", "0.1", {"sglang.srt.plugins": {"dsd": "dsd_plugin.old_hooks:register"}})
    (P.site_packages(py) / "zz-checkout.pth").write_text(f"{checkout}\n")  # .pth entries come after site-packages
    d = preflight(py, feature(tmp_path))
    assert d["verdict"] == "reachable" and list(d["by_code"]) == ["DS215"]
    assert d["plugin"]["distribution"]["version"] == "0.2"


def test_two_distributions_with_one_entry_point_name_the_later_one_is_kept(tmp_path):
    # sglang ep.load()s each and keeps plugins[ep.name] = the last one: here an unrelated dist
    # installed later in the same site-packages (importlib.metadata lists it by directory order)
    install(tmp_path, "0.5.12.post1")
    py = install(tmp_path, "0.5.12.post1", name="other-plugin", module="other_plugin",
                 target="sglang.srt.managers.scheduler.Scheduler.__init__")
    d = preflight(py, feature(tmp_path))
    assert "DS215" in d["by_code"]
    loaded = d["plugin"]["distribution"]["distribution"]
    others = d["by_code"]["DS215"]["message"]
    assert f"sglang loads {loaded} " in others and loaded in ("dsd-plugin", "other-plugin")


def test_hook_on_a_class_the_chosen_worker_does_not_use_is_dead(tmp_path):
    target = "sglang.srt.speculative.eagle_worker.EAGLEWorker.forward_batch_generation"
    py = install(tmp_path, "0.5.12.post1", target=target)
    d = preflight(py, feature(tmp_path, target=target))
    assert d["verdict"] == "dead" and d["worker"]["class"] == "EAGLEWorkerV2"
    f = d["by_code"]["DS201"]
    assert f["message"] == ("sglang 0.5.12.post1 will run EAGLEWorkerV2, not EAGLEWorker: the AFTER hook on "
                            f"{target} never runs.")
    assert 'Or hook EAGLEWorkerV2.forward_batch_generation instead (target = ' \
           '"sglang.srt.speculative.eagle_worker_v2.EAGLEWorkerV2.forward_batch_generation").' in f["fix"]


def test_before_hook_on_a_method_the_worker_overrides_without_super_is_dead(tmp_path):
    # 0.5.12.post1 standalone_worker_v2.py:138: StandaloneWorkerV2.__init__ never calls EAGLEWorkerV2.__init__
    py = install(tmp_path, "0.5.12.post1", hook="BEFORE")
    flags = [*SPEC]
    flags[flags.index("EAGLE3")] = "STANDALONE"
    d = preflight(py, feature(tmp_path, hook="before"), *flags)
    assert d["verdict"] == "dead" and d["worker"]["class"] == "StandaloneWorkerV2"
    assert d["by_code"]["DS211"]["message"] == (
        "sglang 0.5.12.post1 will run StandaloneWorkerV2, whose StandaloneWorkerV2.__init__ does not call "
        f"EAGLEWorkerV2.__init__: the BEFORE hook on {V2_INIT} never runs.")


DETOK = "sglang.srt.managers.detokenizer_manager.DetokenizerManager.handle_batch_token_id_out"


def test_process_that_never_loads_plugins_is_dead_then_live_where_it_does(tmp_path):
    py = install(tmp_path, "0.5.12.post1", target=DETOK)
    d = preflight(py, feature(tmp_path, target=DETOK, processes=["detokenizer"]))
    assert d["verdict"] == "dead" and list(d["by_code"]) == ["DS219"]
    f = d["by_code"]["DS219"]
    assert f["message"] == ("the detokenizer process never loads plugins in sglang 0.5.12.post1: run_detokenizer_process "
                            f"({f['file']}:419) does not call load_plugins().")
    assert f["file"].endswith("0.5.12.post1/sglang/srt/managers/detokenizer_manager.py")
    py = install(tmp_path, "0.5.23", target=DETOK)
    d = preflight(py, feature(tmp_path, target=DETOK, processes=["detokenizer"]))
    assert d["verdict"] == "reachable", d["findings"]
    assert d["plugin"]["processes"] == "detokenizer yes (srt/managers/detokenizer_manager.py:552)"


def test_missing_target_wrong_hook_type_not_installed_and_no_framework(tmp_path):
    py = install(tmp_path, "0.5.12.post1")
    d = preflight(py, feature(tmp_path, target="sglang.srt.speculative.eagle_worker_v2.EAGLEWorkerV2.draft_forward_v9"))
    assert d["verdict"] == "dead" and d["by_code"]["DS217"]["message"] == (
        "sglang.srt.speculative.eagle_worker_v2.EAGLEWorkerV2.draft_forward_v9: sglang.srt.speculative.eagle_worker_v2."
        "EAGLEWorkerV2 has no method draft_forward_v9 (nor any of its bases sglang defines) (sglang 0.5.12.post1).")
    d = preflight(py, feature(tmp_path, target="sglang.srt.speculative.eagle_worker_v2.EAGLEWorkerV2"))
    assert d["verdict"] == "dead" and "DS218" in d["by_code"]
    bare = P.sglang_venv(tmp_path / "bare", "0.5.12.post1")
    d = preflight(bare, feature(tmp_path))
    assert d["verdict"] == "dead" and list(d["by_code"]) == ["DS213"]
    assert d["by_code"]["DS213"]["message"] == ("no distribution on the server's sys.path declares entry point 'dsd' "
                                                "in group 'sglang.srt.plugins'.")
    old = install(tmp_path, "0.5.10.post1")
    d = preflight(old, feature(tmp_path))
    assert d["verdict"] == "dead" and d["by_code"]["DS212"]["message"] == (
        "sglang 0.5.10.post1 has no sglang.srt.plugins (plugins start in 0.5.11): entry point 'dsd' is never loaded.")


def test_unreadable_metadata_of_another_distribution_breaks_plugin_loading(tmp_path):
    py = install(tmp_path, "0.5.12.post1")
    site = P.site_packages(py)
    (site / "garbage-1.0.dist-info").mkdir()
    (site / "garbage-1.0.dist-info" / "METADATA").write_bytes(b"\xff\xfe\x00 not metadata")
    (site / "garbage-1.0.dist-info" / "entry_points.txt").write_bytes(b"\xff[sglang.srt.plugins\n= =\n")
    d = preflight(py, feature(tmp_path))
    # importlib.metadata.entry_points() itself raises (it reads every distribution's name): so does
    # sglang's load_plugins(), in every process that calls it
    assert d["verdict"] == "dead" and list(d["by_code"]) == ["DS220"]
    msg = d["by_code"]["DS220"]["message"]
    assert msg.startswith("importlib.metadata.entry_points() raises in the server's python (UnicodeDecodeError: ")
    assert f"{site}/garbage-1.0.dist-info: UnicodeDecodeError" in msg and msg.endswith("the server does not start.")
    r = subprocess.run([py, "-c", "from importlib.metadata import entry_points; entry_points(group='sglang.srt.plugins')"],
                       capture_output=True, text=True)
    assert r.returncode == 1 and "UnicodeDecodeError" in r.stderr  # what sglang's own call meets
