"""Ctrl-C at any moment of `dynspec launch`, locally and over the real test sshd (issue 22, item
10): the server is stopped and nothing of it remains, or the output names the run left behind
with a stop command that works pasted. Never a traceback, never silence."""
import json
import signal
import subprocess
import time
import uuid

import pytest

from tests.run.helpers import DYNSPEC, paste, paused_at, printed, write_profile
from tests.run.test_orphans import _sweep, processes_with
from tests.support.home import runs_dir


def _launch(tmp_path, name, host, lab, *, env=None, pause=None):
    prof = write_profile(tmp_path / f"{name}.toml", name, host=host,
                         env={"SGLANG_ENABLE_SPEC_V2": "True", "STANDIN_PACE": "0.05", **(env or {})},
                         flags={"served-model-name": name})
    ssh = ["--ssh-config", str(lab.ssh_config), "--known-hosts", str(lab.known_hosts)] if lab else []
    return subprocess.Popen(paused_at(pause) + ["launch", str(prof), "--no-preflight", *ssh], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def _outcome(tmp_path, name, proc) -> str:
    """After the interrupted launch ended: 'stopped' (nothing of the run runs) or 'named' (it
    may run, and the printed stop command ends it)."""
    out, err = proc.communicate(timeout=90)
    text = out + err
    # 130, or killed by the SIGINT itself once the outcome is said: a shell reads both as $? = 130 (CI once
    # saw -2 right after "interrupted: stopped", the run stopped and said)
    assert proc.returncode in (130, -signal.SIGINT), text[-3000:]
    assert "Traceback" not in text and "internal error" not in text, text[-3000:]
    end = time.monotonic() + 3  # a helper command of the start (mkdir, the header) ends on its own
    while processes_with(name) and time.monotonic() < end:
        time.sleep(0.05)
    if not processes_with(name):
        before_record = "dynspec: interrupted\n" in err and not (runs_dir() / f"{name}.json").exists()
        assert (before_record or f"interrupted: stopped {name} " in text
                or f"interrupted: {name} was not started" in text), text
        return "stopped"
    assert f"run {name}" in text and "may still be running" in text, text[-3000:]
    (stop,) = printed(err, "stop")
    s = paste(stop, tmp_path)
    assert s.returncode == 0, s.stderr
    assert processes_with(name) == []
    return "named"


@pytest.mark.parametrize("where", ["local", pytest.param("ssh", marks=pytest.mark.ssh)])
def test_ctrl_c_at_any_moment_of_a_launch(tmp_path, where, request):
    lab = request.getfixturevalue("ssh_lab") if where == "ssh" else None
    host = "dut" if lab else "local"
    # when the record appears and is completed (the window where servers used to be left behind)
    cal = f"i-cal-{uuid.uuid4().hex[:6]}"
    t0, t_intent, t_done = time.monotonic(), None, None
    proc = _launch(tmp_path, cal, host, lab)
    try:
        while t_done is None and time.monotonic() - t0 < 60:
            try:
                state = json.loads((runs_dir() / f"{cal}.json").read_text())["state"]
            except (OSError, ValueError):
                state = None
            t_intent = t_intent or (time.monotonic() - t0 if state else None)
            t_done = time.monotonic() - t0 if state == "started" else None
            time.sleep(0.003)
        assert t_done is not None
        proc.send_signal(signal.SIGINT)
        assert _outcome(tmp_path, cal, proc) == "stopped"
    finally:
        _sweep(cal)
    lo, hi = max(0.3, t_intent - 0.3), t_done + 0.5  # (before 0.3 s Python is still loading dynspec)
    outcomes = []
    for i in range(10):
        name = f"i-{i}-{uuid.uuid4().hex[:6]}"
        try:
            proc = _launch(tmp_path, name, host, lab)
            time.sleep(lo + (hi - lo) * i / 9)
            proc.send_signal(signal.SIGINT)
            outcomes.append(_outcome(tmp_path, name, proc))
        finally:
            _sweep(name)
    print(f"{where}: SIGINT {lo:.2f}-{hi:.2f}s into launch: {outcomes}")


@pytest.mark.parametrize("where", ["local", pytest.param("ssh", marks=pytest.mark.ssh)])
def test_ctrl_c_once_the_record_is_complete(tmp_path, where, request):
    """The moment of issue 22's silent orphans: the record completed, the pid file being removed."""
    lab = request.getfixturevalue("ssh_lab") if where == "ssh" else None
    name = f"i-rec-{uuid.uuid4().hex[:6]}"
    try:
        proc = _launch(tmp_path, name, "dut" if lab else "local", lab, pause="recorded")
        while "paused at recorded" not in (line := proc.stderr.readline()):
            assert line, f"dynspec ended before the step: rc {proc.wait()}"
        assert processes_with(name)
        proc.send_signal(signal.SIGINT)
        assert _outcome(tmp_path, name, proc) == "stopped"
    finally:
        _sweep(name)


def test_second_ctrl_c_while_stopping_names_the_run(tmp_path):
    name = f"i-2nd-{uuid.uuid4().hex[:6]}"
    try:
        proc = _launch(tmp_path, name, "local", None, env={"STANDIN_IGNORE_SIGTERM": "1", "STANDIN_HANG_AT": "weights"})
        end = time.monotonic() + 60
        while not processes_with(name) and time.monotonic() < end:
            time.sleep(0.05)
        time.sleep(1.0)
        proc.send_signal(signal.SIGINT)  # stops it: SIGTERM, ignored, SIGKILL after 10 s
        time.sleep(1.5)
        proc.send_signal(signal.SIGINT)  # ... interrupted while waiting for it
        assert _outcome(tmp_path, name, proc) == "named"
    finally:
        _sweep(name)
