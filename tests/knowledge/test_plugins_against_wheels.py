"""configs/sglang/plugins.toml checked against every published sglang wheel: the framework's module,
entry point groups and environment variables are the wheel's own, and each process's function
exists. Which functions call load_plugins() is written by hand from reading the wheels (grep
load_plugins() in sglang/srt/managers/ and sglang/launch_server.py): schedulers and the main
process from 0.5.11, the detokenizer and the data-parallel controller from 0.5.22."""
from __future__ import annotations

import ast
import re

import pytest
from packaging.version import Version

from dynspec_cli.engines.sglang.knowledge import knowledge
from tests.support import wheels

pytestmark = pytest.mark.wheels

K = knowledge()


def source(version: str, module: str) -> str:
    path = wheels.unpacked(version).joinpath(*module.split("."))
    f = path.with_suffix(".py") if path.with_suffix(".py").exists() else path / "__init__.py"
    return f.read_text(encoding="utf-8")


def loads_plugins(text: str, function: str) -> bool:
    tree = ast.parse(text)
    body = [n for n in tree.body if (isinstance(n, ast.FunctionDef) and n.name == function) or
            (not function and not isinstance(n, (ast.FunctionDef, ast.ClassDef)))]
    assert body, function
    return any(isinstance(c, ast.Call) and getattr(c.func, "id", None) == "load_plugins"
               for n in body for c in ast.walk(n))


@pytest.mark.parametrize("version", K.releases)
def test_framework_row_is_the_wheels(version):
    fw = K.plugin_framework(version)
    has = wheels.unpacked(version).joinpath("sglang", "srt", "plugins", "__init__.py").exists()
    assert (fw is not None) == has == (Version(version) >= Version("0.5.11"))
    if fw is None:
        return
    init = source(version, fw.module)
    assert f'GENERAL_PLUGINS_GROUP = "{fw.group}"' in init
    assert f'PLATFORM_PLUGINS_GROUP = "{fw.platform_group}"' in init
    assert f"envs.{fw.allow_env}.get()" in init and f"envs.{fw.platform_env}.get()" in init
    assert re.search(rf"^\s+{fw.allow_env} = EnvStr\(\"\"\)", source(version, "sglang.srt.environ"), re.M)
    assert 'logger.info("Skipping plugin %s (not in SGLANG_PLUGINS)", ep.name)' in init
    assert fw.skipped_line.format(name="X") == "Skipping plugin X (not in SGLANG_PLUGINS)"
    hooks = source(version, "sglang.srt.plugins.hook_registry")
    assert sorted(re.findall(r'^\s+[A-Z]+ = "(\w+)"', hooks, re.M)) == sorted(fw.hook_types)


LOADS_FROM = {"main": "0.5.11", "scheduler": "0.5.11", "detokenizer": "0.5.22", "data_parallel_controller": "0.5.22"}


@pytest.mark.parametrize("version", [v for v in K.releases if Version(v) >= Version("0.5.11")])
def test_which_process_functions_load_plugins(version):
    got = {p.name: loads_plugins(source(version, p.module), p.function) for p in K.plugins.process}
    assert got == {name: Version(version) >= Version(first) for name, first in LOADS_FROM.items()}
