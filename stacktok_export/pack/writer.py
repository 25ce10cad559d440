"""Shard files: token arrays that ``numpy.memmap`` opens, their document offsets, Megatron's index.

A pack directory holds, per shard ``shard-PPPPP-NNNNN`` (shard ``N`` of part ``P``):

- ``.bin``: the tokens, little-endian ``uint16`` (``uint32`` for a vocabulary
  over 65,536 ids; the manifest's ``dtype``), documents back to back
  (``numpy.memmap(path, dtype=manifest["dtype"], mode="r")``; nanoGPT/OLMo-style loaders);
- ``.offsets.npy``: ``uint64`` token offsets of its documents (``n + 1`` values,
  first 0, last the token count; ``numpy.load``);
- ``.idx`` with ``format="megatron"``: Megatron-LM's ``MMapIndexedDataset``
  index for the same ``.bin`` (header ``MMIDIDX\\0\\0``, version 1, dtype code 8 =
  uint16 -- or 4 = int32 for ``uint32`` shards: ids are below 2^31, so the bytes
  are the same -- then int32 lengths, int64 byte pointers, int64 document
  indices), so ``--data-path DIR/shard-00000-00000`` reads it unchanged.

A shard closes once it holds at least ``shard_tokens`` tokens, at the end of its
part, and never splits a document (one longer than that fills a shard alone). Tokens stream into a
temp file as documents arrive (memory does not grow with the shard's tokens), which is
renamed into place when the shard closes; ``sha256`` of each ``.bin`` goes to
the manifest. What is held per document is its length, 4 bytes (a C array, not a list: a shard
of 10^8 tokens in 3-token documents is 33M of them), and the offsets at close.

Hand-written: the Megatron index is 5 header fields and 3 arrays; its only
writer (``megatron-core``) needs torch. Out of scope: Megatron's multimodal
``sequence_modes`` and token dtypes other than ``uint16`` / ``uint32``.
"""

from __future__ import annotations

import array
import hashlib
import io
import os
import struct
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from ..util.atomic import write_bytes_atomic

MEGATRON_HEADER = b"MMIDIDX\x00\x00"
MEGATRON_CODES = {"<u2": 8, "<u4": 4}  # Megatron's DType: 8 = uint16, 4 = int32 (no uint32)
FORMATS = ("plain", "megatron")
UINT16_IDS = 1 << 16


def token_dtype(vocab_size: int) -> str:
    """``<u2`` while every id fits 16 bits, else ``<u4``: the tokenizer's ``vocab_size`` decides."""
    return "<u2" if vocab_size <= UINT16_IDS else "<u4"


def shard_name(part: int, index: int) -> str:
    return f"shard-{part:05d}-{index:05d}"


def megatron_index(lengths: np.ndarray, dtype: str = "<u2") -> bytes:
    """The ``.idx`` bytes for documents of ``lengths`` tokens (one sequence per document)."""
    n = len(lengths)
    pointers = np.zeros(n, dtype=np.int64)
    if n:
        np.cumsum(lengths[:-1].astype(np.int64) * np.dtype(dtype).itemsize, out=pointers[1:])
    return b"".join(
        (
            MEGATRON_HEADER,
            struct.pack("<Q", 1),
            struct.pack("<B", MEGATRON_CODES[dtype]),
            struct.pack("<Q", n),
            struct.pack("<Q", n + 1),
            lengths.astype("<i4").tobytes(),
            pointers.astype("<i8").tobytes(),
            np.arange(n + 1, dtype="<i8").tobytes(),
        )
    )


def _npy(array: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, array, allow_pickle=False)
    return buf.getvalue()


COUNTS = ("verified", "reference_encoded", "empty_dropped", "invalid_skipped", "invalid_utf8_replaced")


def zero_counts() -> dict[str, int]:
    return dict.fromkeys(COUNTS, 0)


@dataclass
class ShardWriter:
    """Collects documents in order and writes a shard whenever ``shard_tokens`` is reached.

    Every document read is attributed to the open shard (dropped ones only in
    its counts), so a shard's ``end`` is where a resumed run starts.
    """

    out: Path
    shard_tokens: int
    fmt: str = "plain"
    next_index: int = 0
    part: int = 0
    dtype: str = "<u2"

    def __post_init__(self) -> None:
        self._file: BinaryIO | None = None  # the open shard's temp file: tokens go to disk as they come
        self._tmp: Path | None = None
        self._digest = hashlib.sha256()
        self._lengths = array.array("I")  # tokens per document (a document is < 2**32 tokens)
        self._tokens = 0
        self.counts = zero_counts()
        self._end: tuple[int, int] | None = None

    def add(
        self, ids: np.ndarray, *, source: int, number: int, counts: dict[str, int]
    ) -> dict[str, Any] | None:
        """One document (``ids`` empty if dropped); return the shard this closed, if any."""
        for key, n in counts.items():
            self.counts[key] += n
        self._end = (source, number + 1)
        if not len(ids):
            return None
        if self._file is None:
            fd, tmp = tempfile.mkstemp(
                prefix=f".{shard_name(self.part, self.next_index)}.bin.", suffix=".tmp", dir=self.out
            )
            self._file, self._tmp = os.fdopen(fd, "wb"), Path(tmp)
        data = ids.astype(self.dtype, copy=False).tobytes()
        self._file.write(data)
        self._digest.update(data)
        self._lengths.append(len(ids))
        self._tokens += len(ids)
        return self.flush() if self._tokens >= self.shard_tokens else None

    @property
    def documents(self) -> int:
        return len(self._lengths)

    def flush(self) -> dict[str, Any]:
        """Close the open shard (it holds at least one document): rename its tokens into place,
        write its offsets (and Megatron index), describe it."""
        if self._file is None or self._tmp is None:
            raise RuntimeError("flush() without an open shard")
        name = shard_name(self.part, self.next_index)
        self._file.flush()
        os.fsync(self._file.fileno())
        self._file.close()
        os.chmod(self._tmp, 0o644)
        os.replace(self._tmp, self.out / f"{name}.bin")
        lengths = np.frombuffer(self._lengths, dtype=np.uintc)
        offsets = np.zeros(len(lengths) + 1, dtype="<u8")
        np.cumsum(lengths, dtype=np.uint64, out=offsets[1:])
        write_bytes_atomic(self.out / f"{name}.offsets.npy", _npy(offsets))
        if self.fmt == "megatron":
            write_bytes_atomic(self.out / f"{name}.idx", megatron_index(lengths, self.dtype))
        shard = {
            "name": name,
            "documents": int(len(lengths)),
            "tokens": int(self._tokens),
            "sha256": self._digest.hexdigest(),
            "counts": self.counts,
            "end": list(self._end or (0, 0)),
        }
        self._file = self._tmp = None
        self._digest, self._lengths, self._tokens = hashlib.sha256(), array.array("I"), 0
        self.counts = zero_counts()
        self.next_index += 1
        return shard

    def abort(self) -> None:
        """Drop the open shard's temp file (the run stopped before the shard was complete)."""
        if self._file is not None:
            self._file.close()
        if self._tmp is not None:
            self._tmp.unlink(missing_ok=True)
        self._file = self._tmp = None


def shard_files(name: str, fmt: str) -> list[str]:
    files = [f"{name}.bin", f"{name}.offsets.npy"]
    return files + [f"{name}.idx"] if fmt == "megatron" else files


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(8 << 20):
            digest.update(block)
    return digest.hexdigest()
