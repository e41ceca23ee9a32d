"""Which sglang the inspector sees in real installs: a pip-installed wheel in a venv, an editable
checkout, two copies on sys.path, none at all; and how it fails (always one JSON document)."""
from __future__ import annotations

import json
import os
import sys

import pytest

from tests.inject.conftest import MARKER, base_args, link_tree, make_venv, pip_into, rewrite, run_inspector
from tests.support import sglang_patch

SITE_PACKAGES = f"lib/python{sys.version_info[0]}.{sys.version_info[1]}/site-packages"


@pytest.fixture(scope="module")
def venv_059(tmp_path_factory):
    """A venv with the real sglang 0.5.9 wheel pip-installed (no deps: nothing is imported)."""
    from tests.support import wheels

    root = tmp_path_factory.mktemp("venv059")
    py = make_venv(root / "venv")
    pip_into(py, "--no-deps", "--no-compile", str(wheels.wheel("0.5.9")))
    return py


@pytest.fixture(scope="module")
def editable_059(tmp_path_factory):
    """A checkout laid out like sglang's repo (python/pyproject.toml + python/sglang) installed with
    `pip install -e`, plus a stale build/lib/sglang left by an earlier non-editable build."""
    from tests.support import wheels

    root = tmp_path_factory.mktemp("editable059")
    proj = root / "checkout" / "python"
    proj.mkdir(parents=True)
    link_tree(wheels.unpacked("0.5.9") / "sglang", proj / "sglang")
    (proj / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools>=64"]\nbuild-backend = "setuptools.build_meta"\n\n'
        '[project]\nname = "sglang"\nversion = "0.5.9"\n\n'
        '[tool.setuptools.packages.find]\ninclude = ["sglang*"]\n')
    py = make_venv(root / "venv")
    pip_into(py, "--no-deps", "-e", str(proj))
    build = proj / "build" / "lib" / "sglang"
    build.mkdir(parents=True)
    (build / "__init__.py").write_text("")
    (build / "version.py").write_text('__version__ = "0.5.8"\n')
    return py, proj


@pytest.mark.wheels
def test_pip_installed_wheel_in_a_venv(venv_059):
    doc = run_inspector(base_args(), python=str(venv_059)).doc
    sg = doc["sglang"]
    site = venv_059.parent.parent / SITE_PACKAGES
    assert doc["ok"] and doc["python"]["in_venv"]
    assert sg["package_dir"] == str(site / "sglang") and sg["in_site_packages"]
    assert sg["version"] == sg["metadata_version"] == sg["version_py"] == "0.5.9"
    assert sg["dist_info"] == str(site / "sglang-0.5.9.dist-info")
    assert not sg["editable"] and sg["editable_evidence"] == [] and sg["build_copies"] == []
    assert sg["direct_url"]["url"].endswith(".whl")  # pip records where the wheel came from
    assert not sg["multiple_installs"]
    assert sg["modified_since_install"]["checked"] and sg["modified_since_install"]["changed"] == []


@pytest.mark.wheels
def test_venv_install_shadowed_by_another_copy(venv_059, site_copy):
    other = site_copy("0.5.23")
    sglang_patch.patch_sglang(other)
    doc = run_inspector(base_args(other), python=str(venv_059)).doc
    sg = doc["sglang"]
    site = venv_059.parent.parent / SITE_PACKAGES
    assert sg["multiple_installs"] and sg["version"] == "0.5.23"
    by = {i["package_dir"]: i for i in sg["installs"]}
    assert set(by) == {str(other / "sglang"), str(site / "sglang")}
    assert by[str(other / "sglang")]["active"] and by[str(other / "sglang")]["dist_version"] == "0.5.23"
    assert not by[str(site / "sglang")]["active"] and by[str(site / "sglang")]["dist_version"] == "0.5.9"
    assert doc["marker"]["hits"] and doc["flags"]["feature_flag"]["defined"]


@pytest.mark.wheels
def test_editable_checkout_and_its_stale_build_copy(editable_059):
    py, proj = editable_059
    doc = run_inspector(base_args(), python=str(py)).doc
    sg = doc["sglang"]
    assert sg["package_dir"] == str(proj / "sglang") and not sg["in_site_packages"]
    assert sg["editable"] and sg["source_root"] == str(proj)
    kinds = {e["kind"] for e in sg["editable_evidence"]}
    assert "direct_url.json" in kinds
    assert kinds & {"editable-finder", "import-hook", "path"}  # how setuptools wired it (.pth / finder)
    (du,) = [e for e in sg["editable_evidence"] if e["kind"] == "direct_url.json"]
    assert os.path.realpath(du["url"]) == os.path.realpath(proj)
    assert sg["version"] == "0.5.9"
    (build,) = sg["build_copies"]
    assert build == {"path": str(proj / "build" / "lib" / "sglang"), "version_py": "0.5.8", "on_sys_path": False}
    assert sg["modified_since_install"]["checked"] is False  # RECORD of an editable install lists no sources


@pytest.mark.wheels
def test_editable_checkout_patched_in_place(editable_059):
    py, proj = editable_059
    site = proj  # patch the checkout itself (site-style dir: proj/sglang)
    rec = sglang_patch.patch_sglang(site)
    try:
        doc = run_inspector(base_args(), python=str(py)).doc
        (hit,) = doc["marker"]["hits"]
        assert hit["file"] == str(rec.marker_line.file) and hit["line"] == rec.marker_line.line
        assert doc["flags"]["feature_flag"]["defined"]
    finally:  # the checkout is shared by this module's tests: link the original files back
        from tests.support import wheels

        for f in rec.files:
            f.unlink()
            os.link(wheels.unpacked("0.5.9") / f.relative_to(proj), f)


# --------------------------------------------------------------------------------------------------
# failures are data


@pytest.fixture(scope="module")
def bare_venv(tmp_path_factory):
    return make_venv(tmp_path_factory.mktemp("bare") / "venv")


def test_sglang_not_importable(bare_venv):
    run = run_inspector(base_args(dynamic=True), python=str(bare_venv))
    doc = run.doc
    assert run.returncode == 1 and doc["ok"] is False
    assert "not importable" in doc["error"] and doc["sglang"]["found"] is False
    assert doc["dynamic"]["ok"] is False and doc["dynamic"]["error"]["stage"] == "import"
    assert "exception_traceback" in doc and "Traceback" not in run.stderr


def test_only_a_namespace_directory_named_sglang(bare_venv, tmp_path):
    (tmp_path / "sglang" / "srt").mkdir(parents=True)  # e.g. cwd is the parent of a repo named sglang
    doc = run_inspector(base_args(), python=str(bare_venv), cwd=tmp_path).doc
    assert doc["ok"] is False and doc["sglang"]["namespace_package"] == [str(tmp_path / "sglang")]


@pytest.mark.parametrize("raw,message", [
    (None, "no input given"),
    ("{not json", "input is not valid JSON"),
    ("[1, 2]", "must be a JSON object"),
    ('{"flag": "--x"}', "marker_literal is required"),
    (json.dumps({"marker_literal": MARKER, "flags": "--speculative-eagle-topk 4"}), "flags must be list"),
    (json.dumps({"marker_literal": MARKER, "dynamic": "yes"}), "dynamic must be bool"),
])
def test_bad_input_gives_json_with_traceback(raw, message):
    run = run_inspector(raw)
    doc = run.doc
    assert run.returncode == 1 and doc["ok"] is False
    assert message in doc["error"]
    assert "Traceback (most recent call last)" in doc["exception_traceback"]
    assert run.stderr == ""  # nothing on stderr only


@pytest.mark.wheels
def test_unknown_keys_and_bad_pattern_are_warnings(site_copy):
    site = site_copy("0.5.9")
    doc = run_inspector(base_args(site, marker_pattern="(unclosed", colour="blue")).doc
    assert doc["ok"]
    assert any("colour" in w for w in doc["warnings"]) and any("marker_pattern" in w for w in doc["warnings"])


@pytest.mark.wheels
def test_output_written_by_sglang_on_fd1_goes_to_stderr(site_copy):
    """A release (or a sitecustomize) that prints while imported must not corrupt the JSON on stdout."""
    site = site_copy("0.5.23")
    init = site / "sglang" / "__init__.py"
    rewrite(init, 'import os, sys\nprint("noise from print")\nos.write(1, b"noise on fd 1\\n")\n'
            'sys.stdout.flush()\n' + init.read_text())
    # this interpreter has none of sglang's dependencies: the import fails, as data
    run = run_inspector(base_args(site, dynamic=True))
    doc = run.doc
    assert doc["ok"] and doc["dynamic"]["ok"] is False
    assert doc["dynamic"]["error"]["stage"] in ("import", "resolve")
    assert doc["dynamic"]["error"]["type"] in ("ModuleNotFoundError", "ImportError")
    assert "noise from print" in run.stderr and "noise on fd 1" in run.stderr
    assert "noise" not in run.stdout
