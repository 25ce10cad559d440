"""Byte sources for corpus reading: a file, gzip or Zstandard stream, or a byte range of a file.

``.gz`` is read with :mod:`gzip`, ``.zst`` with the ``zstandard`` package
(streamed: a frame of any size in :data:`BLOCK` pieces); ``-`` is standard
input. A :class:`Span` names one piece of an input for readers that cut a
big file apart (bytes of an uncompressed file, row groups of Parquet).

Every read streams: a compressed input is never decompressed whole (a few hundred KB of zstd
can hold 3 GB of ``"0\\n"``), and :func:`lines` holds at most one line, refusing one longer than
its limit (``limits.current().corpus_line``, 64 MiB: a 500 MB JSONL line peaked at 9.3 GB as a
whole) as it grows, before it is whole.

Out of scope: what the bytes mean (``corpus``), seeking in compressed streams.
"""

from __future__ import annotations

import gzip
import sys
from collections.abc import Iterable, Iterator
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


def too_long(where: str, size: int, limit: int, what: str = "one document") -> CorpusError:
    return CorpusError(
        f"{where}: over {limit:,} bytes as {what} (at least {size:,}); a document is held whole in memory: "
        "split it, or raise the limit with --max-file-mb"
    )


def lines(
    chunks: Iterable[bytes], *, path: str, limit: int, line: int = 0, start: int = 0
) -> Iterator[tuple[int, int, bytes]]:
    """``(line number, byte offset, line without its \\n)`` per line of ``chunks`` (the blocks of
    ``path`` from byte ``start``, line ``line``); a last line without ``\\n`` counts. Each block is
    split once and a line's pieces are joined once, when it ends (no re-copying of a long line);
    a line over ``limit`` bytes is :func:`too_long` as soon as its pieces pass the limit."""
    carry: list[bytes] = []
    held, lineno, pos = 0, line, start
    for block in chunks:
        parts = block.split(b"\n")
        tail = parts.pop()
        if carry and parts:
            parts[0] = b"".join(carry) + parts[0]
            carry, held = [], 0
        for piece in parts:
            lineno += 1
            if len(piece) > limit:
                raise too_long(f"{path}: line {lineno}", len(piece), limit, "one line")
            yield lineno, pos, piece
            pos += len(piece) + 1
        if tail:
            carry.append(tail)
            held += len(tail)
            if held > limit:
                raise too_long(f"{path}: line {lineno + 1}", held, limit, "one line")
    if carry:
        yield lineno + 1, pos, b"".join(carry)
