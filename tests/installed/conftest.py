"""dynspec as its users install it (issue 28): the built wheel, installed non-editable into a fresh
venv of every Python the package declares, driven through the installed `dynspec` console script.

The distributions come from $DYNSPEC_DIST when .ci/run built them (`python -m build`, `twine
check`), else they are built here once per session. The interpreters are found in pyenv
(`pyenv root`/versions/X.Y.*) or on PATH (pythonX.Y), or named by $DYNSPEC_PYTHON_3_10 and the like;
one that is missing is skipped with the reason printed. The venvs install dynspec's dependencies
from the package index, as pip and pipx do for a user (pip's own cache keeps it quick)."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dynspec_cli.resources import tomllib

REPO = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))


def declared_pythons() -> list[str]:
    """The X.Y of every `Programming Language :: Python :: X.Y` classifier (what the package promises)."""
    return [m.group(1) for c in PYPROJECT["project"].get("classifiers", [])
            if (m := re.fullmatch(r"Programming Language :: Python :: (3\.\d+)", c))]


def find_python(version: str) -> tuple[str | None, str]:
    """(path, "") of a CPython X.Y, or (None, why not)."""
    named = os.environ.get("DYNSPEC_PYTHON_" + version.replace(".", "_"))
    if named:
        return named, ""
    try:
        root = Path(subprocess.run(["pyenv", "root"], capture_output=True, text=True, timeout=30).stdout.strip())
    except (OSError, subprocess.SubprocessError):
        root = Path.home() / ".pyenv"
    builds = [p for p in (root / "versions").glob(f"{version}.*") if re.fullmatch(rf"{re.escape(version)}\.\d+", p.name)]
    for build in sorted(builds, key=lambda p: int(p.name.rsplit(".", 1)[1]), reverse=True):
        exe = build / "bin" / f"python{version}"
        if exe.exists():
            return str(exe), ""
    on_path = shutil.which(f"python{version}")
    if on_path:
        return on_path, ""
    return None, (f"no CPython {version} on this machine (none in {root}/versions, no python{version} on PATH; "
                  f"set DYNSPEC_PYTHON_{version.replace('.', '_')} to one)")


def _newest(folder: Path, pattern: str) -> Path:
    found = sorted(folder.glob(pattern), key=lambda p: p.stat().st_mtime)
    if not found:
        raise FileNotFoundError(f"no {pattern} in {folder}")
    return found[-1]


@pytest.fixture(scope="session")
def dist(tmp_path_factory) -> dict[str, Path]:
    """The wheel and the sdist users get: .ci/run's ($DYNSPEC_DIST), or built from this tree now."""
    given = os.environ.get("DYNSPEC_DIST")
    if given:
        folder = Path(given)
    else:
        folder = tmp_path_factory.mktemp("dist")
        r = subprocess.run([sys.executable, "-m", "build", "--outdir", str(folder), str(REPO)],
                           capture_output=True, text=True, timeout=600)
        assert r.returncode == 0, f"python -m build failed (pip install build):\n{r.stdout[-2000:]}{r.stderr[-3000:]}"
    version = PYPROJECT["project"]["version"]
    return {"wheel": _newest(folder, f"dynspec_cli-{version}-py3-none-any.whl"),
            "sdist": _newest(folder, f"dynspec_cli-{version}.tar.gz")}


class Installed:
    """One fresh venv with the wheel installed: `run(...)` runs its `dynspec` console script."""

    def __init__(self, version: str, python: str, venv: Path, seconds: float):
        self.version, self.python, self.venv, self.install_s = version, python, venv, seconds
        self.dynspec = str(venv / "bin" / "dynspec")
        self.interpreter = str(venv / "bin" / "python")

    def run(self, *args: str, timeout: float = 180, cwd=None, env=None) -> subprocess.CompletedProcess:
        # cwd outside the repository and no PYTHONPATH (a developer's, pointing at a source tree):
        # nothing of the source tree may be importable by accident
        return subprocess.run([self.dynspec, *args], capture_output=True, text=True, timeout=timeout,
                              cwd=cwd or self.venv, env={**user_env(), **(env or {})})

    def popen(self, *args: str, cwd=None) -> subprocess.Popen:
        return subprocess.Popen([self.dynspec, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                cwd=cwd or self.venv, env=user_env())


def user_env() -> dict[str, str]:
    """This environment as a user's shell has it: without the PYTHONPATH a checkout's tests may run under."""
    return {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}


_venvs: dict[str, Installed] = {}


@pytest.fixture(scope="session", params=declared_pythons(), ids=lambda v: f"py{v}")
def installed(request, dist, tmp_path_factory) -> Installed:
    version = request.param
    if version in _venvs:
        return _venvs[version]
    python, why = find_python(version)
    if python is None:
        pytest.skip(why)
    venv = tmp_path_factory.mktemp(f"venv-{version}")
    t0 = time.monotonic()
    subprocess.run([python, "-m", "venv", str(venv)], check=True, timeout=300)
    r = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check",
                        str(dist["wheel"])], capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, f"pip install of the wheel into a {version} venv failed:\n{r.stderr[-3000:]}"
    inst = Installed(version, python, venv, time.monotonic() - t0)
    print(f"\ninstalled {dist['wheel'].name} into a fresh CPython {version} venv in {inst.install_s:.1f} s")
    _venvs[version] = inst
    return inst
