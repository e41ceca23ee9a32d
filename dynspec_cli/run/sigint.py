"""Ctrl-C held back while a step must finish as a whole (sbatch and the record of the job id it
printed; a server's spawn until it has answered with its pid): the interrupt is acted on once the
step is done, so what the step started is known and can be stopped or named. A second Ctrl-C
abandons the step at once."""
from __future__ import annotations

import signal
import sys
import threading
from contextlib import contextmanager
from typing import Iterator


@contextmanager
def held(what: str) -> Iterator[None]:
    """SIGINT during the block is noted (one line on stderr) and raised as KeyboardInterrupt when
    the block ends; a second SIGINT raises at once. Outside the main thread: no change."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    noted: list[bool] = []

    def on_sigint(signum, frame) -> None:
        if noted:
            raise KeyboardInterrupt
        noted.append(True)
        sys.stderr.write(f"dynspec: interrupted: {what} first (Ctrl-C again to abandon it)\n")

    old = signal.signal(signal.SIGINT, on_sigint)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, old)
    if noted:
        raise KeyboardInterrupt
