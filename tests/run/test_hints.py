"""Every command dynspec prints works pasted as is (issue 22, item 2): after a launch through a
profile's `ssh_config` (nothing on the command line, nothing in the environment), the printed
`dynspec watch/stop NAME --host H ...` reaches the host from any directory and a new shell."""
import json
import uuid

import pytest

from tests.run.helpers import cleanup, dynspec, group_alive, paste, printed, record, write_profile

pytestmark = pytest.mark.ssh


@pytest.fixture
def name():
    n = f"t-{uuid.uuid4().hex[:8]}"
    yield n
    cleanup(n)


def ssh_profile(path, name, lab, **kw):
    """A profile for host `dut` naming the lab's ssh_config and known_hosts itself."""
    prof = write_profile(path, name, host="dut", **kw)
    text = prof.read_text()
    prof.write_text(f"ssh_config = {json.dumps(str(lab.ssh_config))}\n"
                    f"known_hosts = {json.dumps(str(lab.known_hosts))}\n" + text)
    return prof


def test_printed_stop_after_a_launch_through_the_profiles_ssh_config(tmp_path, name, ssh_lab):
    prof = ssh_profile(tmp_path / "p.toml", name, ssh_lab, env={"SGLANG_ENABLE_SPEC_V2": "True"})
    r = dynspec("launch", str(prof), "--no-preflight")  # no --ssh-config: the profile's
    assert r.returncode == 0, r.stderr
    stops = printed(r.stdout, "stop")
    assert len(stops) == 1 and f"--host dut" in stops[0], r.stdout
    pgid = record(name)["pgid"]
    assert group_alive(pgid)
    bare = paste(f"dynspec stop {name} --host dut", tmp_path)  # what the hint used to be
    assert bare.returncode == 2 and "dut" in bare.stderr and group_alive(pgid)
    s = paste(stops[0], tmp_path)
    assert s.returncode == 0, s.stderr
    assert "no process remains" in s.stdout and not group_alive(pgid)


def test_printed_watch_and_stop_after_a_timeout(tmp_path, name, ssh_lab):
    prof = ssh_profile(tmp_path / "p.toml", name, ssh_lab, env={"SGLANG_ENABLE_SPEC_V2": "True", "STANDIN_PACE": "0.03"})
    r = dynspec("launch", str(prof), "--no-preflight", "--timeout", "1")
    assert r.returncode == 3, r.stdout + r.stderr
    watch, stop = printed(r.stdout, "watch"), printed(r.stdout, "stop")
    assert len(watch) == 1 and len(stop) == 1, r.stdout
    w = paste(watch[0], tmp_path)
    assert w.returncode == 0, w.stderr  # watched to live over SSH
    assert "LIVE" in w.stdout.upper()
    s = paste(stop[0], tmp_path)
    assert s.returncode == 0 and not group_alive(record(name)["pgid"]), s.stderr


def test_a_stop_that_cannot_reach_the_host_says_the_run_may_still_run(tmp_path, name, ssh_lab):
    srv = ssh_lab.add_server("private")
    try:
        prof = write_profile(tmp_path / "p.toml", name, host="private", env={"SGLANG_ENABLE_SPEC_V2": "True"})
        assert dynspec("launch", str(prof), "--no-preflight", ssh=ssh_lab).returncode == 0
        pgid = record(name)["pgid"]
        srv.stop()  # the host is unreachable now; its server keeps running
        s = dynspec("stop", name, "--host", "private", ssh=ssh_lab)
        assert s.returncode == 2 and len(s.stderr.strip().splitlines()) == 1, s.stderr
        assert "connection refused" in s.stderr and f"run {name!r} is not stopped and may still be running" in s.stderr
        assert f"retry with: dynspec stop {name} --host private --ssh-config {ssh_lab.ssh_config}" in s.stderr
        assert group_alive(pgid)
    finally:
        ssh_lab.remove_server("private")
