"""Where the data dynspec ships is found, however dynspec was installed, and the one TOML reader.

dynspec ships two kinds of data: its tables (`configs/`: releases, dispatch, log lines, findings,
features, demo logs) and the programs it runs in other interpreters (`dynspec_cli/inject/`, and each
engine's inspector in its folder, `dynspec_cli/engines/<name>/inspector/`). Their place differs by
install:
- a source tree or an editable install: `configs/` beside the package, at the repository root;
- a wheel (pip, pipx, the GPU recipe's wheelhouse): `dynspec_cli/configs/` inside the package
  (pyproject.toml's force-include puts it there);
- a zip (zipapp, shiv, a wheel on sys.path): inside the archive, where no path exists; the tree
  is copied once into the user's cache, since the tables are read (and stat'ed for the pickle
  cache) as files.
Every caller asks here, so a new install layout is one change in this file.
"""
from __future__ import annotations

import functools
import sys
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10 (Ubuntu 22.04's): the same parser, published as tomli
    import tomli as tomllib

__all__ = ["tomllib", "package_dir", "configs", "inject", "origin"]


@functools.lru_cache(maxsize=None)
def package_dir() -> Path:
    """The folder of the dynspec_cli package as files on disk."""
    here = Path(__file__).resolve().parent
    if here.is_dir():  # every install but a zip: no need to load importlib.resources (start-up time)
        return here
    from importlib import resources

    return _unpacked(resources.files("dynspec_cli"))


def _unpacked(root) -> Path:
    """A zipped package copied to ~/.cache/dynspec/pkg-<version>-<digest>/dynspec_cli: the copy is
    keyed on the archive's contents, so an upgraded archive never reads an older copy."""
    import hashlib
    import os
    import shutil
    import tempfile

    from dynspec_cli import __version__

    files: list[tuple[str, bytes]] = []

    def walk(node, rel: str) -> None:
        for child in node.iterdir():
            name = f"{rel}/{child.name}" if rel else child.name
            if child.is_dir():
                if child.name != "__pycache__":
                    walk(child, name)
            else:
                files.append((name, child.read_bytes()))

    walk(root, "")
    digest = hashlib.sha256()
    for name, data in sorted(files):
        digest.update(name.encode() + b"\0" + hashlib.sha256(data).digest())
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "dynspec"
    dest = cache / f"pkg-{__version__}-{digest.hexdigest()[:16]}" / "dynspec_cli"
    if not (dest / ".complete").exists():
        cache.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix="pkg-", dir=cache))
        for name, data in files:
            (tmp / name).parent.mkdir(parents=True, exist_ok=True)
            (tmp / name).write_bytes(data)
        (tmp / ".complete").write_text("")
        dest.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.rename(tmp, dest)
        except OSError:  # another dynspec unpacked it first: keep theirs
            shutil.rmtree(tmp, ignore_errors=True)
    return dest


@functools.lru_cache(maxsize=None)
def configs() -> Path:
    """dynspec's tables: `configs/` inside the installed package, else beside it (source tree)."""
    pkg = package_dir()
    for candidate in (pkg / "configs", pkg.parent / "configs"):
        if (candidate / "findings.toml").is_file():  # (the registry every install has)
            return candidate
    raise FileNotFoundError(f"dynspec's tables (configs/) are missing: looked in {pkg / 'configs'} and "
                            f"{pkg.parent / 'configs'}; reinstall dynspec")


def inject(name: str = "") -> Path:
    """A program run in the server's interpreter: a file or folder of dynspec_cli/inject (`name`), or
    one an engine ships in its folder (a path inside the package, e.g. "engines/sglang/inspector")."""
    path = package_dir() / name if "/" in name else package_dir() / "inject" / name
    if not path.exists():
        raise FileNotFoundError(f"dynspec_cli/{name if '/' in name else 'inject/' + name} is missing; reinstall dynspec")
    return path


def origin() -> str:
    """Where this dynspec's tables come from, and how it was installed, for `dynspec --version`."""
    cfg = configs()
    if not Path(__file__).resolve().parent.is_dir():
        kind = "a zipped install, unpacked into the cache"
    elif cfg.parent == package_dir():
        kind = "an installed wheel"
    else:
        kind = "a source tree or an editable install"
    return f"tables {cfg} ({kind})"
