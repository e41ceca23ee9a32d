"""A python that imports a real published sglang, patched like a user would: a throwaway venv
whose site-packages holds a .pth pointing at a patched copy of the real wheel's files."""
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import sglang_patch, wheels


def make_sglang_python(tmp_path: Path, version: str, patch: str = "v2") -> tuple[str, Path, object]:
    site = tmp_path / f"site-{version}"
    shutil.copytree(wheels.unpacked(version), site, symlinks=True)
    rec = None
    if patch == "v2":
        rec = sglang_patch.patch_sglang(site)
    elif patch == "v1":
        rec = sglang_patch.patch_sglang(site, worker_module="eagle_worker", worker_class="EAGLEWorker")
    elif patch == "marker-only":
        rec = sglang_patch.patch_marker_only(site)
    elif patch is None:
        pass
    elif patch == "syntax":
        rec = sglang_patch.patch_sglang(site)
        rec = sglang_patch.introduce_syntax_error(site)
    venv = tmp_path / f"venv-{version}"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    sp = next((venv / "lib").glob("python3*/site-packages"))
    (sp / "patched-sglang.pth").write_text(str(site) + "\n")
    return str(venv / "bin" / "python"), site, rec


@pytest.fixture
def sglang_python(tmp_path):
    def make(version: str, patch: str = "v2"):
        return make_sglang_python(tmp_path, version, patch)
    return make
