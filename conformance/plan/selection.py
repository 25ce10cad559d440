"""Which backends a run selects: ``--backends`` less ``--skip``, with ``--require`` inside them.

:func:`select_backends` is the rule of ``stacktok gate`` and ``python -m conformance`` (``stacktok
fuzz`` and ``stacktok audit`` take one list and nothing else): a selection that cannot run -- no
backend left, a backend both required and skipped, a required one not selected -- is a
:class:`~conformance.core.errors.UsageError` naming the fix (``conformance.backends.check_selection``).

Out of scope: whether a selected backend can run on a directory (``unavailable_backends``,
decided once the layout is known: ``conformance.plan.inputs``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from conformance.backends import REGISTRY, check_selection
from conformance.core.errors import UsageError


@dataclass(frozen=True)
class Selection:
    """The backends that run (in the order given), those that must, and those excluded by name."""

    backends: tuple[str, ...]
    required: tuple[str, ...] = ()
    #: not selected, or ``--skip``ped: named in the report, never a gap
    excluded: tuple[str, ...] = ()


def select_backends(backends: Sequence[str], *, require: Sequence[str], skip: Sequence[str]) -> Selection:
    """``--backends`` / ``--require`` / ``--skip`` as a :class:`Selection` (a usage error: cannot run)."""
    chosen = [b for b in backends if b not in skip]
    problem = check_selection(chosen, list(require), skipped=skip)
    if problem:
        raise UsageError(problem)
    return Selection(
        backends=tuple(chosen),
        required=tuple(require),
        excluded=tuple(b for b in REGISTRY if b not in chosen),
    )
