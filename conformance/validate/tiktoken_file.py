"""``*.tiktoken``: the ranks file tiktoken loads, parsed strictly into ``{token bytes: rank}``.

Every line ``<base64> <rank>`` (blank lines skipped, as tiktoken does); strict base64; unique
ranks and tokens; ranks ``0..n-1``; all 256 single bytes present (tiktoken asserts or panics
otherwise). :func:`parse_tiktoken` returns the ranks, so no later stage parses the file again.
A line longer than any real one (``MAX_LINE_BYTES``) and a rank of more than 10 digits (ids are
below 2**31; ``int()`` raises past 4,300 digits) fail naming the line, before anything is
decoded; the file's size is bounded by its reader (``limits.current().tiktoken``).

Out of scope: whether rank r is the artifact's id r (the gate's surface checks).
"""

from __future__ import annotations

import base64
import binascii
from pathlib import Path

from conformance.validate.common import fail, show
from stacktok_export.importers.tiktoken_src import MAX_LINE_BYTES, MAX_RANK_DIGITS

_FIX = "re-export it with `stacktok export` (one 'base64(token) rank' per line)"


def parse_tiktoken(path: Path, data: bytes) -> dict[bytes, int]:
    """The ranks in ``data`` (the bytes of ``path``), or :class:`InputError` naming the line."""
    rank_line: dict[int, int] = {}
    token_line: dict[bytes, int] = {}
    ranks: dict[bytes, int] = {}
    for lineno, line in enumerate(data.splitlines(), start=1):
        where = f"line {lineno}"
        if len(line) > MAX_LINE_BYTES:
            what = f"is {len(line):,} bytes long, over {MAX_LINE_BYTES:,} (o200k_base's longest line is 172)"
            fail(path, where, what, _FIX)
        parts = line.split()
        if not parts:
            continue
        if len(parts) != 2:
            fail(path, where, f"{show(line)} is not '<base64> <rank>'", _FIX)
        try:
            token = base64.b64decode(parts[0], validate=True)
        except binascii.Error as exc:
            fail(path, where, f"{show(parts[0])} is not valid base64 ({exc})", _FIX)
        if not parts[1].isdigit():
            fail(path, where, f"rank {show(parts[1])} is not a non-negative integer", _FIX)
        if len(parts[1]) > MAX_RANK_DIGITS:
            what = f"rank has {len(parts[1]):,} digits; ranks are ids, below 2**31 (10 digits)"
            fail(path, where, what, _FIX)
        rank = int(parts[1])
        if rank in rank_line:
            fail(
                path, where, f"rank {rank} is already used on line {rank_line[rank]}", "ranks must be unique"
            )
        if token in token_line:
            fail(path, where, f"token {show(token)} already appears on line {token_line[token]}", _FIX)
        rank_line[rank], token_line[token] = lineno, lineno
        ranks[token] = rank
    _check_rank_table(path, rank_line, token_line)
    return ranks


def _check_rank_table(path: Path, rank_line: dict[int, int], token_line: dict[bytes, int]) -> None:
    if not rank_line:
        fail(path, "file", "holds no '<base64> <rank>' lines", "re-export it with `stacktok export`")
    top = max(rank_line)
    if top != len(rank_line) - 1:
        missing = next(r for r in range(top + 1) if r not in rank_line)
        fail(
            path,
            f"rank {missing}",
            f"is missing (ranks must be 0..n-1; highest is {top} on line {rank_line[top]})",
            "re-export it: tiktoken needs contiguous ranks",
        )
    absent = [b for b in range(256) if bytes([b]) not in token_line]
    if absent:
        fail(
            path,
            "single bytes",
            f"{len(absent)} of the 256 single-byte tokens are missing, first 0x{absent[0]:02x}",
            "a byte-level BPE needs every byte as a token: re-export it",
        )
