"""Run dynspec_cli/engines/sglang/inspector/ the way dynspec does: as a separate process under a real
interpreter (`python -c BOOTSTRAP`; the bundled program and its JSON input on stdin), against copies
of real published sglang wheels."""
from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Callable, Mapping, Optional, Union

import pytest

REPO = Path(__file__).resolve().parents[2]
INSPECTOR = REPO / "dynspec_cli" / "engines" / "sglang" / "inspector"

# the default cwd of inspector runs (sys.path[0] for `python -c`): a directory that holds no modules
EMPTY_CWD = Path(tempfile.mkdtemp(prefix="dynspec-inspector-cwd-"))

MARKER = "Dynamic speculation disable enabled"
PATTERN = r"Dynamic speculation disable enabled: threshold=(?P<threshold>-?\d+)"
FLAG = "--speculative-disable-batch-threshold"

PY310 = "/root/.pyenv/versions/3.10.13/bin/python3.10"
PY312 = "/root/.pyenv/versions/3.12.1/bin/python3.12"
PY38 = "/root/.pyenv/versions/3.8.18/bin/python3.8"

# releases across the changes that matter to the inspector: env var added (0.5.4.post1), default
# flipped (0.5.11), V1 workers deleted / arg_groups (0.5.13), flags from annotated fields (0.5.23)
VERSIONS = ("0.5.4.post1", "0.5.9", "0.5.11", "0.5.12.post1", "0.5.13", "0.5.23")


@dataclasses.dataclass
class Run:
    doc: dict
    stdout: str
    stderr: str
    returncode: int
    cmd: list


def clean_env(extra: Optional[Mapping[str, Optional[str]]] = None) -> dict:
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "VIRTUAL_ENV", "PYTHONDONTWRITEBYTECODE")}
    env["PYTHONNOUSERSITE"] = "1"
    for k, v in (extra or {}).items():
        if v is None:
            env.pop(k, None)
        else:
            env[k] = v
    return env


def run_inspector(args: Union[dict, str, None], *, python: str = sys.executable, env: Optional[Mapping] = None,
                  cwd: Optional[os.PathLike] = None, in_place: bool = False, host_env: Optional[Mapping] = None,
                  timeout: float = 300) -> Run:
    """Run the inspector; assert stdout is exactly one JSON document and no traceback went to stderr only.
    in_place: `python -m dynspec_cli.engines.sglang.inspector` from the repository instead of the bundle.
    host_env: environment sent on stdin, as preflight sends the server's (`env` is the process's own)."""
    from dynspec_cli import inject

    data = b"" if args is None else (args if isinstance(args, str) else json.dumps(args)).encode("utf-8")
    if in_place:
        cmd, stdin = [python, "-m", "dynspec_cli.engines.sglang.inspector"], data
        env = dict(env if env is not None else clean_env(), PYTHONPATH=str(REPO))
    else:
        cmd, stdin = inject.command(python), inject.stdin(inject.program("engines/sglang/inspector"), data, host_env)
    # cwd is sys.path[0] for `python -c`: default to a directory that holds no sglang
    proc = subprocess.run(cmd, input=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          env=dict(env) if env is not None else clean_env(), cwd=cwd or EMPTY_CWD,
                          timeout=timeout)
    out, err = proc.stdout.decode("utf-8", "replace"), proc.stderr.decode("utf-8", "replace")
    try:
        doc = json.loads(out)  # raises on anything after the document too
    except ValueError as e:
        raise AssertionError(f"stdout is not one JSON document ({e}):\n{out[:2000]}\n--- stderr:\n{err[-3000:]}")
    assert isinstance(doc, dict) and doc.get("schema") == "dynspec-inspector/1", out[:500]
    assert out.count("\n") == 1 and out.endswith("\n"), "more than one line on stdout"
    if "Traceback (most recent call last)" in err:
        assert doc.get("exception_traceback") or (doc.get("dynamic") or {}).get("error"), err[-3000:]
    assert proc.returncode == (0 if doc["ok"] else 1), (proc.returncode, doc.get("error"))
    return Run(doc, out, err, proc.returncode, cmd)


def base_args(site: Optional[os.PathLike] = None, **kw) -> dict:
    args = {"marker_literal": MARKER, "marker_pattern": PATTERN, "flag": FLAG}
    if site is not None:
        args["sglang_path"] = str(site)
    args.update(kw)
    return args


def link_tree(src: Path, dst: Path) -> Path:
    """Copy a tree with hard links (instant). Edit files only by replacing them (new inode), as
    tests.support.sglang_patch does and `rewrite` below does, never by writing through a link."""

    def link(a, b):
        try:
            os.link(a, b)
        except OSError:
            shutil.copy2(a, b)

    shutil.copytree(src, dst, copy_function=link, symlinks=True)
    return dst


def rewrite(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp-edit")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


@pytest.fixture
def site_copy(tmp_path) -> Callable[..., Path]:
    """site_copy(version, name=None) -> a private site-style dir (sglang/ + its dist-info) of the real wheel."""
    from tests.support import wheels

    def make(version: str, name: Optional[str] = None) -> Path:
        dst = tmp_path / (name or f"site-{version}")
        return link_tree(wheels.unpacked(version), dst)

    return make


def make_venv(path: Path, python: str = sys.executable) -> Path:
    """A bare venv (no pip inside: packages go in with the outer pip's --python)."""
    subprocess.run([python, "-m", "venv", "--without-pip", str(path)], check=True, env=clean_env())
    return path / "bin" / "python"


def pip_into(venv_python: Path, *args: str, cwd: Optional[os.PathLike] = None) -> None:
    env = clean_env({"PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_NO_INPUT": "1"})
    proc = subprocess.run([sys.executable, "-m", "pip", "--python", str(venv_python), "install", "-q", *args],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, cwd=cwd)
    if proc.returncode != 0:
        raise AssertionError(f"pip install {' '.join(args)} failed:\n{proc.stdout.decode(errors='replace')[-4000:]}")


def hits_in(doc: dict, suffix: str) -> list:
    return [h for h in doc["marker"]["hits"] if h["file"].endswith(suffix)]


def file_entry(doc: dict, path: Union[str, Path]) -> dict:
    path = os.path.abspath(str(path))
    for f in doc["files"]:
        if f["file"] == path:
            return f
    raise AssertionError(f"{path} not among checked files: {[f['file'] for f in doc['files']]}")
