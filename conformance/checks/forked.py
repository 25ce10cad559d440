"""Run backends in forked worker processes: ``run_forked``, the parallel path of ``run_suite``.

The checks are Python-bound (per-probe encode, decode and stream calls), so threads share
one core under the GIL. Here each backend runs in a worker process forked from the one
that already holds the reference, the fixtures and the reference's ids for every probe
(the :class:`~conformance.checks.compare.Runner`), so nothing is loaded or encoded twice.
A worker loads its backend through :func:`~conformance.checks.loading.load_named`, runs
it, and sends back the :class:`~conformance.checks.results.BackendResult` and the stale
declarations of that backend (a declaration names one backend, so the union of the
per-backend lists, in declaration order, is the list the sequential path computes).

Progress is relayed: a worker's bars and lines go through a queue to the caller's
``progress``, drawn by the parent only. A library that redirects fds 1 and 2 while
loading (issue #20) does so in its worker, whose fds are its own.

Out of scope: deciding how many workers (``run_suite``'s ``workers``), platforms without
``fork`` (the caller falls back to threads there).
"""

from __future__ import annotations

import multiprocessing
import os
import sys
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from typing import Any

from conformance.checks.compare import Runner
from conformance.checks.loading import Loaded, load_named
from conformance.checks.results import BackendResult
from conformance.core.layout import Exports
from stacktok_export.progress import Bar, Progress

#: what a forked worker inherits: (runner, exports, relay queue or None, relay kind)
_STATE: dict[str, Any] = {}
_BATCH = 50  # probe updates a worker sends at once


def can_fork() -> bool:
    return "fork" in multiprocessing.get_all_start_methods()


class _RelayBar:
    """A worker's bar: counts go to the parent in batches."""

    def __init__(self, queue: Any, name: str) -> None:
        self.queue, self.name, self.pending = queue, name, 0

    def update(self, n: int = 1) -> None:
        self.pending += n
        if self.pending >= _BATCH:
            self.queue.put(("update", self.name, self.pending))
            self.pending = 0

    def __enter__(self) -> _RelayBar:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.pending:
            self.queue.put(("update", self.name, self.pending))
        self.queue.put(("close", self.name))


class _RelayProgress(Progress):
    """A worker's stand-in for the parent's :class:`Progress`: bars and lines are relayed."""

    def __init__(self, queue: Any) -> None:
        super().__init__(quiet=True)
        self.queue = queue

    def bar(self, name: str, total: int, unit: str = "items") -> Bar:
        self.queue.put(("open", name, total, unit))
        return _RelayBar(self.queue, name)  # type: ignore[return-value] -- the same duck interface

    def say(self, message: str) -> None:
        self.queue.put(("say", message))

    __call__ = say


def _relay(queue: Any, progress: Progress | Callable[[str], None]) -> None:
    """Parent side: draw what the workers send, until ``None``."""
    bars: dict[str, Bar] = {}
    for msg in iter(queue.get, None):
        kind, name = msg[0], msg[1]
        if kind == "say":
            progress(name)
        elif kind == "open":
            bars[name] = progress.bar(name, msg[2], unit=msg[3])  # type: ignore[union-attr]
        elif kind == "update":
            bars[name].update(msg[2])
        else:
            bars.pop(name).close()


def _worker_init() -> None:
    # the parent may have used tokenizers' thread pool; say so once here instead of a warning per worker
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    queue = _STATE["queue"]
    runner: Runner = _STATE["runner"]
    if queue is None:
        runner.progress = lambda msg: None
    elif _STATE["bars"]:
        runner.progress = _RelayProgress(queue)
    else:
        runner.progress = lambda msg: queue.put(("say", msg))


def _run_one(name: str) -> tuple[BackendResult, list[str]]:
    runner: Runner = _STATE["runner"]
    loaded = load_named(name, _STATE["exports"])
    if loaded.backend is None:
        return not_run(loaded), []
    result = runner.run(loaded.backend)
    return result, runner.stale_declarations([result])


def not_run(loaded: Loaded) -> BackendResult:
    """The result of a backend that did not load: its status and the reason, one line."""
    reason = loaded.line(400) if loaded.status == "error" else loaded.reason
    return BackendResult(name=loaded.name, status=loaded.status, reason=reason)


def run_forked(
    runner: Runner, exports: Exports, names: Sequence[str], *, workers: int, quiet: bool
) -> tuple[list[BackendResult], list[str]]:
    """Every backend of ``names`` in up to ``workers`` forked processes; results in ``names`` order."""
    ctx = multiprocessing.get_context("fork")
    progress = runner.progress
    queue = None if quiet else ctx.SimpleQueue()
    _STATE.update(runner=runner, exports=exports, queue=queue, bars=isinstance(progress, Progress))
    for stream in (sys.stdout, sys.stderr):  # a worker flushes inherited buffers when it exits
        stream.flush()
    relay = None
    try:
        with ProcessPoolExecutor(max_workers=workers, mp_context=ctx, initializer=_worker_init) as pool:
            futures = [pool.submit(_run_one, name) for name in names]
            if queue is not None:
                relay = threading.Thread(target=_relay, args=(queue, progress), daemon=True)
                relay.start()
            done = [f.result() for f in futures]
    finally:
        if relay is not None:
            queue.put(None)  # type: ignore[union-attr]
            relay.join()
        _STATE.clear()
    order = {d.id: i for i, d in enumerate(runner.decl.divergences)}
    stale = sorted({s for _, found in done for s in found}, key=order.__getitem__)
    return [r for r, _ in done], stale
