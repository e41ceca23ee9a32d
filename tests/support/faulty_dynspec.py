"""`dynspec` with a bug planted in its judge, so a test can check what an internal error does to
a server dynspec started:

    python -m tests.support.faulty_dynspec AFTER launch PROFILE ...      (from the repo root)

The sglang judge's `verdict()` raises RuntimeError on its AFTER-th call and every later one
(AFTER=1: the first verdict the watch asks for, once the server has been spawned). Nothing in
dynspec knows about this; the fault stands for any bug or missing table met while watching."""
import sys

from dynspec_cli.engines.sglang.judge import Judge

FAULT = "injected fault in the judge (tests/support/faulty_dynspec.py)"


def main() -> None:
    after, sys.argv[1:] = int(sys.argv[1]), sys.argv[2:]
    original = Judge.verdict
    calls = [0]

    def verdict(self, *args, **kwargs):
        calls[0] += 1
        if calls[0] >= after:
            raise RuntimeError(FAULT)
        return original(self, *args, **kwargs)

    Judge.verdict = verdict
    from dynspec_cli.cli.main import main as dynspec

    sys.argv[0] = "dynspec"
    dynspec()


if __name__ == "__main__":
    main()
