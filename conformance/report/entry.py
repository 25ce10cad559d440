"""The one place a command's exception or signal becomes an exit code and one line on stderr.

:func:`run_main` runs a command's body: bad input (:func:`conformance.core.errors.input_errors`,
plus any ``usage_errors`` the caller adds) is ``PROG: error: ...`` and exit 2; any other
exception is ``PROG: internal error: ...`` and exit 3 -- never 0 or 1, which carry the
verdict -- with the full trace only when ``debug``; a ``--require``d backend that cannot run
(:class:`~conformance.core.errors.RequiredUnavailable`) is ``PROG: INCOMPLETE: ...`` and exit 4;
a closed pipe (``... | head``) is exit 0.

Signals (:func:`ending_on_signals`, which :func:`run_main` holds for the body): the first SIGINT
raises ``KeyboardInterrupt`` and the first SIGTERM :class:`Terminated` in the main thread, so
every ``finally`` runs -- the backends' children are killed and reaped
(``conformance.checks.supervise``), temporary files removed, no report written (reports are
written whole at the end, atomically) -- and the command ends with ``PROG: interrupted``, exit
130, or ``PROG: terminated``, exit 143: one line, no traceback. A signal while unwinding is not
raised again; a main thread that has not unwound :data:`FORCE_AFTER` s after the first signal
(stuck in a library call that does not return to Python) has the process ended with the same
line and code (``os._exit``; the backends' children die with it, ``PR_SET_PDEATHSIG``); a
signal raised where it cannot propagate (a ctypes callback, a ``__del__``) is sent again rather
than printed as "Exception ignored". A process forked inside the block (a worker: any
``os.fork``) starts with SIGINT and SIGTERM at their defaults -- a Ctrl-C ends it silently,
never with a traceback of its own -- and without the block's wakeup fd; the two signals are
held back across the fork, so none slips in before that reset.

    >>> run_main(lambda: 1 // 0, prog="demo")  # doctest: +SKIP
    demo: internal error: ZeroDivisionError: integer division or modulo by zero (rerun with --debug ...
    3

Out of scope: parsing arguments (``SystemExit`` from argparse passes through), the verdict
(``conformance.core.rows.exit_code``), SIGKILL (nothing can run; the children die with the
process), threads other than the main one (signals are handled there only), a main thread
stuck in C that holds the GIL (the watcher is a Python thread: it runs only where the library
releases the GIL, as ctypes, llama.cpp and the tokenizer libraries do).
"""

from __future__ import annotations

import _thread
import contextlib
import os
import select
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from typing import Any

from conformance.core.errors import RequiredUnavailable, input_errors
from conformance.core.rows import EXIT_INCOMPLETE, EXIT_INTERNAL, EXIT_USAGE

EXIT_INTERRUPTED, EXIT_TERMINATED = 130, 143
#: seconds the main thread has to unwind after a signal before the process ends anyway
FORCE_AFTER = 5.0
_ENDS = {signal.SIGINT: ("interrupted", EXIT_INTERRUPTED), signal.SIGTERM: ("terminated", EXIT_TERMINATED)}


class Terminated(SystemExit):
    """SIGTERM, raised in the main thread so that every ``finally`` runs; exit 143."""

    def __init__(self) -> None:
        super().__init__(EXIT_TERMINATED)


class _Signals:
    """The handlers of one :func:`ending_on_signals` block, and the watcher thread that ends the
    process if the main thread cannot unwind (it reads the signals from the wakeup fd, which the
    interpreter writes the moment a signal arrives, whatever the main thread is doing).

    The watcher is a bare ``_thread`` thread, not a ``threading.Thread``: ``stacktok pack`` forks
    its workers only when ``threading.active_count()`` is 1 (a fork copies the locks other threads
    hold), and this thread holds none while it waits, so it must not count."""

    def __init__(self, prog: str) -> None:
        self.prog, self.first, self.got = prog, 0, False
        self.defer, self.pending = 0, 0  # inside :func:`signals_deferred`: the signal waiting
        self.said = threading.Lock()
        self.r, self.w = os.pipe()
        for fd in (self.r, self.w):
            os.set_blocking(fd, False)
        self.old = {sig: signal.signal(sig, self._raise) for sig in _ENDS}
        self.old_fd = signal.set_wakeup_fd(self.w, warn_on_full_buffer=False)
        self.old_hook, sys.unraisablehook = sys.unraisablehook, self._unraisable
        self.watching = _thread.allocate_lock()  # held by the watcher while it runs
        self.watching.acquire()
        _thread.start_new_thread(self._watch, ())

    def _raise(self, signum: int, frame: object) -> None:
        if self.defer:
            self.pending = self.pending or signum
            return
        if self.first:
            return  # unwinding already; the watcher ends the process if it takes too long
        self.first, self.got = signum, True
        raise KeyboardInterrupt if signum == signal.SIGINT else Terminated()

    def _unraisable(self, unraisable: Any) -> None:
        """Our exception raised where it cannot propagate (a ctypes callback, a ``__del__``): not
        printed; the signal is sent again a moment later, to land where it can propagate."""
        if self.first and isinstance(unraisable.exc_value, (KeyboardInterrupt, Terminated)):
            signum, self.first = self.first, 0
            again = threading.Timer(0.01, os.kill, (os.getpid(), signum))
            again.daemon = True
            again.start()
            return
        self.old_hook(unraisable)

    def say(self, signum: int, *, raw: bool = False) -> None:
        """The one line (once per block, whoever gets here first: the main thread or the watcher,
        which writes to fd 2 itself: the stuck main thread may hold ``sys.stderr``'s lock)."""
        if self.said.acquire(blocking=False):
            line = f"{self.prog}: {_ENDS[signum][0]}"
            if raw:
                with contextlib.suppress(OSError):
                    os.write(2, f"{line}\n".encode())
            else:
                print(line, file=sys.stderr, flush=True)

    def _watch(self) -> None:
        try:
            self._wait_for_signals()
        finally:
            self.watching.release()

    def _wait_for_signals(self) -> None:  # nothing here may touch ``threading`` (class docstring)
        first, deadline = 0, float("inf")
        while True:
            ready, _, _ = select.select([self.r], [], [], max(0.0, min(deadline - time.monotonic(), 1.0)))
            got = b""
            with contextlib.suppress(BlockingIOError, OSError):
                got = os.read(self.r, 64) if ready else b""
            if 0 in got:  # the block is over
                return
            for sig in (s for s in got if s in _ENDS and not first):
                first, deadline = sig, time.monotonic() + FORCE_AFTER
            if first and time.monotonic() >= deadline:
                if self.defer:  # finishing what must be whole (the reports): give it the time
                    deadline = time.monotonic() + 1.0
                    continue
                self._force(first)

    def _force(self, signum: int) -> None:
        self.say(signum, raw=True)
        os._exit(_ENDS[signum][1])

    def close(self) -> None:
        with contextlib.suppress(OSError):
            os.write(self.w, b"\0")
        self.watching.acquire()  # the watcher has seen the end and returned
        sys.unraisablehook = self.old_hook
        signal.set_wakeup_fd(self.old_fd)
        for sig, old in self.old.items():  # after a signal the process is ending: a late one must
            signal.signal(sig, signal.SIG_IGN if self.got else old)  # not print a traceback
        os.close(self.r)
        os.close(self.w)


_ACTIVE: list[_Signals] = []


_FORKING = threading.local()  # the signal mask a fork inside a block restores


def _before_fork() -> None:
    """Inside a block, a fork happens with SIGINT/SIGTERM held back: no signal can reach the
    child between the fork and its reset below (it arrives once the child is reset)."""
    if _ACTIVE:
        _FORKING.mask = signal.pthread_sigmask(signal.SIG_BLOCK, _ENDS)


def _after_fork(*, child: bool) -> None:
    mask = getattr(_FORKING, "mask", None)
    _FORKING.mask = None
    if child and _ACTIVE:  # a worker: defaults for SIGINT/SIGTERM, no wakeup fd (module docstring)
        _ACTIVE.clear()
        with contextlib.suppress(ValueError):  # the forking thread is the child's main thread
            signal.set_wakeup_fd(-1)
            for sig in _ENDS:
                signal.signal(sig, signal.SIG_DFL)
    if mask is not None:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)


os.register_at_fork(
    before=_before_fork,
    after_in_parent=lambda: _after_fork(child=False),
    after_in_child=lambda: _after_fork(child=True),
)


@contextlib.contextmanager
def ending_on_signals(prog: str) -> Iterator[bool]:
    """SIGINT and SIGTERM end the block's work as exceptions, with one line (module docstring);
    yields whether this block holds the handlers (and so prints that line).

    Re-entrant: inside another block (``stacktok_cli.sigterm.sigterm_as_exit`` within
    :func:`run_main`) it changes nothing; outside the main thread it does nothing."""
    if _ACTIVE or threading.current_thread() is not threading.main_thread():
        yield False
        return
    signals = _Signals(prog)
    _ACTIVE.append(signals)
    try:
        yield True
    except KeyboardInterrupt:
        signals.say(signal.SIGINT)
        raise
    except Terminated:
        signals.say(signal.SIGTERM)
        raise
    finally:
        _ACTIVE.remove(signals)
        signals.close()


@contextlib.contextmanager
def signals_deferred() -> Iterator[None]:
    """A SIGINT/SIGTERM that arrives in the block takes effect at its end: for work that must be
    whole or not at all, like writing a run's several report files (none of it is left half
    done; the run still ends 130/143 right after). Outside :func:`ending_on_signals`, nothing."""
    signals = _ACTIVE[0] if _ACTIVE else None
    if signals is None:
        yield
        return
    signals.defer += 1
    try:
        yield
    finally:
        signals.defer -= 1
        if not signals.defer and signals.pending:
            signum, signals.pending = signals.pending, 0
            signals._raise(signum, None)


def run_main(
    fn: Callable[[], int],
    *,
    prog: str,
    debug: bool = False,
    usage_errors: tuple[type[BaseException], ...] = (),
) -> int:
    """``fn()``'s exit code, or 2 / 3 / 4 / 130 / 143 with one line on stderr (module docstring)."""
    held = False
    try:
        with ending_on_signals(prog) as held:
            return fn()
    except KeyboardInterrupt:
        if not held:  # no handlers of ours (not the main thread): nothing said it yet
            print(f"{prog}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Terminated:
        return EXIT_TERMINATED
    except BrokenPipeError:  # `... | head`
        sys.stderr.close()
        return 0
    except RequiredUnavailable as exc:
        print(f"{prog}: INCOMPLETE: {exc}", file=sys.stderr)
        return EXIT_INCOMPLETE
    except Exception as exc:  # noqa: BLE001 -- the one place that turns anything into one line
        if isinstance(exc, (*usage_errors, *input_errors())):
            print(f"{prog}: error: {exc}", file=sys.stderr)
            return EXIT_USAGE
        if debug:
            traceback.print_exc()
        where = "" if debug else " (rerun with --debug for the full trace)"
        print(
            f"{prog}: internal error: {type(exc).__name__}: {str(exc)[:300]}{where}; "
            "this is a bug in stacktok, not a verdict on your files -- please report it",
            file=sys.stderr,
        )
        return EXIT_INTERNAL


def verdict_or_usage(fn: Callable[[], int], *, prog: str) -> int:
    """``fn()``'s exit code; bad input (``input_errors``) is ``PROG: error: ...`` and exit 2, a
    ``--require``d backend that cannot run ``PROG: INCOMPLETE: ...`` and exit 4. Anything else
    propagates to the entry point's :func:`run_main` (exit 3). Every suite command's ``main``."""
    try:
        return fn()
    except RequiredUnavailable as exc:
        print(f"{prog}: INCOMPLETE: {exc}", file=sys.stderr)
        return EXIT_INCOMPLETE
    except input_errors() as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
