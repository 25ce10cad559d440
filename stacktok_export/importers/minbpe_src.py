"""Read a minbpe ``.model`` file (Karpathy's minbpe, ``Tokenizer.save``).

The format, as minbpe's ``load`` reads it::

    minbpe v1
    <pattern>                  (empty for BasicTokenizer: no split)
    <number of specials>
    <special> <id>             (one line each)
    <left id> <right id>       (one line per merge, in rank order)

minbpe's ids: 0..255 are the bytes in byte order, merge ``i`` makes id ``256 + i``, specials
at the ids written. The pattern line is stripped, as minbpe's ``load`` strips it. Encoding is
minbpe's ``encode_ordinary``: lowest merge index first (plain BPE, no ``ignore_merges``).

Read as untrusted input: bounded (``limits``), counts parsed as ASCII digits of at most 10
(``int()`` takes ``"²"``'s ``isdigit`` no further than a ``ValueError``), tokens built by the
merges bounded (:class:`~.common.TokenBytes`: a chain of doubling merges is refused).

Out of scope: the ``.vocab`` file (a human-readable rendering minbpe never loads).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ..util.limits import current
from .common import WHOLE_TEXT, ImportRefused, TokenBytes, check_entries, dense_table, read_file, vocabulary

VERSION = "minbpe v1"


def _is_id(text: str) -> bool:
    return text.isascii() and text.isdigit() and len(text) <= 10


def _int_pair(path: Path, n: int, line: str) -> tuple[str, int]:
    head, _, tail = line.rpartition(" ")
    if not _is_id(tail):
        raise ImportRefused(path, f"line {n}", f"{line[:60]!r} does not end in an id")
    return head, int(tail)


def read_minbpe(
    path: str | os.PathLike[str], *, pattern: str | None = None, name: str | None = None
) -> dict[str, Any]:
    """The ``from_vocab`` keywords of a minbpe ``.model`` file."""
    path = Path(path)
    try:
        lines = read_file(path, limit=current().tokenizer_json).decode("utf-8").split("\n")
    except UnicodeDecodeError as exc:
        raise ImportRefused(path, "file", f"is not UTF-8 (byte {exc.start})") from None
    check_entries(path, "merges", len(lines))
    if lines[0].strip() != VERSION:
        raise ImportRefused(path, "line 1", f"{lines[0][:40]!r}; expected {VERSION!r}")
    if len(lines) < 3 or not _is_id(lines[2].strip()):
        raise ImportRefused(path, "line 3", "expected the number of special tokens")
    file_pattern = lines[1].strip()
    n_special = int(lines[2])
    if 3 + n_special > len(lines):
        what = f"{n_special:,} special tokens, but {len(lines) - 3:,} lines follow"
        raise ImportRefused(path, "line 3", what)
    specials = dict(_int_pair(path, 4 + k, lines[3 + k].strip()) for k in range(n_special))
    by_id = {b: bytes([b]) for b in range(256)}
    merges = []
    made = TokenBytes(path)
    for n, line in enumerate(lines[3 + n_special :], 4 + n_special):
        if not line.strip():
            continue
        left, right = _int_pair(path, n, line.strip())
        if not _is_id(left) or int(left) not in by_id or right not in by_id:
            raise ImportRefused(path, f"line {n}", f"{line[:60]!r}: merge of ids not defined before it")
        merges.append((int(left), right))
        by_id[256 + len(merges) - 1] = made.join(f"line {n}", by_id[int(left)], by_id[right])
    for s, i in specials.items():
        if i in by_id:
            raise ImportRefused(path, f"special {s!r}", f"id {i} is already a byte or merge id")
        by_id[i] = s.encode("utf-8")
    return vocabulary(
        tokens=dense_table(path, by_id),
        merges=merges,
        specials=specials,
        patterns=[pattern or file_pattern or WHOLE_TEXT],
        name=name or path.stem,
    )
