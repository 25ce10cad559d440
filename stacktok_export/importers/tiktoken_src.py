"""Read a ``.tiktoken`` file (``base64-token rank`` per line) with its split and specials.

The file carries neither the pre-tokenizer regex nor the special tokens, so both are given
(``--pattern REGEX``, ``--special TOKEN=ID`` repeatable). Ranks are ids.

Merges, from tiktoken's rule (merge the adjacent pair whose concatenation has the lowest rank,
leftmost first). Each token's own merge is the pair tiktoken's loop ends with when run on the
token's bytes with only lower ranks (:func:`final_pair`), in rank order. When that list makes
every token from its own bytes (self-reachable, as every token of our layout is), merge-list
BPE and tiktoken's rule agree -- the premise our tiktoken export rests on -- and that list is
the result, so our own export gives back exactly our merges. Otherwise every split of every
token into two tokens is a merge at the token's rank (own merge first, then by the parts'
ranks), as HF's tiktoken converter writes them. Either way ``ignore_merges=True``: tiktoken
looks a whole piece up first.

The file is read bounded (``limits.current().tiktoken``); a line over :data:`MAX_LINE_BYTES`
is refused naming it (the merge derivation is quadratic in a token's length: one 100 MB line
took 52 s before failing), as is a rank of more than 10 digits (ids are below 2**31) and a
file of more ranks than ``limits.current().vocab_entries``.

Out of scope: tiktoken's registry of named encodings (pass the file).
"""

from __future__ import annotations

import base64
import binascii
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ..util.limits import current
from .common import ImportRefused, check_entries, dense_table, read_file, vocabulary

#: the longest line a ``.tiktoken`` file may hold: o200k_base's longest token is 128 bytes (172
#: base64 characters plus its rank); 1 KiB is a 768-byte token
MAX_LINE_BYTES = 1024
#: digits of the largest rank (ids are below 2**31)
MAX_RANK_DIGITS = 10


def _ranks(path: Path) -> dict[bytes, int]:
    ranks: dict[bytes, int] = {}
    lines = read_file(path, limit=current().tiktoken).splitlines()
    check_entries(path, "ranks", len(lines))
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        if len(line) > MAX_LINE_BYTES:
            raise ImportRefused(
                path,
                f"line {n}",
                f"{len(line):,} bytes long, over {MAX_LINE_BYTES:,} (the longest real token, o200k_base's, "
                "is 128 bytes: a 172-byte line); this is not a .tiktoken rank file",
            )
        parts = line.split()
        try:
            if len(parts) != 2 or not parts[1].isdigit():
                raise ValueError
            token = base64.b64decode(parts[0], validate=True)
        except (ValueError, binascii.Error):
            raise ImportRefused(path, f"line {n}", f"{line[:60]!r} is not 'base64-token rank'") from None
        ranks[token] = _rank(path, n, parts[1])
    return ranks


def _rank(path: Path, n: int, digits: bytes) -> int:
    if len(digits) > MAX_RANK_DIGITS:  # int() would refuse past 4,300 digits, and no id is this large
        raise ImportRefused(
            path, f"line {n}", f"a rank of {len(digits):,} digits; ranks are ids, below 2**31 (10 digits)"
        )
    return int(digits)


def final_pair(token: bytes, ranks: dict[bytes, int], below: int) -> tuple[bytes, bytes] | None:
    """The two parts tiktoken's loop joins last into ``token`` using ranks ``< below``.

    >>> final_pair(b"abc", {b"a": 0, b"b": 1, b"c": 2, b"bc": 3, b"abc": 4}, 4)
    (b'a', b'bc')
    """
    parts = [token[i : i + 1] for i in range(len(token))]
    while len(parts) > 2:
        best, at = below, -1
        for i in range(len(parts) - 1):
            r = ranks.get(parts[i] + parts[i + 1], below)
            if r < best:
                best, at = r, i
        if at < 0:
            break
        parts[at : at + 2] = [parts[at] + parts[at + 1]]
    return (parts[0], parts[1]) if len(parts) == 2 else None


def _self_reachable(ranks: dict[bytes, int], merges: list[tuple[int, int]]) -> bool:
    """Whether merge-list BPE (lowest merge first, leftmost) turns every token's bytes into it."""
    by_rank = {r: t for t, r in ranks.items()}
    order = {pair: k for k, pair in enumerate(merges)}
    for token, r in ranks.items():
        ids = [ranks[token[i : i + 1]] for i in range(len(token))]
        while len(ids) > 1:
            k, at = min((order.get((a, b), len(order)), i) for i, (a, b) in enumerate(zip(ids, ids[1:])))
            if k == len(order):
                return False
            ids[at : at + 2] = [ranks[by_rank[ids[at]] + by_rank[ids[at + 1]]]]
        if ids != [r]:
            return False
    return True


def derive_merges(ranks: dict[bytes, int]) -> list[tuple[int, int]]:
    """The merges whose BPE is tiktoken's rule on ``ranks`` (see the module docstring)."""
    finals: list[tuple[int, int]] = []
    every: list[tuple[int, int]] = []
    for token, r in sorted(ranks.items(), key=lambda kv: kv[1]):
        if len(token) < 2:
            continue
        last = final_pair(token, ranks, r)
        first = [(ranks[last[0]], ranks[last[1]])] if last is not None else []
        splits = [
            (ranks[token[:k]], ranks[token[k:]])
            for k in range(1, len(token))
            if token[:k] in ranks and token[k:] in ranks
        ]
        finals += first
        every += first + sorted(s for s in splits if s not in first)
    return finals if _self_reachable(ranks, finals) else every


def read_tiktoken(
    path: str | os.PathLike[str],
    *,
    pattern: str | None,
    specials: Iterable[tuple[str, int]] = (),
    name: str | None = None,
) -> dict[str, Any]:
    """The ``from_vocab`` keywords of a ``.tiktoken`` file plus its split and specials."""
    path = Path(path)
    if pattern is None:
        raise ImportRefused(path, "--pattern", "a .tiktoken file carries no split; pass --pattern REGEX")
    ranks = _ranks(path)
    missing = [b for b in range(256) if bytes([b]) not in ranks]
    if missing:  # tiktoken's encoder starts from single bytes: it panics on a missing one
        shown = ", ".join(f"0x{b:02x}" for b in missing[:8]) + (", ..." if len(missing) > 8 else "")
        raise ImportRefused(
            path,
            "byte tokens",
            f"{len(missing)} of the 256 single bytes have no rank ({shown}); a .tiktoken file ranks "
            "every byte (is this a byte-level BPE's rank file?)",
        )
    by_id = {r: t for t, r in ranks.items()}
    if len(by_id) != len(ranks):
        raise ImportRefused(path, "ranks", "two tokens share a rank")
    special_ids = dict(specials)
    for s, i in special_ids.items():
        if i in by_id:
            raise ImportRefused(path, "--special", f"{s}={i}: id {i} is already the rank of a token")
        by_id[i] = s.encode("utf-8")
    return vocabulary(
        tokens=dense_table(path, by_id),
        merges=derive_merges(ranks),
        specials=special_ids,
        patterns=[pattern],
        ignore_merges=True,
        name=name or path.stem,
    )
