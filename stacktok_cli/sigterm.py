"""``kill PID`` during a command that writes files: run the clean-up, then exit 143.

Python's default SIGTERM ends the process at once, skipping ``finally`` blocks, so a
killed ``stacktok export`` or ``stacktok pack`` would leave its temporary files behind.
:func:`sigterm_as_exit` makes SIGTERM raise :class:`~conformance.report.entry.Terminated`
(a ``SystemExit(143)``) in the main thread for the duration of a ``with`` block, and says
``stacktok: terminated`` once. Every command already runs inside such a block
(:func:`conformance.report.entry.run_main` holds one, SIGINT included, for ``stacktok`` and
``python -m conformance``); this name keeps the intent visible where files are written, and
works on its own outside ``run_main``.

Out of scope: SIGKILL (nothing can run; the next export removes the leftovers) and
threads other than the main one (signals are delivered to the main thread only).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from conformance.report.entry import ending_on_signals


@contextmanager
def sigterm_as_exit() -> Iterator[None]:
    """SIGTERM (and SIGINT) end the block as exceptions so ``finally`` blocks run; exit 143 (130)."""
    with ending_on_signals("stacktok"):
        yield
