"""One progress reporter for every long command (``stacktok gate``, ``stacktok train``).

API::

    progress = Progress(quiet=args.quiet)          # stream defaults to sys.stderr
    progress.say("static checks")                  # a one-off line ("  .. static checks")
    bar = progress.bar("tokenizers", total=5218, unit="probes")
    bar.update()      # one more done (update(n) for n more)
    bar.set(done)     # or: this many done in all
    bar.close()       # finished: one "done" line; idempotent
    progress.close()  # closes any bar still open (also on ``with Progress(...) as progress:``)

A :class:`Progress` is also callable with a message (``progress("x")`` is ``progress.say("x")``),
so it can be handed to code that takes the older ``Callable[[str], None]`` progress callback.

Three modes, chosen once from the stream:

- **terminal** (``stream.isatty()``): a live view drawn by ``tqdm`` -- one bar per open
  :class:`Bar`, stacked at its own position (the gate runs backends two at a time, so two bars
  move at once). A closed bar is removed and its "done" line is printed above the live bars,
  as is every :meth:`Progress.say` line, so the terminal keeps a record and nothing tears.
- **plain** (CI logs, pipes, files): whole lines only, at most one per bar every ``interval``
  seconds (10 by default, :data:`PLAIN_INTERVAL`) plus one final "done" line per bar. No
  carriage returns, no escape codes.
- **quiet**: nothing at all.

Thread-safe: bars are updated from the worker threads that run the backends. Every write,
and every change to a bar, happens under one lock, and each line is written with a single
``write`` call followed by a flush, so lines from two bars never interleave mid-line.

Why ``tqdm`` and not a hand-rolled bar: several bars redrawn in place from several threads
need cursor movement across lines, clearing a bar when it finishes, re-drawing the bars
after a message printed above them, rate smoothing and terminal-width handling. ``tqdm``
(pure Python, no dependencies of its own, maintained for a decade and used by most of the
ML stack already installed next to this package) does all of that; the previous hand-rolled
``\\r`` bar handled a single bar on one line and wrote ``\\r`` into CI logs. The plain mode
stays our own code because there it is only "print a line now and then", and ``tqdm``'s
non-terminal output is still ``\\r``-based.
"""

from __future__ import annotations

import io
import os
import sys
import threading
import time
from typing import IO, Any

#: seconds between two plain-mode lines of the same bar
PLAIN_INTERVAL = 10.0
PREFIX = "  .. "


def _is_tty(stream: IO[str]) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):  # no isatty, or a closed stream
        return False


def _columns(stream: IO[str]) -> int:
    try:
        return os.get_terminal_size(stream.fileno()).columns
    except (AttributeError, ValueError, OSError, io.UnsupportedOperation):  # not a real terminal
        return 0


def _seconds(s: float) -> str:
    return f"{s:.1f}s" if s < 120 else f"{int(s) // 60}m{int(s) % 60:02d}s"


class Bar:
    """A handle on one progress bar; get it from :meth:`Progress.bar`."""

    def __init__(self, owner: Progress, name: str, total: int, unit: str) -> None:
        self._owner = owner
        self.name = name
        self.total = max(int(total), 0)
        self.unit = unit
        self.done = 0
        self.closed = False
        self.start = time.monotonic()
        self._last_line = self.start  # plain mode: when the last line was written
        self._tqdm: Any = None  # terminal mode: the tqdm bar
        self._note = ""
        self._position = -1

    def update(self, n: int = 1) -> None:
        """``n`` more units done."""
        with self._owner._lock:
            if not self.closed:
                self.done += n
                self._owner._changed(self, n)

    def set(self, done: int) -> None:
        """``done`` units done in all."""
        with self._owner._lock:
            if not self.closed:
                step, self.done = done - self.done, done
                self._owner._changed(self, step)

    def note(self, text: str) -> None:
        """A short status shown after the counts (e.g. ``"1,234 docs"``), updated at the next redraw."""
        with self._owner._lock:
            self._note = text
            if self._tqdm is not None:
                self._tqdm.set_postfix_str(text, refresh=False)

    def close(self, *, line: bool = True) -> None:
        """The work is over: remove the bar and write its "done" line (once; none if ``line=False``,
        e.g. when an error message follows)."""
        with self._owner._lock:
            if not self.closed:
                self.closed = True
                self._owner._finished(self, line=line)

    def __enter__(self) -> Bar:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---------------------------------------------------------------- lines
    def status_line(self) -> str:
        elapsed = time.monotonic() - self.start
        rate = self.done / elapsed if elapsed > 0 else 0.0
        line = f"{self.name}: {self.done:,}/{self.total:,} {self.unit}"
        if self._note:
            line += f" ({self._note})"
        if rate > 0 and self.done < self.total:
            line += f", {rate:,.0f}/s, ETA {_seconds((self.total - self.done) / rate)}"
        return line

    def done_line(self) -> str:
        """The final line: "done" when all the work was counted, else where it stopped."""
        took = _seconds(time.monotonic() - self.start)
        note = f" ({self._note})" if self._note else ""
        if self.done >= self.total:
            return f"{self.name}: done, {self.done:,}/{self.total:,} {self.unit}{note} in {took}"
        return f"{self.name}: stopped at {self.done:,}/{self.total:,} {self.unit} after {took}"


class _NullBar(Bar):
    """What a quiet :class:`Progress` hands out: every call does nothing."""

    def update(self, n: int = 1) -> None:
        pass

    def set(self, done: int) -> None:
        pass

    def close(self, *, line: bool = True) -> None:
        self.closed = True


class Progress:
    """The progress reporter: :meth:`bar` for counted work, :meth:`say` for one-off lines.

    ``stream`` defaults to ``sys.stderr`` as it is when the reporter is made (so pytest's
    capture sees it). ``interval`` is the plain-mode spacing of lines (default
    :data:`PLAIN_INTERVAL`).
    """

    def __init__(self, quiet: bool = False, stream: IO[str] | None = None, *, interval: float | None = None):
        self.quiet = quiet
        self.stream = sys.stderr if stream is None else stream
        self.interval = PLAIN_INTERVAL if interval is None else interval
        self.live = not quiet and _is_tty(self.stream)
        self._lock = threading.RLock()
        self._open: list[Bar] = []

    # ------------------------------------------------------------------ API
    def bar(self, name: str, total: int, unit: str = "items") -> Bar:
        """Open a bar for ``total`` units of work named ``name`` (e.g. a backend)."""
        if self.quiet:
            return _NullBar(self, name, total, unit)
        handle = Bar(self, name, total, unit)
        with self._lock:
            taken = {b._position for b in self._open}
            handle._position = next(i for i in range(len(taken) + 1) if i not in taken)
            self._open.append(handle)
            if self.live:
                handle._tqdm = self._make_tqdm(handle)
        return handle

    def say(self, message: str) -> None:
        """One line, printed whole (above the live bars on a terminal)."""
        if self.quiet:
            return
        with self._lock:
            self._line(PREFIX + message)

    __call__ = say

    def close(self) -> None:
        """Close every bar still open."""
        with self._lock:
            for handle in list(self._open):
                handle.close()

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------ internals (lock held)
    def _make_tqdm(self, handle: Bar) -> Any:
        from tqdm import tqdm  # imported only when a live view is drawn

        # follow the terminal's size; one that reports none (a fresh pty, `docker -t`) gets 100x20
        # (left to itself tqdm reads 0 columns / -1 rows there and draws nothing)
        sized = _columns(self.stream) > 0
        return tqdm(
            total=handle.total,
            desc=handle.name,
            unit=f" {handle.unit}" if handle.unit else "it",
            position=handle._position,
            leave=False,
            file=self.stream,
            dynamic_ncols=sized,
            ncols=None if sized else 100,
            nrows=None if sized else 20,
            mininterval=0.1,
            miniters=1,  # keeps tqdm's monitor thread from redrawing outside our lock
        )

    def _line(self, text: str) -> None:
        if self.live:
            from tqdm import tqdm

            tqdm.write(text, file=self.stream)  # clears the bars, writes, redraws them
        else:
            self.stream.write(text + "\n")
        self.stream.flush()

    def _changed(self, handle: Bar, step: int) -> None:
        if self.live:
            if step:
                handle._tqdm.update(step)
            return
        now = time.monotonic()
        if now - handle._last_line >= self.interval:
            handle._last_line = now
            self._line(PREFIX + handle.status_line())

    def _finished(self, handle: Bar, *, line: bool = True) -> None:
        if handle in self._open:
            self._open.remove(handle)
        if handle._tqdm is not None:
            handle._tqdm.close()
            handle._tqdm = None
        if line:
            self._line(PREFIX + handle.done_line())
