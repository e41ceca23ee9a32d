"""`gate --patch F.diff` and `guard --patch F.diff`: the benchmark measures the diff it names, or the gate refuses
(issue 29: the diff is first-class input, the receipt carries the run's). The receipts are written here as prove
writes them; the diffs are the real ones of gpu/patches."""
import json
import sys
from pathlib import Path

import subprocess

from dynspec_cli.prove import receipt
from dynspec_cli.run import patchfile

PATCHES = Path(__file__).resolve().parents[2] / "gpu" / "patches"
B = PATCHES / "dynamic-spec-disable-0.5.12.post1.diff"
E = PATCHES / "e-only-server-args-0.5.12.post1.diff"


def _receipt(tmp_path, patch) -> Path:
    doc = {"schema": receipt.SCHEMA, "live": True, "proven": True, "created_at": 0, "run": {"name": "r"},
           "acceptance": {"provenance": "real"}, "host": "local", "placement": "host",
           "server": {"pid": 2 ** 22 + 7, "leader_start": 1, "cmdline_sha256": "x"}, "patched_files": [],
           "patch": patch}
    p = tmp_path / "r.receipt.json"
    p.write_text(json.dumps(doc))
    return p


def _of(path: Path) -> dict:
    text = patchfile.read_diff(str(path))
    return {"path": str(path), "sha256": patchfile.sha256(text), "files": [], "hunks": []}


def gate(*args):
    r = subprocess.run([sys.executable, "-m", "dynspec_cli", "gate", *args, "--json"], capture_output=True, text=True,
                       timeout=60)
    return r.returncode, json.loads(r.stdout) if r.stdout.strip() else None, r.stderr


def test_the_diff_the_receipt_proved_passes_the_patch_check(tmp_path):
    rc, d, _ = gate(str(_receipt(tmp_path, _of(B))), "--patch", str(B))
    assert rc == 1 and d["check"] == "process"  # past the patch: the (made-up) proven process is not running


def test_another_diff_is_refused_naming_both(tmp_path):
    rc, d, err = gate(str(_receipt(tmp_path, _of(B))), "--patch", str(E))
    assert rc == 1 and d["check"] == "patch"
    assert B.name in d["message"] and E.name in d["message"] and "another patch" in d["message"]


def test_a_receipt_of_a_run_launched_without_a_diff_is_refused(tmp_path):
    rc, d, _ = gate(str(_receipt(tmp_path, None)), "--patch", str(B))
    assert rc == 1 and d["check"] == "patch" and "without a diff" in d["message"]


def test_a_file_that_is_not_a_diff_is_one_line_exit_2(tmp_path):
    (tmp_path / "notes.txt").write_text("tuned the threshold\n")
    rc, _, err = gate(str(_receipt(tmp_path, _of(B))), "--patch", str(tmp_path / "notes.txt"))
    assert rc == 2 and err.count("\n") == 1 and "not a unified diff" in err


def test_guard_with_another_diff_never_starts_the_benchmark(tmp_path):
    flag = tmp_path / "benchmark-ran"
    r = subprocess.run([sys.executable, "-m", "dynspec_cli", "guard", str(_receipt(tmp_path, _of(B))), "--patch",
                        str(E), "--", "touch", str(flag)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 125, r.stderr
    assert "gate FAILED" in r.stderr and "another patch" in r.stderr and not flag.exists()


def _record(patch):
    from dynspec_cli.run.records import RunRecord

    return RunRecord(name="r", host="local", pid=1, pgid=1, argv=["python3", "-m", "sglang.launch_server"], env={},
                     log="/tmp/r.log", log_offset=0, port=30000, started_at=0.0, feature="dynamic-spec-disable",
                     patch=patch)


def test_prove_with_the_diff_the_run_was_launched_with_keeps_the_record():
    from dynspec_cli.cli.prove_cmds import _with_patch

    rec = _record(_of(B))
    assert _with_patch(rec, str(B)) is rec


def test_prove_with_another_diff_than_the_launch_is_refused():
    import pytest

    from dynspec_cli.cli.errors import UsageError
    from dynspec_cli.cli.prove_cmds import _with_patch

    with pytest.raises(UsageError) as e:
        _with_patch(_record(_of(B)), str(E))
    assert E.name in str(e.value) and str(B) in str(e.value)


def test_prove_with_a_diff_for_a_run_launched_without_one_carries_it_to_the_receipt():
    from dynspec_cli.cli.prove_cmds import _with_patch

    rec = _with_patch(_record(None), str(E))
    assert rec.patch["sha256"] == _of(E)["sha256"] and rec.patch["path"] == str(E)
    assert [h["file"].rsplit("/", 1)[-1] for h in rec.patch["hunks"]] == ["server_args.py"] * 3
