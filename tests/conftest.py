"""Every test run gets its own dynspec home (DYNSPEC_HOME, inherited by the dynspec processes the
tests start and, through sshd's SetEnv, by the test sshds' sessions): the suite never writes into
the real ~/.dynspec of the user running it."""
import os
import shutil
import tempfile

_made = []


def pytest_configure(config):
    home = tempfile.mkdtemp(prefix="dynspec-home-")
    _made.append(home)
    os.environ["DYNSPEC_HOME"] = home
    # the same, for what outlives one test (the session sshds): a test may point DYNSPEC_HOME elsewhere
    os.environ["DYNSPEC_SUITE_HOME"] = home


def pytest_unconfigure(config):
    for d in _made:
        shutil.rmtree(d, ignore_errors=True)
