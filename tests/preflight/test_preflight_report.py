"""Preflight's report does not contradict itself: each finding once, help text for every option,
exit codes that are preflight's own."""
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.sshd import ssh_lab  # noqa: F401 - fixture

DYNSPEC = [sys.executable, "-m", "dynspec_cli"]
SPEC = ["--model-path", "/m", "--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", "/d",
        "--speculative-disable-batch-threshold", "5", "--max-running-requests", "64"]


@pytest.mark.wheels
def test_a_flag_given_twice_is_one_finding(sglang_python):
    py, _, _ = sglang_python("0.5.9")
    head = DYNSPEC + ["preflight", "--python", py, "--env", "SGLANG_ENABLE_SPEC_V2=True"]
    tail = ["--"] + SPEC + ["--speculative-eagle-topk", "1", "--bogus", "1", "--bogus", "2"]
    doc = json.loads(subprocess.run(head + ["--json"] + tail, capture_output=True, text=True, timeout=120).stdout)
    assert [f["code"] for f in doc["findings"]] == ["DS109"]
    text = subprocess.run(head + tail, capture_output=True, text=True, timeout=120).stdout
    assert text.count("DS109") == 1


@pytest.mark.wheels
def test_the_footer_names_explain_only_with_findings(sglang_python):
    py, _, _ = sglang_python("0.5.9")
    cmd = DYNSPEC + ["preflight", "--python", py, "--env", "SGLANG_ENABLE_SPEC_V2=True", "--"] + SPEC
    clean = subprocess.run(cmd + ["--speculative-eagle-topk", "1"], capture_output=True, text=True, timeout=120)
    assert clean.returncode == 0 and "✓ PREFLIGHT REACHABLE" in clean.stdout and "findings" not in clean.stdout
    assert "exit 0 (reachable)" in clean.stdout and "dynspec explain" not in clean.stdout
    dead = subprocess.run(cmd + ["--speculative-eagle-topk", "4"], capture_output=True, text=True, timeout=120)
    assert dead.returncode == 1 and "exit 1 (dead)" in dead.stdout and "dynspec explain CODE" in dead.stdout


@pytest.mark.parametrize("command", ["preflight", "verify", "launch"])
def test_every_option_has_help_text(command):
    import typer.main

    from dynspec_cli.cli.app import app

    cmd = typer.main.get_command(app).commands[command]
    missing = [p.opts for p in cmd.params if not (getattr(p, "help", None) or "").strip()]
    assert missing == []


def test_preflight_help_lists_its_own_exit_codes():
    r = subprocess.run(DYNSPEC + ["preflight", "--help"], capture_output=True, text=True, timeout=60,
                       env={"COLUMNS": "400", "PATH": "/usr/bin:/bin"})
    epilog = " ".join(r.stdout.split("Exit codes:")[1].split())
    # what preflight returns (verdict/preflight.py): reachable 0, dead 1, bad input 2, unknown 3; never 4
    assert "0 reachable" in epilog and "1 dead" in epilog and "2 bad input" in epilog and "3 unknown" in epilog
    assert "4" not in epilog and "live" not in epilog and "crashed" not in epilog


@pytest.mark.wheels
def test_two_marker_lines_in_one_class_name_it_once(sglang_python):
    py, site, rec = sglang_python("0.5.9")
    worker = site / "sglang/srt/speculative/eagle_worker_v2.py"
    lines = worker.read_text().splitlines(keepends=True)
    at = next(i for i in rec.insertions if i.what == "marker").line - 1
    lines.insert(at + 1, lines[at])  # the same log line twice in EAGLEWorkerV2.__init__
    worker.write_text("".join(lines))
    cmd = DYNSPEC + ["preflight", "--python", py, "--json", "--"] + SPEC + ["--speculative-eagle-topk", "4"]
    doc = json.loads(subprocess.run(cmd, capture_output=True, text=True, timeout=120).stdout)
    assert len(doc["patched"]) == 2 and {p["class"] for p in doc["patched"]} == {"EAGLEWorkerV2"}
    (ds201,) = [f for f in doc["findings"] if f["code"] == "DS201"]
    assert ds201["message"] == "sglang 0.5.9 will run EAGLEWorker, not EAGLEWorkerV2."
    assert ds201["fix"].count("EAGLEWorkerV2") == 1


@pytest.mark.wheels
def test_the_json_has_the_same_keys_whatever_the_verdict(sglang_python):
    """reachable (a probe command), dead, and no sglang at all: one set of keys, null where absent."""
    py, _, _ = sglang_python("0.5.9")
    env = ["--env", "SGLANG_ENABLE_SPEC_V2=True"]

    def doc(*args, python=py):
        r = subprocess.run(DYNSPEC + ["preflight", "--python", python, "--json", *args], capture_output=True,
                           text=True, timeout=120)
        return json.loads(r.stdout)

    ok = doc(*env, "--", *SPEC, "--speculative-eagle-topk", "1")
    dead = doc(*env, "--", *SPEC, "--speculative-eagle-topk", "4")
    none = doc("--", *SPEC, python=sys.executable)  # this interpreter has no sglang
    assert (ok["verdict"], dead["verdict"], none["verdict"]) == ("reachable", "dead", "dead")
    assert set(ok) == set(dead) == set(none)
    assert {"probe_command", "probe_command_needs", "probe_dir", "probe_copy", "environment"} <= set(ok)
    assert isinstance(ok["probe_command"], str) and none["probe_command"] is None and none["sglang_version"] is None
    assert set(ok["worker"]) == set(dead["worker"]) == set(none["worker"])


@pytest.mark.wheels
@pytest.mark.parametrize("where", ["local", pytest.param("ssh", marks=pytest.mark.ssh)])
def test_a_venv_whose_path_holds_an_equals_sign_is_a_python_like_any(sglang_python, tmp_path, where, request):
    """`--python /work/run=3/venv/bin/python` (and a path with a space): the same report as the venv's
    usual path, locally and over a real sshd."""
    py, _, _ = sglang_python("0.5.9")
    venv = Path(py).parent.parent
    target = []
    if where == "ssh":
        lab = request.getfixturevalue("ssh_lab")
        target = ["--host", "dut", "--ssh-config", str(lab.ssh_config), "--known-hosts", str(lab.known_hosts)]
    docs = []
    for name in (None, "run=3/venv", "my runs/venv", "a=b c/venv"):
        there = venv
        if name is not None:
            there = tmp_path / name
            there.parent.mkdir(exist_ok=True)
            shutil.copytree(venv, there, symlinks=True)
        r = subprocess.run(DYNSPEC + ["preflight", *target, "--python", str(there / "bin" / "python"), "--json",
                                      "--", *SPEC, "--speculative-eagle-topk", "4"], capture_output=True, text=True,
                           timeout=120)
        assert r.returncode == 1, r.stderr  # dead: 0.5.9 runs EAGLEWorker, the patch is in V2
        doc = json.loads(r.stdout)
        docs.append((doc["verdict"], doc["worker"]["class"], doc["sglang_version"],
                     [(p["class"], p["line"]) for p in doc["patched"]], [f["code"] for f in doc["findings"]]))
    assert docs[0][:2] == ("dead", "EAGLEWorker") and docs[0][3][0][0] == "EAGLEWorkerV2"
    assert all(d == docs[0] for d in docs)
