"""`dynspec` held still at one step of starting a server, so a test can signal it exactly there:

    python -m tests.support.paused_dynspec STEP launch PROFILE ...      (from the repo root)

STEP is one of the moments of run/control.start, recognised by the calls it makes (nothing in
dynspec knows about this):
  intent    the "starting" record was written, nothing else
  header    the launch line is in the log
  spawned   the server runs, its record not completed
  recorded  the record completed (pid file forgotten), nothing printed yet
Prints "dynspec-test: paused at STEP" on stderr, then sleeps until signalled."""
import sys
import time

from dynspec_cli.evidence.observation import LAUNCH_PREFIX
from dynspec_cli.run import ownership, records
from dynspec_cli.transport.host import Host

STEPS = ("intent", "header", "spawned", "recorded")


def hold(step: str) -> None:
    sys.stderr.write(f"dynspec-test: paused at {step}\n")
    sys.stderr.flush()
    while True:
        time.sleep(3600)


def after(owner, attr: str, step: str, when=lambda *a, **k: True) -> None:
    original = getattr(owner, attr)

    def wrapper(*args, **kwargs):
        result = original(*args, **kwargs)
        if when(*args, **kwargs):
            hold(step)
        return result

    setattr(owner, attr, wrapper)


def main() -> None:
    step, sys.argv[1:] = sys.argv[1], sys.argv[2:]
    if step == "intent":
        after(records, "save", step, lambda host, rec, *a, **k: rec.state == records.STARTING)
    elif step == "header":
        after(Host, "run", step, lambda self, argv, *a, **k: any(LAUNCH_PREFIX in str(w) for w in argv))
    elif step == "spawned":  # (not inside spawn_tracked: Ctrl-C is held back until the spawn answers)
        after(records, "leader_start", step)
    elif step == "recorded":
        after(ownership, "forget_pid_file", step, lambda host, rec: rec.state == records.STARTED)
    else:
        raise SystemExit(f"paused_dynspec: STEP is one of {', '.join(STEPS)}")
    from dynspec_cli.cli.main import main as dynspec

    sys.argv[0] = "dynspec"
    dynspec()


if __name__ == "__main__":
    main()
