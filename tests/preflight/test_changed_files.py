"""Without a diff, preflight names the installed sglang files that differ from the released wheel:
the dist-info RECORD pip wrote (path,sha256=...,size) against a real `pip install --no-deps` of the
published wheel into a venv (an unpacked copy on a .pth has no RECORD)."""
import json
import subprocess
import sys

from tests.support import wheels

VERSION = "0.5.12.post1"


def _preflight(py, *extra):
    res = subprocess.run([sys.executable, "-m", "dynspec_cli", "preflight", "--python", py, *extra, "--",
                          "--speculative-algorithm", "EAGLE"], capture_output=True, text=True, timeout=120)
    return res


def test_an_edited_file_is_named_and_nothing_else(tmp_path):
    py, pkg = wheels.copy_installed(VERSION, tmp_path / "venv")
    edited = pkg / "srt" / "speculative" / "eagle_worker_v2.py"
    edited.write_text(edited.read_text() + "\n# my change\n")
    doc = json.loads(_preflight(py, "--json").stdout)
    cf = doc["changed_files"]
    assert cf["checked"] is True
    assert cf["files"] == [str(edited)]
    assert cf["files_hashed"] > 1000  # every .py the wheel ships (a person counted ~1958 in 0.5.12.post1)
    text = _preflight(py).stdout
    assert "you changed 1 file(s)" in text and str(edited) in text


def test_an_untouched_install_has_no_changed_file(tmp_path):
    py, _ = wheels.copy_installed(VERSION, tmp_path / "venv")
    cf = json.loads(_preflight(py, "--json").stdout)["changed_files"]
    assert cf["checked"] is True and cf["files"] == []


def test_an_unpacked_copy_without_record_says_so(sglang_python):
    py, _, _ = sglang_python(VERSION)
    cf = json.loads(_preflight(py, "--json").stdout)["changed_files"]
    assert cf["checked"] is False and cf["files"] == []
    assert cf["reason"]


def test_a_missing_patch_file_is_one_line_exit_2(tmp_path):
    py, _ = wheels.copy_installed(VERSION, tmp_path / "venv")
    res = subprocess.run([sys.executable, "-m", "dynspec_cli", "verify", "--patch", str(tmp_path / "nope.diff"),
                          str(tmp_path / "log")], capture_output=True, text=True, timeout=60)
    assert res.returncode == 2 and len(res.stderr.strip().splitlines()) == 1 and "nope.diff" in res.stderr
