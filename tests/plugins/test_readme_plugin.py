"""The minimal plugin of docs/plugins.md, as a user copies it: its pyproject.toml and module built into a
wheel and installed by the real pip, its feature file passed to preflight; and the real sglang
loading it (load_plugins() of the 0.5.23 release on CPU: the lines sglang logs, the hook applied)."""
import json
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from tests.support import plugins as P

PAGE = (Path(__file__).resolve().parents[2] / "docs" / "plugins.md").read_text(encoding="utf-8")
SPEC = ["--model-path", "/m", "--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", "/d",
        "--speculative-num-steps", "3", "--speculative-num-draft-tokens", "4", "--speculative-eagle-topk", "1"]


def block(name: str) -> str:
    m = re.search(rf"<!-- plugin-example:{name} -->\n```\w+\n(.*?)```", PAGE, re.S)
    assert m, name
    return m.group(1)


def readme_wheel(dest: Path) -> Path:
    project = tomllib.loads(block("pyproject"))
    (package,) = project["tool"]["setuptools"]["packages"]
    return P.build_wheel(dest, project["project"]["name"], project["project"]["version"],
                         {f"{package}/__init__.py": block("module")}, project["project"]["entry-points"])


def preflight(py, feat, env=()):
    r = subprocess.run([sys.executable, "-m", "dynspec_cli", "preflight", "--feature", str(feat), "--python", py, "--json",
                        *[f"--env={e}" for e in env], "--", *SPEC], capture_output=True, text=True, timeout=180)
    doc = json.loads(r.stdout)
    assert r.returncode == doc["exit_code"]
    return doc


@pytest.mark.wheels
def test_the_readme_plugin_is_reachable_and_its_allow_list_is_checked(tmp_path):
    py = P.sglang_venv(tmp_path, "0.5.12.post1")
    P.pip_install(py, readme_wheel(tmp_path / "w"))
    feat = tmp_path / "dsd-plugin.toml"
    feat.write_text(block("feature"))
    d = preflight(py, feat)
    assert d["verdict"] == "reachable" and d["findings"] == [], d["findings"]
    (p,) = d["patched"]
    lines = block("module").splitlines()
    assert p["line"] == 1 + next(i for i, ln in enumerate(lines) if "logger.info(" in ln)
    assert p["file"].endswith("site-packages/dsd_plugin/__init__.py")
    assert d["plugin"]["distribution"]["version"] == "0.1"
    d = preflight(py, feat, env=["SGLANG_PLUGINS=something_else"])
    assert d["verdict"] == "dead" and [f["code"] for f in d["findings"]] == ["DS214"]


LOAD = '''import logging
logging.basicConfig(level=logging.INFO, format="%(name)s: %(message)s")
from sglang.srt.plugins import load_plugins
load_plugins()
from sglang.srt.speculative.eagle_worker_v2 import EAGLEWorkerV2
print("HOOKED", getattr(EAGLEWorkerV2.__init__, "__wrapped__", None) is not None)
'''


@pytest.mark.realsglang
def test_real_sglang_loads_the_readme_plugin_and_honours_the_allow_list(tmp_path):
    from tests.support import sglang_env

    e = sglang_env.python_for("0.5.23")
    target = tmp_path / "plugin-site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index", "--target", str(target),
                    "--disable-pip-version-check", str(readme_wheel(tmp_path / "w"))], check=True, capture_output=True)
    r = subprocess.run(e.cmd("-c", LOAD), env=e.env(extra_paths=[target], SGLANG_PLUGINS=None),
                       capture_output=True, text=True, timeout=300)
    assert "sglang.srt.plugins: Loaded plugin dsd from group sglang.srt.plugins" in r.stderr, r.stderr[-3000:]
    assert "sglang.srt.plugins: Executed general plugin: dsd" in r.stderr
    assert ("Applied 1 hook(s) to sglang.srt.speculative.eagle_worker_v2.EAGLEWorkerV2.__init__ "
            "(from: plugin=dsd, dist=dsd-plugin)") in r.stderr
    assert "HOOKED True" in r.stdout
    r = subprocess.run(e.cmd("-c", LOAD), env=e.env(extra_paths=[target], SGLANG_PLUGINS="something_else"),
                       capture_output=True, text=True, timeout=300)
    assert "sglang.srt.plugins: Skipping plugin dsd (not in SGLANG_PLUGINS)" in r.stderr
    assert "Executed general plugin" not in r.stderr and "HOOKED False" in r.stdout
