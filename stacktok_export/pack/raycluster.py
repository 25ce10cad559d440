"""The Ray engine: every part is a Ray task that reads, encodes and writes its own shards.

The driver sends small :class:`~.part.PartJob` s (a few hundred bytes) and
gets small records back (the part's shard list); no token id and no document
text flows through it or through the object store, so the driver's network
link and disk never limit the job. A task needs one CPU, holds one part's
batch at a time (bounded memory whatever the input sizes), and is retried by
Ray on another node if its node dies (a part run twice writes the same
bytes). At most ``4 x workers`` tasks are pending at once, so the driver's
memory does not grow with the number of parts either.

Every node needs stacktok, the inputs and the artifact at the same paths, and
``--out`` must be a directory all nodes share; a node without them gives one
line saying so. ``address`` joins an existing cluster (``ray start --head``);
without it a local Ray starts with ``workers`` CPUs.

Out of scope: object-store settings, autoscaling, GPUs, copying inputs to nodes.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator, Sequence
from typing import Any

from ..corpus.corpus import CorpusOptions
from ..corpus.corpus_io import Span
from .encode import DocEncoder, EncoderSpec
from .engines import EngineError, count_task
from .part import PartJob, run_part

_ENCODERS: dict[EncoderSpec, DocEncoder] = {}  # one per Ray worker process, kept between tasks


def part_task(job: PartJob, spec: EncoderSpec) -> dict[str, Any]:
    encoder = _ENCODERS.get(spec)
    if encoder is None:
        encoder = _ENCODERS.setdefault(spec, DocEncoder(spec))
    return run_part(job, lambda stream: (encoder.encode_batch(b) for b in stream))


def start(*, workers: int, address: str | None) -> int:
    """Start or join Ray; the number of tasks to run at once (``workers``, or the cluster's CPUs)."""
    try:
        import ray
    except ImportError:
        raise EngineError("--engine ray needs Ray: pip install 'stacktok[ray]'") from None
    if not ray.is_initialized():
        # without --address a new local Ray, even where `ray start` runs one (Ray would join that
        # and refuse num_cpus: "When connecting to an existing cluster, num_cpus ... must not be provided")
        kwargs: dict[str, Any] = (
            {"address": address} if address else {"address": "local", "num_cpus": workers or 1}
        )
        try:
            ray.init(include_dashboard=False, log_to_driver=False, logging_level="ERROR", **kwargs)
        except (ConnectionError, RuntimeError, ValueError) as exc:
            where = address or "local"
            raise EngineError(
                f"cannot start or join Ray (--address {where}): {exc}{_auth_hint(address)}"
            ) from None
    logging.getLogger("ray").setLevel(logging.WARNING)
    return workers or max(1, int(ray.cluster_resources().get("CPU", 1)))


def _auth_hint(address: str | None) -> str:
    """What to try when joining a cluster by HOST:PORT fails: since Ray 2.59 ``ray start`` turns
    on token authentication, which ``--address auto`` picks up on the head's machine but a client
    naming the address does not (measured with Ray 2.60: "Failed to connect" until
    ``RAY_AUTH_MODE=token`` is set)."""
    if not address or address == "auto" or os.environ.get("RAY_AUTH_MODE"):
        return ""
    return (
        "; if the cluster uses token authentication (`ray start` turns it on from Ray 2.59), set "
        "RAY_AUTH_MODE=token and RAY_AUTH_TOKEN to the head's `ray get-auth-token` and rerun"
    )


def _one_line(exc: BaseException) -> str:
    text = str(exc)
    if "No module named 'stacktok" in text:
        return (
            "stacktok is not installed on a node of the Ray cluster: pip install 'stacktok[ray]' "
            "on every node (the same version as here)"
        )
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    first = (lines[-1] if lines else type(exc).__name__)[:300]
    return (
        f"the Ray run failed: {first}; every node needs stacktok, the inputs and the artifact at the same "
        "paths. Rerun the same command: committed parts are kept"
    )


def _results(refs: Iterator[Any], *, limit: int) -> Iterator[Any]:
    """The results of the tasks ``refs`` yields (submitted lazily, ``limit`` pending at most), as they end."""
    import ray

    pending: list[Any] = []
    more = True
    while more or pending:
        while more and len(pending) < limit:
            ref = next(refs, None)
            if ref is None:
                more = False
            else:
                pending.append(ref)
        if not pending:
            break
        done, pending = ray.wait(pending, num_returns=1)
        try:
            yield ray.get(done[0])
        except (ray.exceptions.RayError, OSError) as exc:
            for ref in pending:
                ray.cancel(ref, force=True)
            raise EngineError(_one_line(exc)) from None


def count_ray(
    tasks: Sequence[tuple[str, Span]], options: CorpusOptions, *, workers: int
) -> list[tuple[int, int] | str]:
    import ray

    remote = ray.remote(num_cpus=1)(_indexed_count)
    refs = (remote.remote(i, path, span, options) for i, (path, span) in enumerate(tasks))
    out: list[Any] = [None] * len(tasks)
    for i, result in _results(refs, limit=4 * workers):
        out[i] = result
    return out


def _indexed_count(i: int, path: str, span: Span, options: CorpusOptions) -> tuple[int, Any]:
    return i, count_task(path, span, options)


def run_ray(jobs: Sequence[PartJob], spec: EncoderSpec, *, workers: int) -> Iterator[dict[str, Any]]:
    """Each part's record, in the order parts finish."""
    import ray

    remote = ray.remote(num_cpus=1)(part_task)
    yield from _results((remote.remote(job, spec) for job in jobs), limit=4 * workers)
