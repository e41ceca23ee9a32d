"""Real published vllm wheels for tests, read member by member over HTTP range requests.

A vllm wheel is 240-490 MB. `pip download` of all the releases the tables cover (0.10-0.34,
~40 wheels, ~14 GB) measured ~50 MB/s here (vllm 0.33.0: 336 MB in 6.9 s), i.e. more than
five minutes of cold-cache CI and 14 GB of disk. A wheel is a zip whose central directory sits
at its end, and files.pythonhosted.org honours `Range`, so the test reads the central
directory and then only the members it needs (a few hundred KB per release) from the very
same published file: the URL and sha256 come from PyPI's JSON API. Extracted members are
cached under ~/.cache/dynspec-tests/vllm/<version>/ in site-packages layout (<dir>/vllm/...),
never committed. Set DYNSPEC_VLLM_WHEEL_DIR to a directory of downloaded wheels to read those
instead (no network)."""
from __future__ import annotations

import fnmatch
import functools
import io
import json
import os
import shutil
import time
import urllib.parse
import urllib.request
import zipfile
from pathlib import Path

from tests.support import wheels

CACHE = Path(os.environ.get("DYNSPEC_TEST_CACHE", Path.home() / ".cache" / "dynspec-tests")) / "vllm"
PYPI_JSON = "https://pypi.org/pypi/vllm/json"

# Everything the vllm tables and the inspector read; fnmatch patterns on member names.
MEMBERS = (
    "vllm/__init__.py", "vllm/version.py", "vllm/_version.py", "vllm/envs.py",
    "vllm/config/*.py", "vllm/engine/arg_utils.py",
    "vllm/v1/engine/core.py", "vllm/v1/core/sched/scheduler.py",
    "vllm/v1/spec_decode/*.py", "vllm/v1/spec_decode/*/*.py",
    "vllm/v1/worker/gpu_worker.py", "vllm/v1/worker/gpu_model_runner.py",
    "vllm/v1/worker/gpu/model_runner.py", "vllm/v1/worker/gpu/spec_decode/*.py",
    "vllm/v1/worker/gpu/spec_decode/*/*.py",
    "vllm/model_executor/models/llama_eagle3.py",
    "vllm-*.dist-info/METADATA",
)
_FORMAT = "1"  # bump when MEMBERS changes, so caches are refilled


def _locked(name: str):
    return wheels._locked(f"vllm-{name}")  # one lock helper for every test cache


def _get(url: str, headers: dict | None = None, tries: int = 4) -> bytes:
    for i in range(tries):
        try:
            req = urllib.request.Request(url, headers={"User-Agent": "dynspec-tests", **(headers or {})})
            with urllib.request.urlopen(req, timeout=60) as r:
                if headers and "Range" in headers and r.status != 206:
                    raise RuntimeError(f"{url}: server ignored Range (HTTP {r.status})")
                return r.read()
        except (OSError, RuntimeError):
            if i == tries - 1:
                raise
            time.sleep(1 + 2 * i)
    raise AssertionError("unreachable")


@functools.lru_cache(maxsize=4)
def _releases(package: str = "vllm") -> dict:
    return json.loads(_get(PYPI_JSON.replace("/vllm/", f"/{package}/")))["releases"]


def wheel_url(version: str, package: str = "vllm") -> tuple[str, int, str]:
    """(url, size, sha256) of the linux x86_64 wheel PyPI publishes for package==version."""
    files = [f for f in _releases(package).get(version, []) if f["packagetype"] == "bdist_wheel" and "x86_64" in f["filename"]]
    if not files:
        raise RuntimeError(f"PyPI lists no x86_64 wheel for {package}=={version}")
    # prefer the CPython 3.11 build when there are several (triton publishes one per Python)
    f = sorted(files, key=lambda f: ("cp311" not in f["filename"], f["filename"]))[0]
    # some mirrors of the JSON API give URLs relative to the API document
    return urllib.parse.urljoin(PYPI_JSON, f["url"]), int(f["size"]), f["digests"]["sha256"]


class RangeFile(io.RawIOBase):
    """A read-only, seekable view of a remote file: each read is one HTTP range request
    (reads of the tail are served from one prefetched block, where the central directory is)."""

    def __init__(self, url: str, size: int, tail: int = 4 << 20) -> None:
        self.url, self.size, self.pos = url, size, 0
        self.requests = 0
        start = max(0, size - tail)
        self._blocks: list[tuple[int, bytes]] = [(start, self._range(start, size - 1))]

    def prefetch(self, spans: list[tuple[int, int]], gap: int = 1 << 20) -> None:
        """Fetch [a, b) spans in few requests: spans closer than `gap` share one request."""
        merged: list[list[int]] = []
        for a, b in sorted(spans):
            if merged and a - merged[-1][1] <= gap:
                merged[-1][1] = max(merged[-1][1], b)
            else:
                merged.append([a, b])
        for a, b in merged:
            self._blocks.append((a, self._range(a, b - 1)))

    def _range(self, a: int, b: int) -> bytes:
        self.requests += 1
        return _get(self.url, {"Range": f"bytes={a}-{b}"})

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.pos

    def seek(self, off: int, whence: int = 0) -> int:
        self.pos = off if whence == 0 else self.pos + off if whence == 1 else self.size + off
        return self.pos

    def read(self, n: int = -1) -> bytes:
        if n is None or n < 0:
            n = self.size - self.pos
        n = max(0, min(n, self.size - self.pos))
        if n == 0:
            return b""
        a = self.pos
        for start, block in self._blocks:
            if start <= a and a + n <= start + len(block):
                data = block[a - start:a - start + n]
                break
        else:
            data = self._range(a, a + n - 1)
        self.pos += len(data)
        return data

    def readinto(self, b) -> int:
        data = self.read(len(b))
        b[:len(data)] = data
        return len(data)


def _local_wheel(version: str) -> Path | None:
    d = os.environ.get("DYNSPEC_VLLM_WHEEL_DIR")
    if not d:
        return None
    found = sorted(Path(d).glob(f"vllm-{version}-*.whl"))
    return found[0] if found else None


def _wanted(name: str) -> bool:
    return any(fnmatch.fnmatchcase(name, p) for p in MEMBERS)


def members(version: str) -> Path:
    """Directory with the needed members of the published vllm==version wheel (site-packages
    layout). Read-only: copy before patching."""
    root = CACHE / version
    done = root / ".complete"
    if done.exists() and done.read_text() == _FORMAT:
        return root
    with _locked(f"members-{version}"):
        if done.exists() and done.read_text() == _FORMAT:
            return root
        local = _local_wheel(version)
        if local is not None:
            src, how = open(local, "rb"), str(local)
        else:
            url, size, _sha = wheel_url(version)
            src, how = RangeFile(url, size), url
        tmp = root.with_name(root.name + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        with src, zipfile.ZipFile(src) as z:
            infos = sorted(z.infolist(), key=lambda i: i.header_offset)
            ends = {i.filename: (nxt.header_offset if nxt else z.start_dir)
                    for i, nxt in zip(infos, infos[1:] + [None])}
            names = [i.filename for i in infos if _wanted(i.filename)]
            if isinstance(src, RangeFile):
                src.prefetch([(z.getinfo(n).header_offset, ends[n]) for n in names])
            # reading in file order keeps the range requests moving forward
            for info in sorted((z.getinfo(n) for n in names), key=lambda i: i.header_offset):
                z.extract(info, tmp)
        (tmp / ".source").write_text(how + "\n")
        shutil.rmtree(root, ignore_errors=True)
        tmp.rename(root)
        done.write_text(_FORMAT)
    return root


def package_members(package: str, version: str, patterns: tuple[str, ...]) -> Path:
    """Members of another published wheel (e.g. triton's package __init__, which is all that
    `importlib.util.find_spec("triton")` needs), same range-request route and cache."""
    root = CACHE / f"{package}-{version}"
    done = root / ".complete"
    stamp = "|".join(patterns)
    if done.exists() and done.read_text() == stamp:
        return root
    with _locked(f"members-{package}-{version}"):
        url, size, _sha = wheel_url(version, package)
        src = RangeFile(url, size)
        tmp = root.with_name(root.name + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        with src, zipfile.ZipFile(src) as z:
            for info in z.infolist():
                if any(fnmatch.fnmatchcase(info.filename, p) for p in patterns):
                    z.extract(info, tmp)
        (tmp / ".source").write_text(url + "\n")
        shutil.rmtree(root, ignore_errors=True)
        tmp.rename(root)
        done.write_text(stamp)
    return root


def read(version: str, member: str) -> str | None:
    p = members(version) / member
    return p.read_text(encoding="utf-8") if p.is_file() else None
