"""Run every check for every backend against the reference: ``run_suite``.

``run_suite`` loads each named backend through the one loader
(:func:`conformance.checks.loading.load_named`: a backend that cannot run becomes a
*missing*, *skip* or *error* result) and runs the loaded ones through
:class:`~conformance.checks.compare.Runner`, up to ``workers`` at once, keeping the
order of the names. Every backend runs in a forked child of its own, whatever ``workers``
(``conformance.checks.forked``): a library that segfaults, aborts, hangs or runs out of memory
ends its child only and becomes a *crashed* result, a failing row; the checks are Python-bound,
so processes, not threads, run them in parallel. Where ``fork`` is not available the backends
run in this process (in threads with ``workers > 1``), without that isolation.

The suite's pieces, one idea per module (all re-exported here for older callers):
``compare`` (the checks), ``results`` (``BackendResult`` and ``result_rows``),
``windows`` (``first_difference``, ``first_window``), ``loading`` (the loader),
``bars`` (progress), ``forked`` (a child per backend), ``supervise`` / ``supervisor`` /
``plumbing`` (the processes that run, watch and reap them), ``watch`` (where a child is).

Out of scope: rendering (``conformance.report``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor

from conformance.backends import shared_reference
from conformance.checks.bars import ProgressArg
from conformance.checks.compare import CHECKS, INJECTION_TEXT, Runner
from conformance.checks.forked import can_fork, not_run, run_forked
from conformance.checks.loading import load_named
from conformance.checks.results import (
    CHECK_CAPS,
    FIXES,
    STREAM_MAX_CHARS,
    BackendResult,
    Failure,
    result_rows,
)
from conformance.checks.windows import first_difference, first_window
from conformance.core.fixtures import FixtureSet
from conformance.core.layout import Exports
from stacktok_export.util.progress import Progress


def run_suite(
    exports: Exports,
    fixtures: FixtureSet,
    names: Sequence[str],
    *,
    progress: ProgressArg = None,
    workers: int = 1,
    shards: int | None = None,
    meanwhile: Callable[[], object] | None = None,
) -> tuple[list[BackendResult], list[str], Runner]:
    """Run ``names`` (up to ``workers`` at once) against the reference; keep ``names`` order.

    ``progress`` is a :class:`~stacktok_export.util.progress.Progress` (one bar per running
    backend, updated per probe) or a message callback (a line every 200 probes). The probes are
    cut into ``shards`` parts (default: ``conformance.checks.forked``'s rule) and ``meanwhile``
    (other work of the caller's) runs while the children work; without ``fork`` it runs first.

    A backend whose library is absent is *missing*; one whose export file is not in the
    directory is *skip*; one whose library refuses the directory is *error*, carrying the
    library's own message; one whose process died is *crashed* -- never an exception out of here.
    """
    ref = shared_reference(exports.artifact)
    runner = Runner(ref, fixtures, progress=progress)

    def one(name: str) -> BackendResult:
        loaded = load_named(name, exports)
        if loaded.backend is None:
            return not_run(loaded)
        return runner.run(loaded.backend)

    if can_fork() and names:
        quiet = progress is None or (isinstance(progress, Progress) and progress.quiet)
        results, stale = run_forked(
            runner, exports, names, workers=workers, quiet=quiet, shards=shards, meanwhile=meanwhile
        )
        return results, stale, runner
    if meanwhile is not None:
        meanwhile()
    if workers <= 1:
        results = [one(n) for n in names]
    else:
        with ThreadPoolExecutor(max_workers=workers) as pool:
            results = list(pool.map(one, names))
    return results, runner.stale_declarations(results), runner


__all__ = [
    "CHECKS",
    "CHECK_CAPS",
    "FIXES",
    "INJECTION_TEXT",
    "STREAM_MAX_CHARS",
    "BackendResult",
    "Failure",
    "Runner",
    "first_difference",
    "first_window",
    "result_rows",
    "run_suite",
]
