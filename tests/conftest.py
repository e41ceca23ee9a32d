"""Every test run gets its own dynspec home (DYNSPEC_HOME, inherited by the dynspec processes the
tests start and, through sshd's SetEnv, by the test sshds' sessions): the suite never writes into
the real ~/.dynspec of the user running it.

It also gets its own mark (DYNSPEC_SUITE_RUN, inherited the same way) and takes down what it
started when it ends: normally, on Ctrl-C (SIGINT) or on SIGTERM, which becomes the same
KeyboardInterrupt so that pytest tears the session fixtures down (tests/support/procs.py)."""
import os
import secrets
import shutil
import signal
import tempfile

from tests.support.procs import SUITE_MARK, cleanup_all

_made = []


def _terminated(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")


def pytest_configure(config):
    home = tempfile.mkdtemp(prefix="dynspec-home-")
    _made.append(home)
    os.environ["DYNSPEC_HOME"] = home
    # the same, for what outlives one test (the session sshds): a test may point DYNSPEC_HOME elsewhere
    os.environ["DYNSPEC_SUITE_HOME"] = home
    os.environ[SUITE_MARK] = f"{os.getpid()}-{secrets.token_hex(6)}"
    signal.signal(signal.SIGTERM, _terminated)


def pytest_unconfigure(config):
    cleanup_all()
    for d in _made:
        shutil.rmtree(d, ignore_errors=True)
