"""``kill PID`` during a command that writes files: run the clean-up, then exit 143.

Python's default SIGTERM ends the process at once, skipping ``finally`` blocks, so a
killed ``stacktok export`` or ``stacktok pack`` would leave its temporary files behind.
:func:`sigterm_as_exit` turns SIGTERM into ``SystemExit(128 + 15)`` for the duration of a
``with`` block, after printing ``stacktok: terminated``.

Out of scope: SIGKILL (nothing can run; the next export removes the leftovers) and
threads other than the main one (signals are delivered to the main thread only).
"""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def sigterm_as_exit() -> Iterator[None]:
    """Turn SIGTERM into ``SystemExit(143)`` so ``finally`` blocks run (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def _exit(signum: int, frame: object) -> None:
        print("stacktok: terminated", file=sys.stderr)
        raise SystemExit(128 + signum)

    previous = signal.signal(signal.SIGTERM, _exit)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
