"""An internal error never orphans a server (issue 28, item 4): a bug met while `dynspec launch`
watches the server it started (here a fault planted in the judge, tests/support/faulty_dynspec.py)
stops the server as Ctrl-C does, or, with --keep / --detach, leaves it running with its record
marked and the stop command said; locally and over the real test sshd. In every case no process
carrying the run's launch token is left that `dynspec status` does not show."""
import json
import subprocess
import sys
import uuid

import pytest

from tests.run.helpers import dynspec, paste, printed, record, token_processes, wait_for, write_profile
from tests.run.test_orphans import _sweep
from tests.support.faulty_dynspec import FAULT
from tests.support.sshd import ssh_lab  # noqa: F401  (session fixture: a real sshd on 127.0.0.1)

WHERE = ["local", pytest.param("ssh", marks=pytest.mark.ssh)]


def _launch(tmp_path, name, lab, *extra):
    prof = write_profile(tmp_path / f"{name}.toml", name, host="dut" if lab else "local",
                         env={"SGLANG_ENABLE_SPEC_V2": "True", "STANDIN_PACE": "0.05"}, flags={"served-model-name": name})
    ssh = ["--ssh-config", str(lab.ssh_config), "--known-hosts", str(lab.known_hosts)] if lab else []
    return subprocess.run([sys.executable, "-m", "tests.support.faulty_dynspec", "1", "launch", str(prof),
                           "--no-preflight", *extra, *ssh], capture_output=True, text=True, timeout=120)


def _status(name, lab) -> dict:
    ssh = {"ssh": lab} if lab else {}
    r = dynspec("status", name, "--json", *(["--host", "dut"] if lab else []), **ssh)
    assert r.returncode == 0, r.stderr
    return next(x for x in json.loads(r.stdout)["runs"] if x["name"] == name)


@pytest.mark.parametrize("where", WHERE)
def test_a_fault_in_the_judge_stops_the_server_it_was_watching(tmp_path, where, request):
    lab = request.getfixturevalue("ssh_lab") if where == "ssh" else None
    name = f"fault-{uuid.uuid4().hex[:6]}"
    try:
        r = _launch(tmp_path, name, lab)
        assert r.returncode == 70, r.stderr[-3000:]
        assert "Traceback" not in r.stderr
        assert f"dynspec: internal error: RuntimeError: {FAULT}" in r.stderr
        assert f"dynspec: stopped {name}; no process of it remains" in r.stderr, r.stderr
        rec = record(name)
        assert rec["pid"] > 0  # the server had been spawned: there was something to stop
        assert token_processes(rec["token"]) == []
    finally:
        _sweep(name)


@pytest.mark.parametrize("where", WHERE)
@pytest.mark.parametrize("flag", ["--keep", "--detach"])
def test_with_keep_or_detach_the_server_stays_marked_and_the_stop_command_is_said(tmp_path, where, flag, request):
    lab = request.getfixturevalue("ssh_lab") if where == "ssh" else None
    name = f"fault-{flag[2:]}-{uuid.uuid4().hex[:6]}"
    try:
        r = _launch(tmp_path, name, lab, flag)
        assert r.returncode == 70, r.stderr[-3000:]
        assert f"dynspec: internal error: RuntimeError: {FAULT}" in r.stderr
        assert f"dynspec: run {name} keeps running, unwatched ({flag}); stop it with: dynspec stop {name}" in r.stderr
        rec = record(name)
        assert rec["unwatched"] == f"dynspec stopped watching it: RuntimeError: {FAULT}"
        left = token_processes(rec["token"])
        assert left and rec["pid"] in [pid for pid, _ in left]
        # what is left is what status shows
        shown = _status(name, lab)
        assert shown["pid"] == rec["pid"] and shown["alive"] is True and shown["unwatched"] == rec["unwatched"], shown
        (stop,) = printed(r.stderr, "stop")
        s = paste(stop, tmp_path)
        assert s.returncode == 0, s.stderr
        assert wait_for(lambda: token_processes(rec["token"]) == [], 10)
    finally:
        _sweep(name)
