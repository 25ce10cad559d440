"""Byte sources for corpus reading: a file, gzip or Zstandard stream, or a byte range of a file.

``.gz`` is read with :mod:`gzip`, ``.zst`` with the ``zstandard`` package
(streamed: a frame of any size in :data:`BLOCK` pieces); ``-`` is standard
input. A :class:`Span` names one piece of an input for readers that cut a
big file apart (bytes of an uncompressed file, row groups of Parquet).

Out of scope: what the bytes mean (``corpus``), seeking in compressed streams.
"""

from __future__ import annotations

import gzip
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from typing import IO

BLOCK = 8 << 20


class CorpusError(ValueError):
    """An input cannot be read as asked; the message names the file, the place and the fix."""


@dataclass(frozen=True)
class Span:
    """A piece of one input: bytes ``[start, end)`` (Parquet: row groups), ``end=None`` to the end.

    ``number`` and ``line`` are the documents and lines of the input before ``start``.
    """

    start: int = 0
    end: int | None = None
    number: int = 0
    line: int = 0


WHOLE = Span()


def compressed(path: str) -> bool:
    """Whether ``path`` is read through a decompressor (then it cannot be cut into byte ranges)."""
    return path.lower().endswith((".gz", ".zst"))


def _open_binary(path: str) -> IO[bytes]:
    if path == "-":
        return sys.stdin.buffer
    if path.lower().endswith(".zst"):
        try:
            import zstandard
        except ImportError:
            raise CorpusError(f"{path}: reading .zst needs zstandard: pip install 'stacktok[pack]'") from None
    try:
        if path.lower().endswith(".zst"):
            raw = open(path, "rb")  # noqa: SIM115 -- closed with the reader
            return zstandard.ZstdDecompressor().stream_reader(raw, read_across_frames=True, closefd=True)
        return gzip.open(path, "rb") if path.endswith(".gz") else open(path, "rb")  # noqa: SIM115
    except OSError as exc:
        raise CorpusError(f"cannot read {path}: {exc.strerror}") from None


def blocks(path: str, span: Span = WHOLE, *, size: int = BLOCK) -> Iterator[bytes]:
    """The bytes of ``path`` (of ``span`` in it) in blocks of at most ``size``."""
    f = _open_binary(path)
    left = -1 if span.end is None else span.end - span.start
    try:
        if span.start:
            f.seek(span.start)
        while left and (block := f.read(size if left < 0 else min(size, left))):
            left -= len(block) if left > 0 else 0
            yield block
    except (OSError, EOFError, gzip.BadGzipFile) as exc:
        raise CorpusError(f"cannot read {path}: {exc}") from None
    except Exception as exc:  # zstandard.ZstdError: a corrupt frame
        if type(exc).__name__ != "ZstdError":
            raise
        raise CorpusError(f"cannot read {path}: not valid Zstandard data ({exc})") from None
    finally:
        if f is not sys.stdin.buffer:
            f.close()
