"""Build the wheelhouse that one GPU-machine call carries: sglang, its kernels (trimmed), the
distributions the GPU image lacks, and dynspec itself. Runs here, on the CPU machine.

    python3 gpu/wheelhouse.py            # -> .gpu/wheels/*.whl (ignored by git), under 64 MiB on disk in all

What to fetch is data: gpu/wheelhouse.toml (the release, its pins, what to cut from the kernel wheel).
Downloads are cached in ~/.cache/dynspec-gpu. The GPU machine installs the result with
    python3 -m pip install --no-index --no-deps --target /tmp/site .gpu/wheels/*.whl
"""
from __future__ import annotations

import argparse
import base64
import hashlib
import subprocess
import sys
import zipfile
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent
CACHE = Path.home() / ".cache" / "dynspec-gpu"
LIMIT = 64 * 2**20  # what one call carries, the working tree included
PLATFORMS = ["manylinux_2_17_x86_64", "manylinux2014_x86_64", "manylinux_2_28_x86_64", "manylinux_2_34_x86_64",
             "manylinux_2_5_x86_64", "manylinux1_x86_64", "manylinux_2_24_x86_64", "manylinux_2_26_x86_64",
             "manylinux_2_27_x86_64", "manylinux_2_31_x86_64", "manylinux_2_35_x86_64"]


def download(spec: str, python: str) -> Path:
    """One wheel for the GPU image's python (cp312, x86-64), from the cache or PyPI."""
    name = spec.split("==")[0].lower().replace("-", "_")
    version = spec.split("==")[1]
    cached = [p for p in CACHE.glob("*.whl")
              if p.name.lower().startswith(f"{name}-{version}-".lower())]
    if cached:
        return cached[0]
    CACHE.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:",
           "--python-version", python, "--implementation", "cp", "-d", str(CACHE), spec]
    for p in PLATFORMS:
        cmd += ["--platform", p]
    subprocess.run(cmd, check=True)
    return download(spec, python)


def trim(wheel: Path, drop: list[str], out: Path) -> Path:
    """The same wheel without the members under `drop` (prefixes), with a RECORD that matches."""
    target = out / wheel.name
    with zipfile.ZipFile(wheel) as src, zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as dst:
        record_name = next(n for n in src.namelist() if n.endswith(".dist-info/RECORD"))
        kept = []
        for info in src.infolist():
            if info.filename == record_name or any(info.filename.startswith(d) for d in drop):
                continue
            data = src.read(info)
            dst.writestr(info, data)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            kept.append(f"{info.filename},sha256={digest},{len(data)}")
        dst.writestr(record_name, "\n".join(kept + [f"{record_name},,"]) + "\n")
    return target


def recompress(wheel: Path) -> None:
    """The same wheel with its members LZMA-compressed (pip reads any method zipfile reads): the device
    tool counts what a call carries in disk blocks, and the working tree left ~1 MiB for the wheelhouse."""
    tmp = wheel.with_suffix(".tmp")
    with zipfile.ZipFile(wheel) as src, zipfile.ZipFile(tmp, "w", zipfile.ZIP_LZMA) as dst:
        for info in src.infolist():
            data = src.read(info)
            info.compress_type = zipfile.ZIP_LZMA
            dst.writestr(info, data)
    tmp.replace(wheel)


def on_disk(path: Path) -> int:
    """Bytes a file takes on disk (whole blocks), as the device tool counts a call's working tree."""
    return path.stat().st_blocks * 512


def build(plan_file: Path, out: Path) -> list[Path]:
    plan = tomllib.loads(plan_file.read_text())
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob("*.whl"):
        old.unlink()
    wheels = []
    for spec in plan["wheels"]:
        wheel = download(spec, plan["python"])
        drop = plan.get("trim", {}).get(spec.split("==")[0], [])
        if drop:
            wheels.append(trim(wheel, drop, out))
        else:
            wheels.append(out / wheel.name)
            wheels[-1].write_bytes(wheel.read_bytes())
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(out), str(ROOT)],
                   check=True)
    wheels.append(max(out.glob("dynspec_cli-*.whl"), key=lambda p: p.stat().st_mtime))
    for w in wheels:
        if w.stat().st_size > 2**19:
            recompress(w)
    for lib in plan.get("libs", []):  # shared libraries the kernels need that the image may lack
        src = Path(lib).resolve()
        dst = out.parent / "lib" / Path(lib).name
        dst.parent.mkdir(parents=True, exist_ok=True)
        dst.write_bytes(src.read_bytes())
        wheels.append(dst)
    return wheels


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--plan", type=Path, default=ROOT / "gpu" / "wheelhouse.toml")
    ap.add_argument("--out", type=Path, default=ROOT / ".gpu" / "wheels")
    args = ap.parse_args()
    wheels = build(args.plan, args.out)
    total = sum(on_disk(w) for w in wheels)
    for w in sorted(wheels, key=lambda p: p.stat().st_size, reverse=True)[:8]:
        print(f"{w.stat().st_size / 2**20:7.1f} MiB  {w.name}")
    files = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                           capture_output=True, check=True).stdout.split(b"\0")
    tree = sum(on_disk(ROOT / f.decode()) for f in files if f and (ROOT / f.decode()).is_file())
    print(f"{len(wheels)} wheels, {total / 2**20:.1f} MiB in {args.out}; with the working tree "
          f"({tree / 2**20:.1f} MiB) {(total + tree) / 2**20:.1f} MiB of the {LIMIT / 2**20:.0f} MiB a call carries")
    if total + tree > LIMIT - 2**20:
        print("wheelhouse: too large for one call", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
