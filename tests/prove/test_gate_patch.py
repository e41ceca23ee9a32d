"""The gate pins the run's diff's files and every file that differs from the installed wheel's
RECORD (a real `pip install --no-deps` of sglang 0.5.12.post1), and refuses once one changes."""
import sys

import pytest

from dynspec_cli.knowledge.features import load_feature
from dynspec_cli.prove import receipt
from dynspec_cli.transport import LocalHost
from tests.support import wheels


def test_gate_refuses_after_a_patched_file_changes(tmp_path):
    py, pkg = wheels.copy_installed("0.5.12.post1", tmp_path / "venv")
    edited = pkg / "srt" / "managers" / "scheduler.py"  # changed without a diff: found by RECORD
    edited.write_text(edited.read_text() + "\n# tuned\n")
    in_diff = pkg / "srt" / "speculative" / "eagle_worker_v2.py"
    host = LocalHost(python=sys.executable)
    files, note = receipt.patched_sources(host, py, load_feature(None), [py, "-m", "sglang.launch_server"],
                                          {"path": "/x.diff", "files": [str(in_diff)]})
    assert dict(files) == {str(in_diff): "diff", str(edited): "record"}
    doc = {"schema": receipt.SCHEMA, "live": True, "proven": True, "created_at": 0, "run": {"name": "r"},
           "acceptance": {"provenance": "real"},
           "patched_files": [{"path": p, "sha256": receipt.file_sha256(host, p), "source": s} for p, s in files]}
    assert "2 patched file(s) unchanged" in receipt.check(host, doc, max_age=None, check_server=lambda h, d: "pid 1")
    in_diff.write_text(in_diff.read_text() + "\n# later edit\n")
    with pytest.raises(receipt.GateFailed) as e:
        receipt.check(host, doc, max_age=None, check_server=lambda h, d: "pid 1")
    assert e.value.check == "patched-files" and str(in_diff) in str(e.value)
