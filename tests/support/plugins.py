"""Small real plugin distributions for tests: a wheel built with zipfile (what a build backend writes
for a pure-Python project: the modules, METADATA, WHEEL, entry_points.txt, RECORD) and installed by
the real pip into a venv whose sglang is a real published wheel; and the stale metadata a
`setup.py develop` leaves in a source checkout (an .egg-info folder)."""
from __future__ import annotations

import base64
import hashlib
import os
import subprocess
import sys
import zipfile
from pathlib import Path

from tests.support import wheels


def sglang_venv(tmp: Path, version: str) -> str:
    """A venv (no pip of its own) whose sglang is the unpacked real wheel of `version` (read-only,
    via a .pth, as an install in another site dir is seen); the python's path."""
    venv = tmp / f"venv-{version}"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = next((venv / "lib").glob("python3*/site-packages"))
    (site / "sglang-wheel.pth").write_text(str(wheels.unpacked(version)) + "\n")
    return str(venv / "bin" / "python")


def _entry_points_txt(entry_points: dict[str, dict[str, str]]) -> str:
    return "".join(f"[{g}]\n" + "".join(f"{n} = {v}\n" for n, v in eps.items()) + "\n"
                   for g, eps in entry_points.items())


def build_wheel(dest: Path, name: str, version: str, files: dict[str, str],
                entry_points: dict[str, dict[str, str]]) -> Path:
    """A py3-none-any wheel of distribution `name` holding `files` (path in the wheel -> text)."""
    dest.mkdir(parents=True, exist_ok=True)
    stem = name.replace("-", "_")
    di = f"{stem}-{version}.dist-info"
    content = dict(files)
    content[f"{di}/METADATA"] = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
    content[f"{di}/WHEEL"] = "Wheel-Version: 1.0\nGenerator: dynspec-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    content[f"{di}/entry_points.txt"] = _entry_points_txt(entry_points)
    record = []
    for path, text in content.items():
        data = text.encode("utf-8")
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(data)}")
    record.append(f"{di}/RECORD,,")
    content[f"{di}/RECORD"] = "\n".join(record) + "\n"
    whl = dest / f"{stem}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(whl, "w", zipfile.ZIP_DEFLATED) as z:
        for path, text in content.items():
            z.writestr(path, text)
    return whl


def pip_install(python: str, whl: Path) -> None:
    """The real pip, installing into the venv of `python` (no index, no dependencies)."""
    subprocess.run([sys.executable, "-m", "pip", "--python", python, "install", "-q", "--no-deps", "--no-index",
                    "--disable-pip-version-check", str(whl)], check=True, capture_output=True, timeout=120)


def stale_egg_info(checkout: Path, name: str, version: str, entry_points: dict[str, dict[str, str]],
                   files: dict[str, str] = {}) -> Path:
    """A source checkout with the .egg-info an old `setup.py develop` left (and `files` beside it)."""
    egg = checkout / f"{name.replace('-', '_')}.egg-info"
    egg.mkdir(parents=True, exist_ok=True)
    (egg / "PKG-INFO").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    (egg / "entry_points.txt").write_text(_entry_points_txt(entry_points))
    (egg / "top_level.txt").write_text(name.replace("-", "_") + "\n")
    for path, text in files.items():
        (checkout / path).parent.mkdir(parents=True, exist_ok=True)
        (checkout / path).write_text(text)
    return egg


def site_packages(python: str) -> Path:
    return next((Path(python).parent.parent / "lib").glob("python3*/site-packages"))


def env_path(*dirs) -> str:
    return os.pathsep.join(str(d) for d in dirs)
