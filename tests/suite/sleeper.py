"""Run on its own by test_interrupted_suite.py (no test_ prefix: the suite never collects it): the
real session sshds and namespaces, a stray process like a launched stand-in server would be (own
session) here, on the 127.0.0.1 sshd and in a namespace; then it says what it started and sleeps
until it is interrupted."""
import json
import os
import subprocess
import time
from pathlib import Path

from tests.support.netns import netns_lab  # noqa: F401
from tests.support.sshd import ssh_lab  # noqa: F401

STRAY = "setsid sleep {} </dev/null >/dev/null 2>&1 &"


def test_sleep(ssh_lab, netns_lab):
    subprocess.Popen(["sleep", "3607"], start_new_session=True)
    subprocess.run(["ssh", "-F", str(ssh_lab.ssh_config), "dut", STRAY.format(3608)], check=True, timeout=60)
    subprocess.run(["ssh", "-F", str(netns_lab.ssh_config), "node1", STRAY.format(3609)], check=True, timeout=60)
    report = {"sshd": [ssh_lab.target.proc.pid, ssh_lab.bastion.proc.pid, *(h.proc.pid for h in netns_lab.hosts)],
              "netns": [h.ns for h in netns_lab.hosts], "bridge": netns_lab.bridge,
              "mark": os.environ["DYNSPEC_SUITE_RUN"]}
    Path(os.environ["SLEEPER_REPORT"]).write_text(json.dumps(report))
    time.sleep(600)
