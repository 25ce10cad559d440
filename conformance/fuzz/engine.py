"""The fuzz loop: one generator thread, one thread per backend, then shrinking.

The calling thread generates examples in batches of :data:`BATCH` with their reference
ids (computed once) and hands every batch to each backend's queue; a slow backend may
lag :data:`QUEUE_BATCHES` batches behind before the generator waits. Backends run in
parallel over the same batches in the same order, so with ``--examples N`` the result
is the same whatever the threads' timing; ``--seconds T`` checks a time-dependent
prefix of the same stream. An adapter that raises outside ``encode`` marks its run
``error`` and keeps draining its queue. After the loop every backend's kept examples
are shrunk in parallel and the runs are reported in ``--backends`` order.

Out of scope: what one check means (``conformance.fuzz.compare``), shrinking
(``conformance.fuzz.minimize``) and output (``conformance.fuzz.output``).
"""

from __future__ import annotations

import copy
import queue
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor

from conformance.core.declared import Declarations
from conformance.fuzz.compare import check_batch
from conformance.fuzz.config import FuzzConfig
from conformance.fuzz.declarations import UnicodeDeclarations
from conformance.fuzz.examples import make_example, reference_ids
from conformance.fuzz.generators import GenContext
from conformance.fuzz.load import load_inputs
from conformance.fuzz.minimize import shrink_backend
from conformance.fuzz.oracle import Oracle
from conformance.fuzz.results import BackendRun, FuzzReport
from stacktok_export import StackTokenizer

BATCH = 64  # examples handed to the backend threads at a time
QUEUE_BATCHES = 8  # batches a slow backend may lag behind the generator
PROGRESS_EVERY = 10.0  # seconds between progress lines


def _worker(oracle: Oracle, run: BackendRun, inbox: queue.Queue, keep: int) -> None:
    while (batch := inbox.get()) is not None:
        if run.status == "error":
            continue  # keep draining so the generator never blocks
        try:
            check_batch(oracle, run, batch, keep)
        except Exception as exc:  # an adapter bug, not an input finding
            run.status, run.reason = "error", f"{type(exc).__name__}: {exc}"[:300]
    run.seconds = oracle.busy


def _feed(
    config: FuzzConfig,
    ref: StackTokenizer,
    ctx: GenContext,
    inboxes: Sequence[queue.Queue],
    runs: Sequence[BackendRun],
    say: Callable[[str], None],
) -> tuple[int, float]:
    """Generate examples and their reference ids in batches until the budget is spent.

    Returns (examples generated, CPU seconds spent in the reference)."""
    names = list(config.generators)
    start = time.perf_counter()
    deadline = None if config.seconds is None else start + config.seconds
    next_progress, index, ref_seconds = start + PROGRESS_EVERY, 0, 0.0
    limit = config.examples
    while (limit is None or index < limit) and (deadline is None or time.perf_counter() < deadline):
        n = BATCH if limit is None else min(BATCH, limit - index)
        examples = [make_example(config.seed, i, names, ctx) for i in range(index, index + n)]
        t0 = time.thread_time()
        batch = [(ex, {m: reference_ids(ref, ex.text, m) for m in ex.modes}) for ex in examples]
        ref_seconds += time.thread_time() - t0
        for inbox in inboxes:
            inbox.put(batch)
        index += n
        if time.perf_counter() >= next_progress:
            next_progress += PROGRESS_EVERY
            found = ", ".join(f"{r.name} {r.undeclared}" for r in runs if r.undeclared)
            elapsed = time.perf_counter() - start
            say(f"{index} examples in {elapsed:.0f}s; undeclared so far: {found or 'none'}")
    return index, ref_seconds


def run_fuzz(config: FuzzConfig, say: Callable[[str], None] = lambda m: None) -> FuzzReport:
    inputs, loaded, unloaded = load_inputs(config, say)
    if not loaded:
        return FuzzReport(config, unloaded, 0, 0.0, 0.0, 0.0)
    ref, fixtures = inputs.ref, inputs.fixtures
    ctx = GenContext.build(ref, fixtures.probes)
    declarations = Declarations(fixtures.divergences, ref)
    # each backend's thread gets its own copy of the reference (its caches are the thread's),
    # copied from the one the plan loaded: the artifact is never read again
    oracles = [
        Oracle(b, copy.deepcopy(ref), UnicodeDeclarations.for_backend(declarations, b)) for b, _ in loaded
    ]
    runs = [run for _, run in loaded]
    inboxes: list[queue.Queue] = [queue.Queue(maxsize=QUEUE_BATCHES) for _ in loaded]
    threads = [
        threading.Thread(target=_worker, args=(o, r, q, config.keep), daemon=True)
        for o, r, q in zip(oracles, runs, inboxes)
    ]
    for t in threads:
        t.start()
    start = time.perf_counter()
    try:
        examples, ref_seconds = _feed(config, ref, ctx, inboxes, runs, say)
    finally:
        for inbox in inboxes:
            inbox.put(None)
        for t in threads:
            t.join()
    loop_seconds = time.perf_counter() - start
    say(f"generated {examples} examples in {loop_seconds:.1f}s; shrinking")
    t0 = time.perf_counter()
    with ThreadPoolExecutor(max_workers=len(oracles)) as pool:
        list(pool.map(shrink_backend, oracles, runs))
    order = {name: i for i, name in enumerate(config.backends)}
    all_runs = sorted(runs + unloaded, key=lambda r: order[r.name])
    return FuzzReport(config, all_runs, examples, loop_seconds, time.perf_counter() - t0, ref_seconds)
