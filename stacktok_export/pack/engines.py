"""Who runs the encoder: the local process pool (default) or Ray Data on a cluster.

Both take the same inputs and a resume position and yield :class:`Encoded`
batches in corpus order, so shards and manifest are byte-identical whichever
ran. ``local`` reads on this process and keeps at most ``2 x workers`` batches
in flight (memory is workers x batch, whatever the corpus size); one worker
encodes in-process. ``ray`` reads each input in a Ray task (inputs must be at
the same path on every node) and encodes in an actor pool of ``workers``
actors, order preserved; ``address`` joins an existing cluster, otherwise a
local Ray starts with ``workers`` CPUs.

Out of scope: object-store spilling settings, autoscaling, GPUs.
"""

from __future__ import annotations

import logging
import multiprocessing as mp
import pickle
import warnings
from collections import deque
from collections.abc import Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any

from ..corpus import CorpusOptions, read_input
from .encode import Batch, DocEncoder, Encoded, EncoderSpec, encode_in_worker, init_worker

BATCH_DOCS = 512
BATCH_BYTES = 1 << 20
ENGINES = ("local", "ray")


class EngineError(RuntimeError):
    """The engine itself failed (a worker died, Ray is missing); the message says what to do."""


def batches(
    paths: Sequence[str], options: CorpusOptions, *, start: tuple[int, int] = (0, 0), only: int | None = None
) -> Iterator[Batch]:
    """Documents of ``paths`` from position ``start = (input, document)`` in batches of one input.

    ``only``: read just that input (a Ray read task).
    """
    for source, path in enumerate(paths):
        if source < start[0] or (only is not None and source != only):
            continue
        first = start[1] if source == start[0] else 0
        docs: list[tuple[int, str, str | None, int]] = []
        size = consumed = 0
        for doc in read_input(path, options=options):
            if doc.number < first:
                continue
            docs.append((doc.number, doc.where, doc.text, doc.replaced))
            size += len(doc.text or "")
            consumed = doc.consumed
            if len(docs) >= BATCH_DOCS or size >= BATCH_BYTES:
                yield Batch(source, docs, consumed)
                docs, size = [], 0
        if docs:
            yield Batch(source, docs, consumed)


def start_pool(spec: EncoderSpec, *, workers: int) -> ProcessPoolExecutor | None:
    """Start ``workers`` encoder processes now (they load the tokenizer while the caller reads
    and hashes its inputs); ``None`` for one worker, which encodes in-process."""
    if workers <= 1:
        return None
    pool = ProcessPoolExecutor(
        workers, mp_context=mp.get_context("spawn"), initializer=init_worker, initargs=(spec,)
    )
    for _ in range(workers):
        pool.submit(int)  # spawns the processes and runs their initializer
    return pool


def run_local(
    paths: Sequence[str],
    options: CorpusOptions,
    spec: EncoderSpec,
    *,
    start: tuple[int, int],
    pool: ProcessPoolExecutor | None,
    workers: int,
) -> Iterator[Encoded]:
    """Encoded batches in corpus order from ``pool`` (its owner shuts it down), or in-process."""
    if pool is None:
        encoder = DocEncoder(spec)
        for batch in batches(paths, options, start=start):
            yield encoder.encode_batch(batch)
        return
    pending: deque[Any] = deque()
    try:
        for batch in batches(paths, options, start=start):
            pending.append(pool.submit(encode_in_worker, batch))
            if len(pending) >= 2 * workers:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()
    except BrokenProcessPool:
        raise EngineError(
            "a worker process died (out of memory?); rerun the same command to resume"
        ) from None


class _RayEncoder:
    """A Ray Data actor: one :class:`DocEncoder`, batches in and out as pickled bytes."""

    def __init__(self, spec: EncoderSpec) -> None:
        self.encoder = DocEncoder(spec)

    def __call__(self, rows: dict[str, Any]) -> dict[str, Any]:
        out = [pickle.dumps(self.encoder.encode_batch(pickle.loads(b))) for b in rows["batch"]]
        return {"encoded": out}


def _ray_read(rows: dict[str, Any], *, paths: list[str], options: CorpusOptions, start: tuple[int, int]):
    for source in rows["source"]:
        for batch in batches(paths, options, start=start, only=int(source)):
            yield {"batch": [pickle.dumps(batch)]}


def run_ray(
    paths: Sequence[str],
    options: CorpusOptions,
    spec: EncoderSpec,
    *,
    start: tuple[int, int],
    workers: int,
    address: str | None,
) -> Iterator[Encoded]:
    try:
        import ray
        import ray.data
    except ImportError:
        raise EngineError("--engine ray needs Ray Data: pip install 'stacktok[ray]'") from None
    if not ray.is_initialized():
        # locally one CPU more than encoders, for the read tasks
        kwargs: dict[str, Any] = {"address": address} if address else {"num_cpus": (workers or 1) + 1}
        try:
            ray.init(include_dashboard=False, log_to_driver=False, logging_level="ERROR", **kwargs)
        except (ConnectionError, RuntimeError, ValueError) as exc:
            raise EngineError(f"cannot start or join Ray (--address {address or 'local'}): {exc}") from None
    if not workers:  # a cluster: one encoder per CPU, one CPU left for reading
        workers = max(1, int(ray.cluster_resources().get("CPU", 2)) - 1)
    logging.getLogger("ray").setLevel(logging.WARNING)
    warnings.filterwarnings("ignore", module=r"ray\.data\..*")  # "received 1 input(s)": one input file
    ctx = ray.data.DataContext.get_current()
    ctx.execution_options.preserve_order = True
    ctx.enable_progress_bars = False
    sources = [{"source": i} for i in range(start[0], len(paths))]
    if not sources:
        return
    ds = ray.data.from_items(sources, override_num_blocks=len(sources))
    # its own CPU share keeps Ray from fusing reading into the encoder actors (one file, one actor)
    ds = ds.map_batches(
        _ray_read,
        batch_size=1,
        num_cpus=0.25,
        fn_kwargs={"paths": list(paths), "options": options, "start": start},
    )
    ds = ds.map_batches(_RayEncoder, batch_size=1, fn_constructor_args=(spec,), concurrency=workers)
    try:
        for row in ds.iter_rows():
            yield pickle.loads(row["encoded"])
    except (ray.exceptions.RayError, OSError) as exc:
        first = str(exc).strip().splitlines()[-1][:300] if str(exc).strip() else type(exc).__name__
        raise EngineError(
            f"the Ray run failed: {first}; every node needs stacktok, the inputs and the artifact at the "
            "same paths. Rerun the same command to resume"
        ) from None
