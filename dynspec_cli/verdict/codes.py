"""Every verdict dynspec gives and its exit code, in one table (grep's tradition: 0 yes, 1 no,
2 trouble; extended where needed). Log verdicts: live, dead, inconclusive, crashed; preflight:
reachable, dead, unknown. Bad input is 2 whatever the command."""
from __future__ import annotations

EXIT = {"live": 0, "reachable": 0, "dead": 1, "inconclusive": 3, "unknown": 3, "crashed": 4}
BAD_INPUT = 2
INTERRUPTED = 130
