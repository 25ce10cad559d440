"""Who runs the parts: the local process pool (default) or a Ray cluster (``raycluster``).

Both run the same :class:`~.part.PartJob` s through :func:`~.part.run_part`,
so shards and manifest are byte-identical whichever ran. ``local`` runs the
parts one after another on this process: it reads, a pool of ``workers``
encoder processes encodes (at most ``2 x workers`` batches in flight: memory
is workers x batch, whatever the corpus size) and this process writes; one
worker encodes in-process. Counting units (``plan.count_unit``) goes to the
pool as well.

Out of scope: the cluster engine (``raycluster``), planning (``plan``).
"""

from __future__ import annotations

import multiprocessing as mp
import threading
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any

from ..corpus.corpus import CorpusOptions
from ..corpus.corpus_io import CorpusError, Span
from .encode import Batch, DocEncoder, Encoded, EncoderSpec, encode_in_worker, init_worker, share_worker
from .part import PartJob, run_part
from .plan import count_unit

ENGINES = ("local", "ray")
Encode = Callable[[Iterator[Batch]], Iterator[Encoded]]


class EngineError(RuntimeError):
    """The engine itself failed (a worker died, Ray is missing); the message says what to do."""


def start_pool(spec: EncoderSpec, *, workers: int) -> ProcessPoolExecutor | None:
    """Start ``workers`` encoder processes now; ``None`` for one worker, which encodes in-process.

    Where this process can fork safely (a platform with ``fork``, no other thread running) the
    encoder is built here once and the workers are forked with it: no imports, tokenizer load
    or tiktoken proof in each (about 0.45 s of CPU a worker, a tenth of a 40 MB pack on 2
    cores); an artifact that does not load fails here. Otherwise they are spawned and each
    builds its own while the caller reads and hashes its inputs.
    """
    if workers <= 1:
        return None
    if _fork_is_safe():
        share_worker(spec)
        pool = ProcessPoolExecutor(workers, mp_context=mp.get_context("fork"))
    else:
        pool = ProcessPoolExecutor(
            workers, mp_context=mp.get_context("spawn"), initializer=init_worker, initargs=(spec,)
        )
    for _ in range(workers):
        pool.submit(int)  # starts the processes (fork: all of them, before the pool's own threads)
    return pool


def _fork_is_safe() -> bool:
    """Forking copies only the calling thread: safe when it is the only one (no lock held elsewhere)."""
    return "fork" in mp.get_all_start_methods() and threading.active_count() == 1


def pool_encoder(spec: EncoderSpec, pool: ProcessPoolExecutor | None, *, workers: int) -> Encode:
    """Encoded batches in order: from ``pool`` (pipelined), or in-process without one."""
    if pool is None:
        encoder = DocEncoder(spec)
        return lambda stream: (encoder.encode_batch(b) for b in stream)

    def encode(stream: Iterator[Batch]) -> Iterator[Encoded]:
        pending: deque[Any] = deque()
        for batch in stream:
            pending.append(pool.submit(encode_in_worker, batch))
            if len(pending) >= 2 * workers:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()

    return encode


def count_task(path: str, span: Span, options: CorpusOptions) -> tuple[int, int] | str:
    """``plan.count_unit``, a problem of the input as its one-line message."""
    try:
        return count_unit(path, span, options)
    except CorpusError as exc:
        return str(exc)


def count_local(
    tasks: Sequence[tuple[str, Span]], options: CorpusOptions, pool: ProcessPoolExecutor | None
) -> list[tuple[int, int] | str]:
    if pool is None:
        return [count_task(path, span, options) for path, span in tasks]
    try:
        futures = [pool.submit(count_task, path, span, options) for path, span in tasks]
        return [f.result() for f in futures]
    except BrokenProcessPool:
        raise EngineError("a worker process died (out of memory?); rerun the same command") from None


def run_local(jobs: Sequence[PartJob], encode: Encode) -> Iterator[dict[str, Any]]:
    """Each part's record, in order."""
    try:
        for job in jobs:
            yield run_part(job, encode)
    except BrokenProcessPool:
        raise EngineError(
            "a worker process died (out of memory?); rerun the same command to resume"
        ) from None
