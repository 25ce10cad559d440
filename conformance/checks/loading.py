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
  message as ``"Type: message"`` (full; :meth:`Loaded.line` gives the first line, capped).

``KeyboardInterrupt`` and ``SystemExit`` pass through; anything else a library
raises is caught, pyo3 panics included (they derive from ``BaseException``).

Out of scope: which backends exist (``conformance.backends``), what a caller
reports for each outcome (runner results, fuzz runs, audit scans).
"""

from __future__ import annotations

from dataclasses import dataclass

from conformance.backends import load_backend
from conformance.core.layout import Exports
from conformance.core.protocol import Backend, BackendMissing, ExportAbsent

#: every outcome of :func:`load_named`, in the order a reader meets them
OUTCOMES = ("loaded", "missing", "skip", "error")


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


def load_named(name: str, exports: Exports) -> Loaded:
    """Load backend ``name`` over ``exports`` and classify the outcome (see the module docstring).

    An unknown ``name`` is an *error* outcome too (the registry's message lists the known
    ones); callers that take names from the command line check them first (``backend_list``).
    """
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
