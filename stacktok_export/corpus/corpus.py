"""Corpus reading for ``stacktok train`` and ``stacktok pack``: documents from text, JSON Lines, Parquet.

Inputs are paths or globs (each glob sorted, in the order given; ``-`` is standard
input, read as text). The kind follows the name: ``*.jsonl`` / ``*.jsonl.gz`` /
``*.ndjson`` are JSON Lines (one object per line, the document is ``field``),
``*.parquet`` is Parquet (the document is the string column ``column``, read in
record batches with pyarrow), anything else is UTF-8 text; a ``.gz`` name is
gzip, a ``.zst`` name is Zstandard (streamed by the ``zstandard`` package).
Text files hold one document each (``text_docs="file"``), one per run of lines separated by blank lines
(``"paragraph"``: a line of spaces and tabs only separates; the separator and
the last line ending of a document are not part of it), or one per line
(``"line"``: its line ending is not part of it; an empty line is an empty document).

Bytes are decoded here, never by ``open()``: line endings are kept as they are
(CRLF stays CRLF). Invalid UTF-8 (and, in JSON, an escaped lone surrogate) stops
the read with the file and byte offset (``errors="strict"``), or becomes U+FFFD
(``"replace"``) or drops the document (``"skip"``); :class:`ReadStats` counts
what was done. Files are streamed in 8 MiB blocks; one document is held whole, so a document
(a whole file, a paragraph, a line, a JSONL line, a Parquet value) over
:meth:`CorpusOptions.document_limit` (``limits.current().corpus_line``, 64 MiB; ``--max-file-mb``
raises it) is refused naming its file and line as soon as it passes the limit, and JSON the
parser cannot take (nesting past the recursion limit, an integer of 5,000 digits) is a
:class:`CorpusError` naming the line, never an internal error.
A :class:`~.corpus_io.Span` reads a piece of an input (bytes between document boundaries,
or Parquet row groups) numbered as in the whole input: pieces give one read's documents.

Out of scope: bz2/xz compression, remote URLs, Parquet columns nested in
structs, deduplication and filtering.
"""

from __future__ import annotations

import glob
import hashlib
import json
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from itertools import chain
from pathlib import Path
from typing import Any

from ..util.limits import current
from . import corpus_io
from .corpus_io import WHOLE, CorpusError, Span, too_long

BLOCK = 8 << 20
ERRORS = ("strict", "replace", "skip")
TEXT_DOCS = ("file", "paragraph", "line")
MAX_DOCUMENT_BYTES = 1 << 30  # a document over this is refused whatever the limits say (memory)
_PARAGRAPH_BREAK = re.compile(rb"\r?\n(?:[ \t]*\r?\n)+")
PARAGRAPH_BREAK = _PARAGRAPH_BREAK  # what separates paragraphs (the packer cuts files at one)
_BLANKS = re.compile(rb"[ \t\r]*")
_SURROGATE = re.compile("[\ud800-\udfff]")


@dataclass(frozen=True)
class CorpusOptions:
    """How inputs become documents (every option changes the documents, so packs record them)."""

    text_docs: str = "file"
    field: str = "text"
    column: str = "text"
    errors: str = "strict"
    #: bytes one document may hold (``None``: ``limits.current().corpus_line`` where it is read);
    #: refusing never changes a document, so packs do not record it
    max_document: int | None = None

    def __post_init__(self) -> None:
        if self.text_docs not in TEXT_DOCS:
            raise CorpusError(f"text_docs must be one of {TEXT_DOCS}, got {self.text_docs!r}")
        if self.errors not in ERRORS:
            raise CorpusError(f"errors must be one of {ERRORS}, got {self.errors!r}")
        if self.max_document is not None and self.max_document < 1:
            raise CorpusError(f"max_document must be at least 1 byte, got {self.max_document}")

    def document_limit(self) -> int:
        """The most bytes one document may hold (at most :data:`MAX_DOCUMENT_BYTES`)."""
        return min(self.max_document or current().corpus_line, MAX_DOCUMENT_BYTES)


@dataclass
class ReadStats:
    """What reading did to the text: replacements, skipped documents (by cause)."""

    replaced: int = 0  # invalid sequences turned into U+FFFD
    skipped_invalid: int = 0  # documents dropped for invalid UTF-8 / lone surrogates

    def to_json(self) -> dict[str, int]:
        return {"invalid_utf8_replaced": self.replaced, "invalid_utf8_skipped": self.skipped_invalid}


@dataclass(frozen=True)
class Document:
    """One document of an input: its text (``None``: dropped by ``errors="skip"``), its place.

    ``number`` counts every document of its input from 0, dropped ones too;
    ``replaced`` is how many invalid sequences became U+FFFD; ``consumed`` is
    the input bytes read once it is (for progress).
    """

    text: str | None
    where: str
    number: int = 0
    replaced: int = 0
    consumed: int = 0


@dataclass
class _Cursor:
    """The next document number of one input."""

    number: int = 0

    def doc(self, text: str | None, where: str, replaced: int, consumed: int) -> Document:
        self.number += 1
        return Document(text, where, self.number - 1, replaced, consumed)


# ------------------------------------------------------------------ inputs
def expand_inputs(items: Sequence[str]) -> list[str]:
    """Paths, globs (sorted, ``**`` recursive) and ``-``; a pattern matching no file is an error."""
    paths: list[str] = []
    for item in items:
        if item == "-":
            paths.append("-")
            continue
        matches = sorted(glob.glob(item, recursive=True))
        if not matches and not any(ch in item for ch in "*?["):
            matches = [item]
        files = [m for m in matches if Path(m).is_file()]
        if not files:
            raise CorpusError(f"input {item!r} matches no readable file; check the path or glob")
        paths.extend(files)
    return paths


def input_kind(path: str) -> str:
    """``jsonl``, ``parquet`` or ``text``, from the file name."""
    name = path.lower().removesuffix(".gz").removesuffix(".zst")
    if name.endswith((".jsonl", ".ndjson")):
        return "jsonl"
    if name.endswith(".parquet"):
        return "parquet"
    return "text"


def describe_inputs(paths: Sequence[str]) -> list[dict[str, Any]]:
    """``{"path", "bytes", "sha256"}`` per input (standard input cannot be described: an error)."""
    out = []
    for path in paths:
        if path == "-":
            raise CorpusError(
                "standard input cannot be packed (a pack records each input's sha256); save it to a file"
            )
        digest = hashlib.sha256()
        size = 0
        try:
            with open(path, "rb") as f:
                while block := f.read(BLOCK):
                    digest.update(block)
                    size += len(block)
        except OSError as exc:
            raise CorpusError(f"cannot read {path}: {exc.strerror}") from None
        out.append({"path": path, "bytes": size, "sha256": digest.hexdigest()})
    return out


def _blocks(path: str, span: Span = WHOLE) -> Iterator[bytes]:
    return corpus_io.blocks(path, span, size=BLOCK)


def _span_blocks(path: str, span: Span) -> Iterator[bytes]:
    return _blocks(path) if span == WHOLE else _blocks(path, span)


# ------------------------------------------------------------------ decoding
def decode(data: bytes, *, errors: str, where: str, offset: int) -> tuple[str | None, int]:
    """UTF-8 ``data`` as text under the ``errors`` policy, and the replacements made.

    ``None`` means skip the document.
    """
    try:
        return data.decode("utf-8"), 0
    except UnicodeDecodeError as exc:
        first = exc
    if errors == "strict":
        bad = data[first.start : first.start + 1].hex()
        raise CorpusError(
            f"{where}: invalid UTF-8 at byte {offset + first.start} (0x{bad}, {first.reason}); "
            "convert the file to UTF-8, or pass --errors replace|skip"
        )
    if errors == "skip":
        return None, 0
    # one U+FFFD per invalid sequence, besides those the data spells (EF BF BD is always a whole
    # sequence: never part of an invalid one); one pass, where a retry per error was quadratic
    text = data.decode("utf-8", errors="replace")
    return text, text.count("\ufffd") - data.count(b"\xef\xbf\xbd")


def _no_surrogates(text: str, *, errors: str, where: str, escaped: bool = True) -> tuple[str | None, int]:
    """JSON may escape a lone surrogate (``"\\ud800"``), which is no UTF-8 text at all.

    ``escaped=False`` says the source held no ``\\ud``/``\\uD`` escape, so no surrogate can be
    here; ASCII text (``isascii`` is a flag CPython keeps, no scan) holds none either.
    """
    if not escaped or text.isascii():
        return text, 0
    m = _SURROGATE.search(text)
    if m is None:
        return text, 0
    if errors == "strict":
        raise CorpusError(
            f"{where}: lone surrogate U+{ord(m[0]):04X} at character {m.start()} (not encodable as UTF-8); "
            "fix or drop the record, or pass --errors replace|skip"
        )
    if errors == "skip":
        return None, 0
    return _SURROGATE.subn("\ufffd", text)


# ------------------------------------------------------------------ readers
def _text_file(path: str, opts: CorpusOptions, cur: _Cursor, span: Span) -> Iterator[Document]:
    if opts.text_docs == "line":
        yield from _lines(path, opts, cur, span)
        return
    if opts.text_docs == "file":
        yield _whole_file(path, opts, cur)
        return
    carry, start, number = b"", span.start, span.number  # carry begins at byte ``start`` of the file
    limit, resume = opts.document_limit(), 0  # no break ends in the new block before ``resume``
    for block in chain(_span_blocks(path, span), [None]):
        carry += block or b""
        last = 0
        for m in _PARAGRAPH_BREAK.finditer(carry, resume):
            if block is not None and m.end() + len(_BLANKS.match(carry, m.end())[0]) == len(carry):
                break  # the separator may go on in the next block
            number += 1
            yield from _paragraph(carry[last : m.start()], path, number, start + last, opts, cur)
            last = m.end()
        carry, start = carry[last:], start + last
        if len(carry) > limit:  # the paragraph going on into the next block
            raise too_long(f"{path}: paragraph {number + 1} (byte {start})", len(carry), limit)
        resume = len(carry.rstrip(b" \t\r\n"))  # a break is blanks only: it starts in the tail
    tail = re.sub(rb"\r?\n\Z", b"", carry)
    if tail.strip(b" \t\r\n"):
        number += 1
        yield from _paragraph(tail, path, number, start, opts, cur)


def _whole_file(path: str, opts: CorpusOptions, cur: _Cursor) -> Document:
    parts, size, limit = [], 0, opts.document_limit()
    for block in _blocks(path):
        size += len(block)
        if size > limit:
            raise CorpusError(
                f"{path}: over {limit:,} bytes as one document (--text-docs file holds a document "
                "whole in memory); split it, use --text-docs paragraph|line, or raise the limit with "
                "--max-file-mb"
            )
        parts.append(block)
    data = b"".join(parts)
    text, replaced = decode(data, errors=opts.errors, where=path, offset=0)
    return cur.doc(text, path, replaced, len(data))


def _lines(path: str, opts: CorpusOptions, cur: _Cursor, span: Span) -> Iterator[Document]:
    """One document per line, its ``\\n`` (and a ``\\r`` before it) not part of it."""
    for lineno, pos, line in split_lines(path, span, limit=opts.document_limit()):
        yield _line_doc(line.removesuffix(b"\r"), f"{path}:{lineno}", pos, opts, cur)


def _line_doc(line: bytes, where: str, pos: int, opts: CorpusOptions, cur: _Cursor) -> Document:
    text, replaced = decode(line, errors=opts.errors, where=where, offset=pos)
    return cur.doc(text, where, replaced, pos + len(line) + 1)


def _paragraph(
    piece: bytes, path: str, n: int, start: int, opts: CorpusOptions, cur: _Cursor
) -> Iterator[Document]:
    where = f"{path}: paragraph {n} (byte {start})"
    text, replaced = decode(piece, errors=opts.errors, where=where, offset=start)
    yield cur.doc(text, where, replaced, start + len(piece))


def split_lines(
    path: str, span: Span = WHOLE, *, limit: int | None = None
) -> Iterator[tuple[int, int, bytes]]:
    """``(line number, byte offset, line without its \\n)`` per line; a last line without
    ``\\n`` counts; a line over ``limit`` bytes (default ``limits.current().corpus_line``) is
    refused as it grows (:func:`~.corpus_io.lines`)."""
    limit = current().corpus_line if limit is None else limit
    return corpus_io.lines(_span_blocks(path, span), path=path, limit=limit, line=span.line, start=span.start)


def _jsonl_file(path: str, opts: CorpusOptions, cur: _Cursor, span: Span) -> Iterator[Document]:
    for lineno, pos, line in split_lines(path, span, limit=opts.document_limit()):
        if line.strip():
            text, replaced = _json_record(line, f"{path}:{lineno}", pos, opts)
            yield cur.doc(text, f"{path}:{lineno}", replaced, pos + len(line) + 1)


def _json_record(line: bytes, where: str, pos: int, opts: CorpusOptions) -> tuple[str | None, int]:
    raw, replaced = decode(line, errors=opts.errors, where=where, offset=pos)
    if raw is None:
        return None, 0
    try:
        record = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise CorpusError(
            f"{where}: not valid JSON ({exc.msg} at column {exc.colno}); fix the line"
        ) from None
    except (ValueError, RecursionError) as exc:  # an integer of 5,000 digits; nesting too deep
        what = "nested too deep" if isinstance(exc, RecursionError) else str(exc).split(";")[0][:100]
        raise CorpusError(f"{where}: JSON Python cannot read ({what}); fix or drop the line") from None
    if not isinstance(record, dict):
        raise CorpusError(f"{where}: a JSON Lines record must be an object, got {type(record).__name__}")
    if opts.field not in record:
        keys = ", ".join(sorted(record)[:8]) or "none"
        raise CorpusError(f"{where}: no field {opts.field!r} (fields: {keys}); pick one with --field")
    value = record[opts.field]
    if not isinstance(value, str):
        raise CorpusError(
            f"{where}: field {opts.field!r} is {_JSON_TYPES.get(type(value), 'not text')}, not a string; "
            "filter such records out"
        )
    escaped = "\\ud" in raw or "\\uD" in raw  # a surrogate comes only from an escape (raw is UTF-8)
    text, more = _no_surrogates(value, errors=opts.errors, where=where, escaped=escaped)
    return text, replaced + more


def _parquet_file(path: str, opts: CorpusOptions, cur: _Cursor, span: Span) -> Iterator[Document]:
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise CorpusError(f"{path}: reading Parquet needs pyarrow: pip install 'stacktok[pack]'") from None
    try:
        pf = pq.ParquetFile(path)
    except (OSError, pa.ArrowException) as exc:
        raise CorpusError(f"{path}: not a readable Parquet file ({exc})") from None
    schema = pf.schema_arrow
    if opts.column not in schema.names:
        raise CorpusError(
            f"{path}: no column {opts.column!r} (columns: {', '.join(schema.names)}); use --column"
        )
    kind = schema.field(opts.column).type
    if not (pa.types.is_string(kind) or pa.types.is_large_string(kind) or str(kind) == "string_view"):
        raise CorpusError(
            f"{path}: column {opts.column!r} is {kind}, not a string column; choose a text column"
        )
    size, rows, row = Path(path).stat().st_size, max(pf.metadata.num_rows, 1), span.number
    limit = opts.document_limit()
    groups = range(span.start, pf.num_row_groups if span.end is None else span.end)
    for batch in pf.iter_batches(columns=[opts.column], batch_size=1024, row_groups=groups):
        for value in batch.column(0).to_pylist():
            row += 1
            where = f"{path}: row {row}"
            if value is None:
                raise CorpusError(f"{where}: column {opts.column!r} is null; filter null rows out")
            if len(value) > limit:  # characters: at least as many bytes
                raise too_long(where, len(value), limit)
            text, replaced = _no_surrogates(value, errors=opts.errors, where=where)
            yield cur.doc(text, where, replaced, size * row // rows)


_JSON_TYPES = {
    type(None): "null",
    bool: "a boolean",
    int: "a number",
    float: "a number",
    list: "an array",
    dict: "an object",
}
_READERS = {"text": _text_file, "jsonl": _jsonl_file, "parquet": _parquet_file}


def read_input(path: str, *, options: CorpusOptions | None = None, span: Span = WHOLE) -> Iterator[Document]:
    """Every document of one input (of ``span`` of it) in order, dropped ones included (``text is None``)."""
    yield from _READERS[input_kind(path)](path, options or CorpusOptions(), _Cursor(span.number), span)


def read_documents(
    paths: Sequence[str], *, options: CorpusOptions | None = None, stats: ReadStats | None = None
) -> Iterator[Document]:
    """The documents of ``paths`` in order, without dropped ones (counted in ``stats``)."""
    stats = stats if stats is not None else ReadStats()
    for path in paths:
        for doc in read_input(path, options=options):
            stats.replaced += doc.replaced
            if doc.text is None:
                stats.skipped_invalid += 1
            else:
                yield doc


# ------------------------------------------------------------------ training text
def _safe_cut(text: str) -> int:
    """Index just after the last newline that is followed by a letter, or -1.

    Under the Llama-3 pattern a newline never joins a following letter, so a
    cut there splits no pre-token: streaming in blocks trains exactly as if
    the file had been read whole.
    """
    end = len(text)
    while (i := text.rfind("\n", 0, end)) >= 0:
        if i + 1 < len(text) and text[i + 1].isalpha():
            return i + 1
        end = i
    return -1


def text_blocks(path: str, *, errors: str = "strict") -> Iterator[str]:
    """One text file as blocks of about 8 MiB cut only at pre-token boundaries (see ``_safe_cut``)."""
    carry, pending, offset = "", b"", 0
    for block in _blocks(path):
        data = pending + block
        cut = len(data) - _incomplete_tail(data)
        text, _ = decode(data[:cut], errors=errors, where=path, offset=offset)
        pending, offset = data[cut:], offset + cut
        carry += text or ""
        at = _safe_cut(carry)
        if at > 0:
            yield carry[:at]
            carry = carry[at:]
    if pending:
        carry += decode(pending, errors=errors, where=path, offset=offset)[0] or ""
    if carry:
        yield carry


def _incomplete_tail(data: bytes) -> int:
    """Bytes at the end of ``data`` that start a UTF-8 sequence the next block completes."""
    for back in range(1, min(4, len(data)) + 1):
        b = data[-back]
        if b & 0xC0 != 0x80:  # a lead byte (or ASCII): incomplete if it needs more than ``back`` bytes
            need = 2 if b >> 5 == 0b110 else 3 if b >> 4 == 0b1110 else 4 if b >> 3 == 0b11110 else 1
            return back if need > back else 0
    return 0


def training_texts(
    paths: Sequence[str], *, options: CorpusOptions | None = None, max_bytes: int | None = None
) -> Iterator[str]:
    """What ``stacktok train`` learns from: text files in blocks, JSONL/Parquet documents one by one.

    Stops at exactly ``max_bytes`` UTF-8 bytes: the last piece is cut at the
    budget, backed off to its last space so no word is split.
    """
    opts = options or CorpusOptions()
    total = 0
    for piece in _training_pieces(paths, opts):
        raw = piece.encode("utf-8")
        if max_bytes is None or total + len(raw) <= max_bytes:
            total += len(raw)
            yield piece
            continue
        keep = raw[: max_bytes - total]
        cut = keep.rfind(b" ")
        yield (keep[:cut] if cut > 0 else keep).decode("utf-8", errors="ignore")
        return


def _training_pieces(paths: Sequence[str], opts: CorpusOptions) -> Iterator[str]:
    for path in paths:
        if input_kind(path) == "text" and opts.text_docs == "file":
            yield from text_blocks(path, errors=opts.errors)
        else:
            yield from (d.text for d in read_documents([path], options=opts) if d.text is not None)
