"""Real published sglang wheels for tests: downloaded once with `pip download --no-deps`,
cached outside the repo (never committed), unpacked once per version."""
from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

CACHE = Path(os.environ.get("DYNSPEC_TEST_CACHE", Path.home() / ".cache" / "dynspec-tests"))


@contextlib.contextmanager
def _locked(name: str):
    """Serialise downloads/unpacks across processes (tests and tools run concurrently)."""
    CACHE.mkdir(parents=True, exist_ok=True)
    with open(CACHE / f".{name}.lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def wheel(version: str) -> Path:
    """Path of the cached wheel of sglang==version, downloading it if needed."""
    with _locked(f"wheel-{version}"):
        return _wheel(version)


def _wheel(version: str) -> Path:
    dest = CACHE / "wheels"
    dest.mkdir(parents=True, exist_ok=True)
    found = sorted(dest.glob(f"sglang-{version}-*.whl"))
    if found:
        return found[0]
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary", ":all:",
         "--python-version", "3.11", "--platform", "manylinux_2_34_x86_64", "--platform", "any",
         "-d", str(dest), f"sglang=={version}"],
        check=True,
    )
    found = sorted(dest.glob(f"sglang-{version}-*.whl"))
    if not found:
        raise RuntimeError(f"pip download gave no wheel for sglang=={version}")
    return found[0]


def unpacked(version: str) -> Path:
    """Directory holding the unpacked wheel (site-packages layout: <dir>/sglang/...).
    Treat it as read-only: copy it before patching."""
    root = CACHE / "unpacked" / version
    done = root / ".complete"
    if done.exists():
        return root
    whl = wheel(version)
    with _locked(f"unpack-{version}"):
        if not done.exists():
            tmp = root.with_name(root.name + ".tmp")
            shutil.rmtree(tmp, ignore_errors=True)
            with zipfile.ZipFile(whl) as z:
                z.extractall(tmp)
            shutil.rmtree(root, ignore_errors=True)
            tmp.rename(root)
            done.touch()
    return root


def installed(version: str) -> Path:
    """A venv into which pip installed the real wheel of sglang==version (`pip install --no-deps`):
    the dist-info holds pip's RECORD (path,sha256=...,size per file), as on a user's machine, which
    an unpacked copy on a .pth does not. Cached; treat it as read-only: copy it before patching
    (copy_installed)."""
    root = CACHE / "installed" / version
    done = root / ".complete"
    if done.exists():
        return root
    whl = wheel(version)
    with _locked(f"install-{version}"):
        if not done.exists():
            shutil.rmtree(root, ignore_errors=True)
            subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True)
            subprocess.run([sys.executable, "-m", "pip", "--python", str(root / "bin" / "python"), "install", "-q",
                            "--no-deps", "--no-compile", "--disable-pip-version-check", str(whl)], check=True)
            done.touch()
    return root


def copy_installed(version: str, dest: Path) -> tuple[str, Path]:
    """A private copy of installed(version): (its python, its sglang package directory)."""
    shutil.copytree(installed(version), dest, symlinks=True)
    pkg = next((dest / "lib").glob("python3*/site-packages")) / "sglang"
    return str(dest / "bin" / "python"), pkg
