"""What a collapse mid-run lets the guard promise about its windows, for the tests that replay one."""
from __future__ import annotations


def accept_len(window: dict):
    """Rank 0's mean acceptance length from the window's own log lines (None: it logged none)."""
    return window["ranks"][0].get("accept_len") if window["ranks"] else None


def assert_flagged_at_the_first_window_showing_it(doc: dict, reason: dict, at: int) -> None:
    """The guard flags the first window whose own lines show the collapse: the window it happened in
    (`at`) or the next, unless the server logged no ~1.00 there. On CI's loaded 2 cores a 1.5 s window
    after the collapse held none (a collapse in window 5 flagged at 7, with stats lines every 0.5 s), so
    every window between the collapse and the flag must show no collapse (no accept length, or one above
    1.1, a stats line straddling it), and the flag comes at most two windows late."""
    flagged = reason["window"]
    between = [accept_len(w) for w in doc["windows"][at - 1:flagged - 1]]
    assert all(a is None or a > 1.1 for a in between), (reason, at, between)
    assert at <= flagged <= at + 2, (reason, at)
