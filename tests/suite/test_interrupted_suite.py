"""Issue 22 item 14: a test run that is interrupted (SIGTERM, Ctrl-C) takes down what it started.
A real pytest runs sleeper.py (the real test sshds and namespaces, stray processes started here and
over ssh), is signalled once it is sleeping, and after it exits nothing of it remains."""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.netns import IP, netns_unavailable
from tests.support.procs import marked_pids, pids_with
from tests.support.sshd import _comm

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.ssh, pytest.mark.netns]


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_interrupted_run_leaves_nothing(tmp_path, sig):
    if why := netns_unavailable():
        pytest.skip(why)
    report = tmp_path / "report.json"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "SLEEPER_REPORT": str(report)}
    proc = subprocess.Popen([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/suite/sleeper.py"],
                            cwd=ROOT, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + 300  # (a loaded machine: only the condition counts, not the time)
        while not report.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert report.exists(), f"the inner run never got to sleep:\n{proc.communicate(timeout=60)[0][-3000:]}"
        started = json.loads(report.read_text())
        assert all(_comm(pid) == "sshd" for pid in started["sshd"]), started
        assert set(started["netns"]) <= set(subprocess.run([IP, "netns", "list"], capture_output=True,
                                                           text=True).stdout.split())
        proc.send_signal(sig)
        out = proc.communicate(timeout=300)[0]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 2, out[-3000:]  # pytest's 'interrupted', not killed by the signal
    assert [pid for pid in started["sshd"] if _comm(pid) == "sshd"] == []
    assert marked_pids(started["mark"]) == []
    assert [pids_with(f"sleep {n}") for n in (3607, 3608, 3609)] == [[], [], []]
    namespaces = subprocess.run([IP, "netns", "list"], capture_output=True, text=True).stdout.split()
    assert [ns for ns in started["netns"] if ns in namespaces] == []
    assert subprocess.run([IP, "link", "show", started["bridge"]], capture_output=True).returncode != 0
