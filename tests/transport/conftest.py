"""Fixtures for the transport tests: the same test body runs on LocalHost and on SSHHost."""
from __future__ import annotations

import pytest

from dynspec_cli.transport import LocalHost
from tests.support.sshd import private_sshd, ssh_host, ssh_lab  # noqa: F401 - fixtures

HOSTS = ["local", pytest.param("ssh", marks=pytest.mark.ssh)]


@pytest.fixture(scope="session")
def _shared_ssh_host(ssh_lab):
    host = ssh_lab.host("dut")
    yield host
    host.close()


@pytest.fixture(params=HOSTS)
def host(request):
    """LocalHost, or an SSHHost to the lab's `dut` sshd (one connection shared by the session)."""
    if request.param == "local":
        with LocalHost() as h:
            yield h
    else:
        yield request.getfixturevalue("_shared_ssh_host")
