"""The commands `dynspec group` prints work pasted as is (issue 22, item 2): node 0 on this
machine, node 1 behind sshd in a network namespace reached through the profile's own ssh_config
(nothing on the command line or in the environment). A stop that cannot reach a node stops the
others and says what is still running where."""
from __future__ import annotations

import json
import subprocess
import uuid

import pytest

from tests.multinode.helpers import cleanup_group, node_record, write_group_profile
from tests.run.helpers import DYNSPEC, group_alive, paste, printed

pytestmark = pytest.mark.netns


@pytest.fixture
def gname():
    n = f"g-{uuid.uuid4().hex[:8]}"
    yield n
    cleanup_group(n)


def test_printed_group_stop_reaches_every_node(tmp_path, netns_lab, gname):
    prof = write_group_profile(tmp_path / "g.toml", gname, ["local", netns_lab.alias(1)])
    prof.write_text(f"ssh_config = {json.dumps(str(netns_lab.ssh_config))}\n"
                    f"known_hosts = {json.dumps(str(netns_lab.known_hosts))}\n" + prof.read_text())
    r = subprocess.run(DYNSPEC + ["group", "launch", str(prof), "--no-preflight", "--no-probe"],
                       capture_output=True, text=True, timeout=150)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    stops = printed(r.stdout, "group stop")
    assert len(stops) == 1, r.stdout
    ids = [node_record(gname, i)["pgid"] for i in range(2)]
    assert all(group_alive(p) for p in ids)

    # node 1 unreachable (its host key unknown): node 0 is stopped, node 1 named as still running
    empty = tmp_path / "empty_known_hosts"
    empty.write_text("")
    s = paste(stops[0] + f" --known-hosts {empty}", tmp_path)
    assert s.returncode == 1, s.stdout + s.stderr
    assert not group_alive(ids[0]) and group_alive(ids[1])
    pid1 = node_record(gname, 1)["pid"]
    assert (f"node 1 ({netns_lab.alias(1)}) not stopped: " in s.stderr and "host key" in s.stderr
            and f"its server (run {gname}-n1, pid {pid1}) may still be running" in s.stderr), s.stderr
    assert "1 of 2 nodes not stopped (1 stopped)" in s.stderr

    # no options at all: the copy of the group record here names the files the launch used
    s = paste(f"dynspec group stop {gname}", tmp_path)
    assert s.returncode == 0, s.stderr
    assert "no process remains on any host" in s.stdout and not any(group_alive(p) for p in ids)

    r = subprocess.run(DYNSPEC + ["group", "launch", str(prof), "--no-preflight", "--no-probe"],
                       capture_output=True, text=True, timeout=150)
    assert r.returncode == 0, r.stderr[-2000:]
    ids = [node_record(gname, i)["pgid"] for i in range(2)]
    s = paste(printed(r.stdout, "group stop")[0], tmp_path)  # as printed
    assert s.returncode == 0, s.stderr
    assert "no process remains on any host" in s.stdout and not any(group_alive(p) for p in ids)
