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

Out of scope: the ``.vocab`` file (a human-readable rendering minbpe never loads).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from .common import WHOLE_TEXT, ImportRefused, dense_table, vocabulary

VERSION = "minbpe v1"


def _int_pair(path: Path, n: int, line: str) -> tuple[str, int]:
    head, _, tail = line.rpartition(" ")
    try:
        return head, int(tail)
    except ValueError:
        raise ImportRefused(path, f"line {n}", f"{line[:60]!r} does not end in an id") from None


def read_minbpe(
    path: str | os.PathLike[str], *, pattern: str | None = None, name: str | None = None
) -> dict[str, Any]:
    """The ``from_vocab`` keywords of a minbpe ``.model`` file."""
    path = Path(path)
    try:
        lines = path.read_text(encoding="utf-8").split("\n")
    except (OSError, UnicodeDecodeError) as exc:
        raise ImportRefused(path, "file", str(exc)) from None
    if lines[0].strip() != VERSION:
        raise ImportRefused(path, "line 1", f"{lines[0][:40]!r}; expected {VERSION!r}")
    if len(lines) < 3 or not lines[2].strip().isdigit():
        raise ImportRefused(path, "line 3", "expected the number of special tokens")
    file_pattern = lines[1].strip()
    n_special = int(lines[2])
    specials = dict(_int_pair(path, 4 + k, lines[3 + k].strip()) for k in range(n_special))
    by_id = {b: bytes([b]) for b in range(256)}
    merges = []
    for n, line in enumerate(lines[3 + n_special :], 4 + n_special):
        if not line.strip():
            continue
        left, right = _int_pair(path, n, line.strip())
        if not left.isdigit() or int(left) not in by_id or right not in by_id:
            raise ImportRefused(path, f"line {n}", f"{line!r}: merge of ids not defined before it")
        merges.append((int(left), right))
        by_id[256 + len(merges) - 1] = by_id[int(left)] + by_id[right]
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
