"""Run backends in forked worker processes: ``run_forked``, the parallel path of ``run_suite``.

The checks are Python-bound (per-probe encode, decode and stream calls), so threads share
one core under the GIL. Here the work runs in worker processes forked from the one that
holds the reference and the fixtures (the :class:`~conformance.checks.compare.Runner`), so
nothing is loaded twice before the fork.

How the work is cut: a fixture set of :data:`SHARD_FROM` probes or more is cut into one
contiguous :class:`~conformance.checks.results.Part` per worker, balanced by an estimate of
each probe's cost (:func:`plan_parts`; the last part also carries the once-per-backend checks),
and worker *k* runs every backend on part *k*: each worker computes the reference's ids for its
own part only, and whichever backend is slowest, the workers finish together. The parts of a
backend are joined by :func:`~conformance.checks.results.merge_parts` into exactly the result
one whole run gives; a declaration is stale when it is stale in every part (the data that could
show it is the whole fixture set in each). A small fixture set runs one whole backend per task.

A worker loads each backend through :func:`~conformance.checks.loading.load_named`. Progress
is relayed: a worker's bars and lines go through a queue to the caller's ``progress``, drawn by
the parent only (a backend's parts share one bar). A library that redirects fds 1 and 2 while
loading (issue #20) does so in its worker, whose fds are its own. ``meanwhile`` runs in the
parent once the workers are forked (the gate's static checks), so it costs no wall time of its own.

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
from conformance.checks.results import STREAM_MAX_CHARS, BackendResult, Part, merge_parts
from conformance.core.fixtures import Probe
from conformance.core.layout import Exports
from stacktok_export.progress import Bar, Progress

#: what a forked worker inherits: (runner, exports, relay queue or None, relay kind)
_STATE: dict[str, Any] = {}
_BATCH = 50  # probe updates a worker sends at once
#: fixture sets this large are cut into one part per worker (smaller: a whole backend per task)
SHARD_FROM = 500
#: the cost model that balances the parts, in microseconds (measured on the shipped probes with
#: transformers, the slowest plain backend): a fixed cost per probe, a cost per character of a
#: streamed probe (the stream decodes every token) or of a longer one, and the once-per-backend
#: checks. A longer probe's cost was refitted to all seven plain backends together (2026-12-05):
#: tiktoken and llama.cpp are superlinear on one long pre-token (the 1 MB ``long-a-1m``: 0.36 s
#: and 0.92 s), so at 0.7 the part holding the long probes took 7.1 s against the other's 6.0 s
_PER_PROBE, _PER_STREAMED_CHAR, _PER_CHAR, _EXTRAS = 100.0, 3.3, 1.1, 450_000.0


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


def _relay(queue: Any, progress: Progress | Callable[[str], None], *, parts: int) -> None:
    """Parent side: draw what the workers send, until ``None``. Each backend runs in ``parts``
    parts, each opening and closing its bar: the bar opens with the first and closes with the
    last (the parts of one backend may run one after the other)."""
    bars: dict[str, Bar] = {}
    closed: dict[str, int] = {}
    for msg in iter(queue.get, None):
        kind, name = msg[0], msg[1]
        if kind == "say":
            progress(name)
        elif kind == "open":
            if name not in bars:
                bars[name] = progress.bar(name, msg[2], unit=msg[3])  # type: ignore[union-attr]
        elif kind == "update":
            bars[name].update(msg[2])
        else:
            closed[name] = closed.get(name, 0) + 1
            if closed[name] == parts:
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


def _run_task(task: list[tuple[str, Part | None]]) -> list[tuple[BackendResult, list[str]]]:
    """Each (backend, part) of ``task`` in turn: its result and its stale declarations."""
    runner: Runner = _STATE["runner"]
    out = []
    for name, part in task:
        loaded = load_named(name, _STATE["exports"])
        if loaded.backend is None:
            out.append((not_run(loaded), []))
            continue
        result = runner.run(loaded.backend, part=part)
        out.append((result, runner.stale_declarations([result])))
    return out


def plan_parts(probes: Sequence[Probe], n: int) -> list[Part]:
    """``probes`` cut into ``n`` contiguous parts of about equal estimated cost, the last one
    carrying the once-per-backend checks (never an empty part unless there are fewer probes)."""
    cost = [
        _PER_PROBE + len(p.text) * (_PER_STREAMED_CHAR if len(p.text) <= STREAM_MAX_CHARS else _PER_CHAR)
        for p in probes
    ]
    total = sum(cost) + _EXTRAS
    parts, start, done = [], 0, 0.0
    for k in range(1, n):
        stop, target = start, total * k / n
        while stop < len(probes) - (n - k) and done + cost[stop] / 2 < target:
            done += cost[stop]
            stop += 1
        parts.append(Part(start, stop, extras=False))
        start = stop
    parts.append(Part(start, len(probes), extras=True))
    return parts


def not_run(loaded: Loaded) -> BackendResult:
    """The result of a backend that did not load: its status and the reason, one line."""
    reason = loaded.line(400) if loaded.status == "error" else loaded.reason
    return BackendResult(name=loaded.name, status=loaded.status, reason=reason)


def run_forked(
    runner: Runner,
    exports: Exports,
    names: Sequence[str],
    *,
    workers: int,
    quiet: bool,
    shards: int | None = None,
    meanwhile: Callable[[], object] | None = None,
) -> tuple[list[BackendResult], list[str]]:
    """Every backend of ``names`` in up to ``workers`` forked processes; results in ``names`` order.

    ``shards`` parts of the probes (default: one per worker from :data:`SHARD_FROM` probes, else
    1: a whole backend per task); ``meanwhile`` runs here while the workers work."""
    probes = runner.fx.probes
    n = shards if shards is not None else (workers if len(probes) >= SHARD_FROM else 1)
    if n > 1:
        parts = plan_parts(probes, n)
        tasks = [[(name, part) for name in names] for part in parts]
    else:
        tasks = [[(name, None)] for name in names]
    ctx = multiprocessing.get_context("fork")
    progress = runner.progress
    queue = None if quiet else ctx.SimpleQueue()
    _STATE.update(runner=runner, exports=exports, queue=queue, bars=isinstance(progress, Progress))
    for stream in (sys.stdout, sys.stderr):  # a worker flushes inherited buffers when it exits
        stream.flush()
    relay = None
    try:
        with ProcessPoolExecutor(max_workers=workers, mp_context=ctx, initializer=_worker_init) as pool:
            futures = [pool.submit(_run_task, task) for task in tasks]
            if queue is not None:
                relay = threading.Thread(
                    target=_relay,
                    args=(queue, progress),
                    kwargs={"parts": n},
                    daemon=True,
                )
                relay.start()
            if meanwhile is not None:
                meanwhile()
            done = [f.result() for f in futures]
    finally:
        if relay is not None:
            queue.put(None)  # type: ignore[union-attr]
            relay.join()
        _STATE.clear()
    by_name: dict[str, list[tuple[BackendResult, list[str]]]] = {name: [] for name in names}
    for task, outcome in zip(tasks, done):
        for (name, _), got in zip(task, outcome):
            by_name[name].append(got)  # tasks are in part order: so is each backend's list
    order = {d.id: i for i, d in enumerate(runner.decl.divergences)}
    results, stale = [], set()
    for name in names:
        got = by_name[name]
        results.append(merge_parts([r for r, _ in got]))
        if results[-1].status in ("ok", "diverged"):
            stale |= set.intersection(*(set(found) for _, found in got))
    return results, sorted(stale, key=order.__getitem__)
