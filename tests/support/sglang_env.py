"""Interpreters that import the real published sglang releases, for tests on a CPU-only machine.

One shared base venv holds torch==2.14.1 + torchvision==0.29.1 (the CUDA builds served from this machine's
local index; they import and run on CPU, so no torchvision shim is needed) and a light pinned set
(``realsglang_requirements/base.txt``, the 0.5.9 pins).  Each release gets an overlay made with
``pip install --no-deps --target overlay/<version>``: sglang itself (the wheel cached by tests.support.wheels)
plus the deps whose pins differ by release (``realsglang_requirements/overlay-<version>.txt``, e.g.
transformers 5.x for the newer releases).  The overlay goes first on PYTHONPATH::

    e = sglang_env.python_for("0.5.9")
    subprocess.run([str(e.python), "-m", "sglang.launch_server", ...], env=e.env())

With these pins ``python -m sglang.launch_server ... --device cuda`` runs the release's real argument
resolution and stops where shared/reference/real-launcher-on-cpu.md says (0.5.9 at the uvicorn import,
0.5.12.post1 at sgl_kernel, 0.5.16/0.5.23 in the scheduler at CUDA init).  Nothing is shimmed.

Everything is cached under ``$DYNSPEC_TEST_CACHE`` (default ``~/.cache/dynspec-tests``) in ``sglang-env/``.
Builds are idempotent: an exclusive ``flock`` on ``sglang-env/.lock`` serialises concurrent builders, each
part is built in a temporary directory, renamed into place, and marked complete with a stamp holding the hash
of its requirement file (a changed file rebuilds that part).  A failed pip run raises :class:`SglangEnvError`
naming the command.  pip runs with ``--no-compile`` (imports compile only what they touch).

Measured 2026-12-02 on the 2-core box while other jobs kept its load average at 5-8: from an empty cache and an
empty pip cache, base venv 270 s (venv 20 s + pip 250 s), overlays 3-15 s each (0.5.9 3 s, 0.5.12.post1 13 s),
all four ready in 381 s including the wheel downloads.  Disk: base 5.6 GB (torch 1.2 GB + nvidia libs 3.2 GB +
triton 0.9 GB), overlays 28 MB (0.5.9) / 113 MB (0.5.12.post1) / 262 MB (0.5.16) / 256 MB (0.5.23).
"""
from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, Iterable, Iterator, Mapping, Optional, Sequence

from tests.support import wheels

RELEASES = ("0.5.9", "0.5.12.post1", "0.5.16", "0.5.23")
REQ_DIR = Path(__file__).resolve().parent / "realsglang_requirements"
STAMP = ".dynspec-complete"


class SglangEnvError(RuntimeError):
    """Building the environment failed; the message names the failing command and ends with its output."""


def cache_root() -> Path:
    return Path(os.environ.get("DYNSPEC_TEST_CACHE", Path.home() / ".cache" / "dynspec-tests")) / "sglang-env"


@dataclasses.dataclass(frozen=True)
class SglangEnv:
    version: str
    python: Path  # the base venv's interpreter
    overlay: Path  # --target dir holding sglang==version and its differing deps

    def env(self, extra_paths: Sequence[os.PathLike] = (), base: Optional[Mapping[str, str]] = None,
            **updates: Optional[str]) -> Dict[str, str]:
        """Environment for running ``self.python``: PYTHONPATH = extra_paths (e.g. a patched sglang copy),
        then the overlay.  ``base`` defaults to os.environ; keyword updates set (or, with None, remove) vars."""
        env = dict(os.environ if base is None else base)
        for k in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYTHONSTARTUP"):
            env.pop(k, None)
        env["PYTHONPATH"] = os.pathsep.join([str(p) for p in extra_paths] + [str(self.overlay)])
        env["PYTHONNOUSERSITE"] = "1"
        for k, v in updates.items():
            if v is None:
                env.pop(k, None)
            else:
                env[k] = v
        return env

    def cmd(self, *args: str) -> list:
        return [str(self.python), *args]

    @property
    def sglang_dir(self) -> Path:
        return self.overlay / "sglang"

    def patched_copy(self, dest: os.PathLike) -> Path:
        """A site-style dir ``dest/sglang`` that mirrors this release's sglang package with hard links
        (instant, no extra disk).  Edit it only with tests.support.sglang_patch, which replaces files
        instead of writing through the links.  Put ``dest`` first with ``env(extra_paths=[dest])``."""
        dest = Path(dest)
        if (dest / "sglang").exists():
            shutil.rmtree(dest / "sglang")
        dest.mkdir(parents=True, exist_ok=True)

        def link(src, dst):
            try:
                os.link(src, dst)
            except OSError:
                shutil.copy2(src, dst)

        # __pycache__ is linked too: .pyc files of unedited modules stay valid (same mtime/size), and Python
        # replaces stale ones atomically (new inode), so the shared overlay is never written through.
        shutil.copytree(self.sglang_dir, dest / "sglang", copy_function=link)
        return dest


# --------------------------------------------------------------------------------------------------


def _digest(*parts: bytes) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(p)
        h.update(b"\0")
    return h.hexdigest()[:16]


def _done(path: Path, digest: str) -> bool:
    stamp = path / STAMP
    return stamp.is_file() and stamp.read_text().strip() == digest


@contextlib.contextmanager
def _locked(root: Path) -> Iterator[None]:
    root.mkdir(parents=True, exist_ok=True)
    with open(root / ".lock", "a+") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _run(cmd: Sequence[str], log: Path, what: str) -> None:
    t0 = time.monotonic()
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    with open(log, "ab") as out:
        out.write(f"\n$ {' '.join(map(str, cmd))}\n".encode())
        out.flush()
        rc = subprocess.run(list(map(str, cmd)), stdout=out, stderr=subprocess.STDOUT, env=env,
                            stdin=subprocess.DEVNULL).returncode
        out.write(f"# exit {rc} after {time.monotonic() - t0:.1f}s\n".encode())
    if rc != 0:
        tail = "\n".join(
            ln for ln in log.read_text(errors="replace").splitlines()[-40:] if "is ignored: it is neither" not in ln
        )
        raise SglangEnvError(f"{what}: command failed with exit {rc}: {' '.join(map(str, cmd))}\n"
                             f"(full log: {log})\n{tail}")


def _fresh(path: Path) -> Path:
    tmp = path.with_name(path.name + ".building")
    if tmp.exists():
        shutil.rmtree(tmp)
    return tmp


def _swap_in(tmp: Path, path: Path, digest: str) -> None:
    (tmp / STAMP).write_text(digest + "\n")
    if path.exists():
        shutil.rmtree(path)
    tmp.rename(path)


def _base_python(root: Path) -> Path:
    return root / "base" / "bin" / "python"


def build_base(root: Optional[Path] = None) -> Path:
    """Build (once) the shared base venv; returns its python. Call with the lock held (python_for does)."""
    root = root or cache_root()
    digest = _digest((REQ_DIR / "base.txt").read_bytes(), (REQ_DIR / "base-constraints.txt").read_bytes(),
                     sys.version.encode())
    path = root / "base"
    if _done(path, digest):
        return _base_python(root)
    if sys.version_info[:2] != (3, 11):
        raise SglangEnvError(f"the sglang test env needs Python 3.11 (cp311 wheels); running {sys.version}")
    log = root / "build-base.log"
    log.write_text("")
    # a venv hard-codes its own path: build it where it lives; the stamp is written last.
    if path.exists():
        shutil.rmtree(path)
    _run([sys.executable, "-m", "venv", str(path)], log, "creating the base venv")
    _run([str(_base_python(root)), "-m", "pip", "install", "-q", "--no-input", "--no-compile",
          "-r", str(REQ_DIR / "base.txt")],
         log, "installing the base requirements")
    (path / STAMP).write_text(digest + "\n")
    return _base_python(root)


def build_overlay(version: str, root: Optional[Path] = None) -> Path:
    root = root or cache_root()
    python = build_base(root)
    req = REQ_DIR / f"overlay-{version}.txt"
    if not req.is_file():
        raise SglangEnvError(f"no pinned overlay requirements for sglang=={version}: {req} (known: {RELEASES})")
    whl = wheels.wheel(version)
    path = root / "overlay" / version
    digest = _digest(req.read_bytes(), whl.name.encode(), (root / "base" / STAMP).read_bytes())
    if _done(path, digest):
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = _fresh(path)
    log = root / f"build-overlay-{version}.log"
    log.write_text("")
    _run([str(python), "-m", "pip", "install", "-q", "--no-input", "--no-compile", "--no-deps",
          "--target", str(tmp),
          "-r", str(req), str(whl)], log, f"installing the sglang=={version} overlay")
    _swap_in(tmp, path, digest)
    return path


def python_for(version: str) -> SglangEnv:
    """Interpreter + PYTHONPATH that import the real published sglang==version (built once, cached)."""
    root = cache_root()
    with _locked(root):
        overlay = build_overlay(version, root)
    return SglangEnv(version=version, python=_base_python(root), overlay=overlay)


def build_all(versions: Iterable[str] = RELEASES) -> Dict[str, SglangEnv]:
    return {v: python_for(v) for v in versions}


def disk_usage(path: Optional[Path] = None) -> int:
    path = path or cache_root()
    total = 0
    seen = set()
    for dirpath, _, files in os.walk(path):
        for f in files:
            try:
                st = os.lstat(os.path.join(dirpath, f))
            except OSError:
                continue
            if (st.st_dev, st.st_ino) in seen:
                continue
            seen.add((st.st_dev, st.st_ino))
            total += st.st_blocks * 512
    return total


if __name__ == "__main__":  # python -m tests.support.sglang_env [VERSION...]
    t0 = time.monotonic()
    for v in sys.argv[1:] or RELEASES:
        t = time.monotonic()
        e = python_for(v)
        print(f"{v}: {e.python} PYTHONPATH={e.overlay} ({time.monotonic() - t:.1f}s)")
    print(f"total {time.monotonic() - t0:.1f}s, {disk_usage() / 1e9:.2f} GB under {cache_root()}")
