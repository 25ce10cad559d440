"""One part of a pack, run where its worker is: read its units, encode, write its shards, commit it.

A part writes ``shard-PPPPP-NNNNN`` files into the pack directory itself (every
worker sees the same directory) and records its progress in
``part-PPPPP.json``: after each shard (the shards so far, so a rerun keeps
them and goes on after the last one whose sha256 matches) and once complete
(``"done": true``: committed). Every file goes to a temporary name first and
is renamed when complete; a rerun of the part removes what a killed run of it
left (temp files, shards past the last good one), so running a part twice --
a retry, a rerun after any failure -- gives the same bytes.

Problems of the data (bad input, a fast encoder that differs) come back as a
one-line ``error`` / ``mismatch`` in the record, never as a traceback from a
remote worker.

Out of scope: choosing parts (``plan``), scheduling them (``engines``), the manifest.
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..corpus.corpus import CorpusOptions, read_input
from ..corpus.corpus_io import CorpusError
from ..util.atomic import write_text_atomic
from .encode import EMPTY, FLAG_NAMES, REFERENCE, SKIPPED, VERIFIED, Batch, Encoded
from .plan import Part
from .writer import ShardWriter, sha256_file, shard_files

BATCH_DOCS = 512
BATCH_BYTES = 1 << 20
RECORD = "part-{:05d}.json"


@dataclass(frozen=True)
class PartJob:
    """Everything a worker needs for one part (small and picklable)."""

    part: Part
    paths: tuple[str, ...]
    options: CorpusOptions
    out: str
    shard_tokens: int
    fmt: str
    dtype: str
    header_id: str  # sha256 of the pack's header: a record of another pack is not reused
    backend: str  # the fast encoder's name, for a mismatch message


def batches(job: PartJob, start: tuple[int, int] | None) -> Iterator[Batch]:
    """The part's documents after position ``start = (input, document)``, in batches of one input."""
    for unit in job.part.units:
        if start is not None and unit.source < start[0]:
            continue
        first = start[1] if start is not None and unit.source == start[0] else 0
        docs: list[tuple[int, str, str | None, int]] = []
        size = consumed = 0
        for doc in read_input(job.paths[unit.source], options=job.options, span=unit.span):
            if doc.number < first:
                continue
            docs.append((doc.number, doc.where, doc.text, doc.replaced))
            size += len(doc.text or "")
            consumed = doc.consumed
            if len(docs) >= BATCH_DOCS or size >= BATCH_BYTES:
                yield Batch(unit.source, docs, consumed)
                docs, size = [], 0
        if docs:
            yield Batch(unit.source, docs, consumed)


def run_part(job: PartJob, encode: Callable[[Iterator[Batch]], Iterator[Encoded]]) -> dict[str, Any]:
    """Run (or finish, or confirm) ``job``'s part; return its record (``done``, or ``error``/``mismatch``)."""
    out, index = Path(job.out), job.part.index
    host = socket.gethostname()
    if not out.is_dir():
        return _fail(index, f"--out {out} does not exist on node {host}: give a directory every node shares")
    for unit in job.part.units:
        if not os.path.isfile(job.paths[unit.source]):
            return _fail(
                index,
                f"input {job.paths[unit.source]} is not on node {host}: every node needs the inputs at "
                "the same path (a shared filesystem or a copy on each node)",
            )
    record_path = out / RECORD.format(index)
    old = _read_record(record_path, job.header_id)
    if old.get("done") and _present(out, old["shards"], job.fmt, job.dtype):
        return {**old, "host": host}
    shards = _good_prefix(out, old.get("shards", []), job.fmt)
    _clean(out, index, len(shards))
    start = tuple(shards[-1]["end"]) if shards else None
    writer = ShardWriter(out, job.shard_tokens, job.fmt, next_index=len(shards), part=index, dtype=job.dtype)
    record = {"format": "stacktok-pack-part-v1", "header": job.header_id, "part": index, "done": False}

    def save() -> None:
        write_text_atomic(record_path, _dumps({**record, "shards": shards}))

    try:
        for e in encode(batches(job, start)):  # type: ignore[arg-type]
            if e.mismatch is not None:
                writer.abort()
                return _fail(index, e.mismatch.message(job.backend), key="mismatch")
            _add(e, writer, shards, save)
    except CorpusError as exc:
        writer.abort()
        return _fail(index, str(exc))
    except BaseException:
        writer.abort()
        raise
    if writer.documents:
        shards.append(writer.flush())
    record.update(done=True, shards=shards, tail=writer.counts)
    write_text_atomic(record_path, _dumps(record))
    return {**record, "host": host}


def _add(e: Encoded, writer: ShardWriter, shards: list[dict[str, Any]], save: Callable[[], None]) -> None:
    start = 0
    for i, n in enumerate(e.lengths.tolist()):
        ids = e.ids[start : start + n]
        start += n
        shard = writer.add(ids, source=e.source, number=int(e.numbers[i]), counts=_counts(e, i))
        if shard is not None:
            shards.append(shard)
            save()


def _counts(e: Encoded, i: int) -> dict[str, int]:
    flag = int(e.flags[i])
    counts = {FLAG_NAMES[bit]: 1 for bit in (VERIFIED, REFERENCE, EMPTY, SKIPPED) if flag & bit}
    if e.replaced[i]:
        counts["invalid_utf8_replaced"] = int(e.replaced[i])
    return counts


def _fail(index: int, message: str, *, key: str = "error") -> dict[str, Any]:
    return {"part": index, "done": False, key: message, "host": socket.gethostname()}


def _dumps(doc: dict[str, Any]) -> str:
    return json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=True) + "\n"


def _read_record(path: Path, header_id: str) -> dict[str, Any]:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return doc if isinstance(doc, dict) and doc.get("header") == header_id else {}


def _present(out: Path, shards: list[dict[str, Any]], fmt: str, dtype: str) -> bool:
    """A committed part's files are all there, of the right size (``stacktok pack --check`` re-hashes)."""
    size = int(dtype[-1])
    for s in shards:
        files = [out / f for f in shard_files(s["name"], fmt)]
        if not all(f.is_file() for f in files) or files[0].stat().st_size != s["tokens"] * size:
            return False
    return True


def _good_prefix(out: Path, shards: list[dict[str, Any]], fmt: str) -> list[dict[str, Any]]:
    good = []
    for shard in shards:
        files = shard_files(shard["name"], fmt)
        if not all((out / f).is_file() for f in files) or sha256_file(out / files[0]) != shard["sha256"]:
            break
        good.append(shard)
    return good


def _clean(out: Path, index: int, keep: int) -> None:
    """Remove this part's shard files past the first ``keep`` and the temp files a killed run left."""
    mine, temp = f"shard-{index:05d}-", (f".shard-{index:05d}-", f".{RECORD.format(index)}.")
    for p in out.iterdir():
        stale = p.name.startswith(mine) and int(p.name[len(mine) : len(mine) + 5]) >= keep
        if stale or (p.name.startswith(temp) and p.name.endswith(".tmp")):
            p.unlink(missing_ok=True)
