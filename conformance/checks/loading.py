"""The one backend loader: build a named backend over ``Exports`` and say how it went.

Every tool that runs backends (the runner, ``stacktok fuzz``, ``stacktok audit``)
loads them through :func:`load_named`, which never raises for a backend that
cannot run; it classifies the outcome instead:

- ``loaded``: ``backend`` is ready;
- ``missing``: the library (or its adapter's imports) is not installed --
  ``reason`` is the adapter's message, with the install command;
- ``skip``: the directory holds no file this backend reads
  (:class:`~conformance.core.protocol.ExportAbsent`) -- ``reason`` names it;
- ``error``: the library refused the directory -- ``reason`` is its own
  message as ``"Type: message"`` (full; :meth:`Loaded.line` gives the first line, capped);
  or the load redirected the standard streams (below).

``KeyboardInterrupt`` and ``SystemExit`` pass through; anything else a library
raises is caught, pyo3 panics included (they derive from ``BaseException``).

A load must leave the process's standard streams alone (issue #20): a library that
redirects fd 1 or 2 while it loads (llama-cpp-python's ``verbose=False`` dup2's /dev/null
over them) can, with backends loading in parallel, leave them redirected for good and the
gate's table and verdict vanish. :func:`load_named` notes what fds 1 and 2 are before the
load (and the ``sys.stdout``/``sys.stderr`` objects); if the load changed any, it puts
them back and makes the load an ``error``. Loads run one at a time (one process-wide
lock): two loads at once would each take the other's redirect for the streams to keep,
and put it back. Checks still run in parallel; only loading is serialised. The lock is
per process: ``run_suite`` runs each backend in a forked child of its own
(``conformance.checks.forked``), whose fds 1 and 2 are its own, so a redirect there never
reaches the parent that prints the table; each load there is still checked and restored.
A library that kills its process while loading (a segfault, an abort) is not caught here: in
a child, the supervisor makes it a *crashed* result (``conformance.checks.supervisor``).

Out of scope: which backends exist (``conformance.backends``), what a caller
reports for each outcome (runner results, fuzz runs, audit scans).
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from conformance.backends import load_backend
from conformance.core.layout import Exports
from conformance.core.protocol import Backend, BackendMissing, ExportAbsent

#: every outcome of :func:`load_named`, in the order a reader meets them
OUTCOMES = ("loaded", "missing", "skip", "error")
STD_FDS = (1, 2)
STD_STREAMS = ("stdout", "stderr")
#: one backend load at a time, process-wide (re-entrant: an adapter may load another backend)
_LOADING = threading.RLock()
REDIRECTED = "the library redirected the process's standard streams while loading ({streams}); restored them"


@dataclass(frozen=True)
class Loaded:
    """How loading backend ``name`` went; ``backend`` is set only when ``status == "loaded"``."""

    name: str
    status: str  # one of OUTCOMES
    backend: Backend | None = None
    reason: str = ""
    #: what the adapter or library raised (None when loaded), for a caller that re-raises
    error: BaseException | None = None

    def line(self, limit: int = 400) -> str:
        """The first line of ``reason``, at most ``limit`` characters (a library's message can run on)."""
        return self.reason.splitlines()[0][:limit] if self.reason else ""


def _identity(fd: int) -> tuple[int, int] | None:
    try:
        stat = os.fstat(fd)
    except OSError:  # closed
        return None
    return (stat.st_dev, stat.st_ino)


@contextmanager
def _std_streams_kept(changed: list[str]) -> Iterator[None]:
    """Run the body; fds 1 and 2 (and ``sys.stdout``/``sys.stderr``) it re-pointed are put
    back and named in ``changed``. The fds' copies live only for the body."""
    before = {fd: _identity(fd) for fd in STD_FDS}
    copies = {fd: os.dup(fd) for fd in STD_FDS if before[fd] is not None}
    streams = {name: getattr(sys, name) for name in STD_STREAMS}
    try:
        yield
    finally:
        for fd, copy in copies.items():
            if _identity(fd) != before[fd]:
                os.dup2(copy, fd)
                changed.append(f"fd {fd}")
            os.close(copy)
        for name, stream in streams.items():
            if getattr(sys, name) is not stream:
                setattr(sys, name, stream)
                changed.append(f"sys.{name}")


def load_named(name: str, exports: Exports) -> Loaded:
    """Load backend ``name`` over ``exports`` and classify the outcome (see the module docstring).

    An unknown ``name`` is an *error* outcome too (the registry's message lists the known
    ones); callers that take names from the command line check them first (``backend_list``).
    """
    changed: list[str] = []
    with _LOADING, _std_streams_kept(changed):
        loaded = _load(name, exports)
    if changed:
        reason = REDIRECTED.format(streams=", ".join(changed))
        return Loaded(name, "error", reason=reason, error=RuntimeError(reason))
    return loaded


def _load(name: str, exports: Exports) -> Loaded:
    try:
        backend = load_backend(name, exports)
    except ExportAbsent as exc:
        return Loaded(name, "skip", reason=str(exc), error=exc)
    except BackendMissing as exc:
        return Loaded(name, "missing", reason=str(exc), error=exc)
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as exc:  # noqa: BLE001 -- pyo3 panics derive from BaseException
        return Loaded(name, "error", reason=f"{type(exc).__name__}: {exc}", error=exc)
    return Loaded(name, "loaded", backend=backend)


__all__ = ["OUTCOMES", "Loaded", "load_named"]
