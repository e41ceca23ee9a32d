"""tests.support.sglang_env build logic, without building anything (fast; the real build is exercised by the
session fixture of the realsglang tier)."""
from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

import pytest

from tests.support import sglang_env as se


def test_failed_pip_names_the_command(tmp_path):
    log = tmp_path / "log"
    log.write_text("")
    cmd = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index", "--target",
           str(tmp_path / "t"), str(tmp_path / "does-not-exist-1.0-py3-none-any.whl")]
    with pytest.raises(se.SglangEnvError) as e:
        se._run(cmd, log, "installing the test overlay")
    msg = str(e.value)
    assert msg.startswith("installing the test overlay: command failed with exit ")
    assert " ".join(cmd) in msg
    assert str(log) in msg
    assert "$ " + " ".join(cmd) in log.read_text()


def _fake_cache(root: Path, version: str, monkeypatch) -> None:
    """A cache that looks completely built: stamps carry the digests build_* would compute."""
    root.mkdir(parents=True, exist_ok=True)
    whl = root / f"sglang-{version}-py3-none-any.whl"
    whl.write_text("")
    monkeypatch.setattr(se.wheels, "wheel", lambda v: whl)
    base = root / "base"
    (base / "bin").mkdir(parents=True)
    (base / "bin" / "python").write_text("")
    digest = se._digest((se.REQ_DIR / "base.txt").read_bytes(), (se.REQ_DIR / "base-constraints.txt").read_bytes(),
                        sys.version.encode())
    (base / se.STAMP).write_text(digest + "\n")
    ov = root / "overlay" / version
    ov.mkdir(parents=True)
    req = se.REQ_DIR / f"overlay-{version}.txt"
    (ov / se.STAMP).write_text(se._digest(req.read_bytes(), whl.name.encode(), (base / se.STAMP).read_bytes()) + "\n")


def test_built_cache_is_reused_and_env_puts_overlay_first(tmp_path, monkeypatch):
    root = tmp_path / "c"
    monkeypatch.setenv("DYNSPEC_TEST_CACHE", str(root))
    _fake_cache(root / "sglang-env", "0.5.9", monkeypatch)
    monkeypatch.setattr(se, "_run", lambda *a, **k: pytest.fail(f"rebuilt: {a}"))
    e = se.python_for("0.5.9")
    assert e.python == root / "sglang-env" / "base" / "bin" / "python"
    assert e.overlay == root / "sglang-env" / "overlay" / "0.5.9"
    env = e.env(extra_paths=[tmp_path / "patched"], base={"PYTHONPATH": "/junk", "X": "1"}, X=None, Y="2")
    assert env["PYTHONPATH"] == f"{tmp_path / 'patched'}:{e.overlay}"
    assert "X" not in env and env["Y"] == "2" and env["PYTHONNOUSERSITE"] == "1"


def test_changed_requirements_rebuild_the_overlay(tmp_path, monkeypatch):
    root = tmp_path / "c"
    monkeypatch.setenv("DYNSPEC_TEST_CACHE", str(root))
    _fake_cache(root / "sglang-env", "0.5.9", monkeypatch)
    (root / "sglang-env" / "overlay" / "0.5.9" / se.STAMP).write_text("stale\n")
    calls = []

    def fake_run(cmd, log, what):
        calls.append(what)
        Path(cmd[cmd.index("--target") + 1]).mkdir(parents=True, exist_ok=True)

    monkeypatch.setattr(se, "_run", fake_run)
    se.python_for("0.5.9")
    assert calls == ["installing the sglang==0.5.9 overlay"]  # the base was not rebuilt
    se.python_for("0.5.9")
    assert len(calls) == 1  # and now it is stamped


def test_unknown_release_is_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("DYNSPEC_TEST_CACHE", str(tmp_path))
    _fake_cache(tmp_path / "sglang-env", "0.5.9", monkeypatch)
    with pytest.raises(se.SglangEnvError, match="no pinned overlay requirements for sglang==0.4.0"):
        se.python_for("0.4.0")


def test_lock_serialises_builders(tmp_path):
    order = []

    def worker(name):
        with se._locked(tmp_path):
            order.append(f"{name}+")
            time.sleep(0.2)
            order.append(f"{name}-")

    ts = [threading.Thread(target=worker, args=(n,)) for n in "ab"]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert order in (["a+", "a-", "b+", "b-"], ["b+", "b-", "a+", "a-"])
