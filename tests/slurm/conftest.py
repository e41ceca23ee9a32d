import pytest

from tests.support.slurm import slurm, slurm_cluster  # noqa: F401  (a real two-node Slurm, session-scoped)


@pytest.fixture(autouse=True)
def private_home(tmp_path_factory, monkeypatch):
    """Run records, job dirs and logs under a temporary HOME, never the user's ~/.dynspec (the
    job inherits HOME from sbatch's environment, so the nodes write there too). DYNSPEC_HOME points
    into it as well: the suite's own one (tests/conftest.py) would take precedence over HOME."""
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("DYNSPEC_HOME", str(home / ".dynspec"))
    return home


from tests.support.sshd import ssh_lab  # noqa: E402,F401  (a real sshd on 127.0.0.1: the login host over SSH)
