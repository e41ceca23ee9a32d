"""Every verdict dynspec gives and its exit code, in one table (grep's tradition: 0 yes, 1 no,
2 trouble; extended where needed). Log verdicts: live, dead, inconclusive, crashed,
ineffective (live, but the Decode batch lines show accept len ~1.00 wherever speculation should be on); preflight:
reachable, dead, unknown. Bad input is 2 whatever the command."""
from __future__ import annotations

EXIT = {"live": 0, "reachable": 0, "dead": 1, "inconclusive": 3, "unknown": 3, "crashed": 4, "ineffective": 5}
# accept len above 1 + ACCEPT_EPS: drafts were accepted, speculation did something (sglang logs two
# decimals; 1.00 is a pass that accepted nothing)
ACCEPT_EPS = 0.05
BAD_INPUT = 2
INTERRUPTED = 130
