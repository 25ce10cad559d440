"""Planning a pack: the inputs cut into parts that any engine runs apart, giving one sequential read's bytes.

A *unit* is one piece of one input: a byte range of an uncompressed JSON Lines
or text file (``--text-docs line|paragraph``) cut at the first document
boundary at or after every multiple of ``part_bytes``, a run of Parquet row
groups of about ``part_bytes``, or a whole input (compressed, ``--text-docs
file``, or small). A *part* is consecutive units holding at least
``part_bytes`` of input: each piece of a cut input alone, whole inputs grouped (small ones
share a part; the last part may hold less).
Each choice depends on the inputs' bytes and ``part_bytes`` only -- never on
the engine, the worker count or timing -- so the parts, and the shards each
writes, are the same in every run.

A unit after the first of a cut input needs the number of documents and lines
of its input before it: :func:`count_unit` counts one unit (a task the engine
runs anywhere), :func:`number_units` adds them up.

Out of scope: reading (``corpus``), running a part (``part``), engines.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace

from ..corpus.corpus import PARAGRAPH_BREAK, CorpusOptions, input_kind, read_input, split_lines
from ..corpus.corpus_io import WHOLE, CorpusError, Span, compressed

DEFAULT_PART_BYTES = 64 << 20
#: how inputs become parts (in every pack's header: a rerun never mixes parts of two plans);
#: 2: a piece of a cut input is a part by itself (:func:`group_parts`)
PLAN_VERSION = 2
SCAN = 1 << 20  # bytes read at a time looking for a boundary
MAX_SCAN = 64 << 20  # no boundary this far after a cut point: the cut is dropped
_BLANK_LINE = re.compile(rb"[ \t]*\r?")  # a line a paragraph break can consume (without its \n)


@dataclass(frozen=True)
class Unit:
    """A piece (``span``) of input ``source``, ``size`` bytes of it; ``counted`` once numbered."""

    source: int
    span: Span
    size: int
    cut: bool = False  # the input has more than one unit: its numbers need counting


@dataclass(frozen=True)
class Part:
    """Consecutive units, written as the shards ``shard-{index:05d}-NNNNN``."""

    index: int
    units: tuple[Unit, ...]

    @property
    def size(self) -> int:
        return sum(u.size for u in self.units)


def splits(path: str, options: CorpusOptions) -> str | None:
    """``"bytes"`` or ``"rows"`` if ``path`` can be cut apart, else ``None``."""
    kind = input_kind(path)
    if kind == "parquet":
        return "rows"
    if compressed(path) or (kind == "text" and options.text_docs == "file"):
        return None
    return "bytes"


def cut_units(
    paths: Sequence[str], sizes: Sequence[int], options: CorpusOptions, *, part_bytes: int
) -> list[Unit]:
    """Every input's units in corpus order (not numbered yet: see :func:`number_units`)."""
    units: list[Unit] = []
    for source, (path, size) in enumerate(zip(paths, sizes)):
        how = splits(path, options)
        if how == "rows":
            units += _row_units(source, path, part_bytes)
            continue
        cuts = [0]
        if how == "bytes" and size > part_bytes:
            paragraph = input_kind(path) == "text" and options.text_docs == "paragraph"
            for at in range(part_bytes, size, part_bytes):
                c = _cut(path, at, paragraph=paragraph)
                if c is not None and cuts[-1] < c < size:
                    cuts.append(c)
        ends = [*cuts[1:], None]
        many = len(cuts) > 1
        for a, b in zip(cuts, ends):
            units.append(Unit(source, Span(a, b) if many else WHOLE, (size if b is None else b) - a, many))
    return units


def _row_units(source: int, path: str, part_bytes: int) -> list[Unit]:
    try:
        import pyarrow.parquet as pq

        meta = pq.ParquetFile(path).metadata
    except ImportError:
        raise CorpusError(f"{path}: reading Parquet needs pyarrow: pip install 'stacktok[pack]'") from None
    except Exception as exc:  # noqa: BLE001 -- pyarrow's errors: the reader names them the same way
        raise CorpusError(f"{path}: not a readable Parquet file ({exc})") from None
    units: list[Unit] = []
    first = rows = size = before = 0
    for g in range(meta.num_row_groups):
        rg = meta.row_group(g)
        size += sum(rg.column(c).total_compressed_size for c in range(rg.num_columns))
        rows += rg.num_rows
        if size >= part_bytes or g == meta.num_row_groups - 1:
            units.append(Unit(source, Span(first, g + 1, before), size))
            first, before, size = g + 1, before + rows, 0
            rows = 0
    return units or [Unit(source, WHOLE, 0)]


def _cut(path: str, at: int, *, paragraph: bool) -> int | None:
    """The first document start at or after byte ``at`` (``None``: none within :data:`MAX_SCAN`).

    Linear in the bytes scanned: a line start is looked for in each new chunk only, a paragraph
    start again only once a chunk brings a newline (a break needs one)."""
    with open(path, "rb") as f:
        f.seek(at - 1)
        scanned, buf = 0, bytearray()
        while scanned < MAX_SCAN:
            more = f.read(SCAN)
            if not paragraph:
                i = more.find(b"\n")
                if i >= 0:
                    return at - 1 + scanned + i + 1
            else:
                buf += more
                found = _paragraph_start(buf, eof=not more) if not more or b"\n" in more else None
                if found is not None:
                    return at - 1 + found
            if not more:
                return None
            scanned += len(more)
    return None


def _line_start(buf: bytes | bytearray) -> int | None:
    i = buf.find(b"\n")
    return i + 1 if i >= 0 else None


def _paragraph_start(buf: bytes | bytearray, *, eof: bool) -> int | None:
    """Where the first paragraph break after a non-blank line of ``buf`` ends.

    No break of a sequential read crosses the start of a non-blank line, so
    one searched from there is the break a sequential read finds; it is
    complete once the line after it is (greedy: it may go on over blank lines).
    """
    q = _line_start(buf)
    while q is not None:
        end = buf.find(b"\n", q)
        if end < 0:
            return None
        if not _BLANK_LINE.fullmatch(buf, q, end):
            break
        q = end + 1
    if q is None:
        return None
    m = PARAGRAPH_BREAK.search(buf, q)
    if m is None or (buf.find(b"\n", m.end()) < 0 and not eof):
        return None
    return m.end()


def count_unit(path: str, span: Span, options: CorpusOptions) -> tuple[int, int]:
    """``(documents, lines)`` of ``span`` of ``path``: what the next unit's numbers start after."""
    kind = input_kind(path)
    if kind == "text" and options.text_docs == "paragraph":
        # the count does not depend on --errors, so errors never stop it (the part reports them)
        lenient = replace(options, errors="replace")
        return sum(1 for _ in read_input(path, options=lenient, span=span)), 0
    docs = lines = 0
    for _, _, line in split_lines(path, replace(span, line=0), limit=options.document_limit()):
        lines += 1
        docs += 1 if kind != "jsonl" or line.strip() else 0
    return docs, lines


def needs_count(units: Sequence[Unit]) -> list[int]:
    """Indices of the units whose counts later units need (all but the last of each cut input)."""
    return [i for i, u in enumerate(units[:-1]) if u.cut and units[i + 1].source == u.source]


def number_units(units: Sequence[Unit], counts: dict[int, tuple[int, int]]) -> list[Unit]:
    """``units`` with each ``span``'s document and line numbers (``counts``: by unit index)."""
    out: list[Unit] = []
    docs = lines = 0
    for i, u in enumerate(units):
        if i and units[i - 1].source != u.source:
            docs = lines = 0
        if u.cut:
            out.append(replace(u, span=replace(u.span, number=docs, line=lines)))
        else:
            out.append(u)
        if i in counts:
            docs, lines = docs + counts[i][0], lines + counts[i][1]
    return out


def group_parts(units: Sequence[Unit], *, part_bytes: int) -> list[Part]:
    """Units into parts: each piece of a cut input is a part by itself, and whole inputs are
    grouped, in order, until a part holds at least ``part_bytes`` (the last may hold less).

    A piece already holds about ``part_bytes``: its cuts are the first document boundaries at or
    after two multiples of ``part_bytes``, so it is a line longer or shorter. Grouping pieces by
    size merged every piece a line short of ``part_bytes`` with the next one -- about half of
    them, parts of twice the size, and the Ray engine's last tasks ran alone (plan version 1).
    """
    parts: list[Part] = []
    run: list[Unit] = []

    def close() -> None:
        if run:
            parts.append(Part(len(parts), tuple(run)))
            run.clear()

    for u in units:
        if u.cut:
            close()
            parts.append(Part(len(parts), (u,)))
            continue
        run.append(u)
        if sum(x.size for x in run) >= part_bytes:
            close()
    close()
    return parts
