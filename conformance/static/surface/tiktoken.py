"""The ``.tiktoken`` file, rank by rank: rank r holds the bytes of the artifact's ordinary id r.

Out of scope: the specials (a ``.tiktoken`` file has none; tiktoken takes them in code).
"""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

from conformance.core.layout import file_bytes
from conformance.core.rows import FILES, Row, skip
from conformance.static.surface.common import REEXPORT, Diff, Expected, compare_ids, guarded, shorten, verdict


def _tiktoken_diffs(data: bytes, exp: Expected) -> list[Diff]:
    out: list[Diff] = []
    by_rank: dict[int, list[bytes]] = {}
    for lineno, line in enumerate(data.splitlines(), start=1):
        if not line.strip():
            continue
        parts = line.split()
        try:
            if len(parts) != 2:
                raise ValueError("want 2 fields")
            token, rank = base64.b64decode(parts[0], validate=True), int(parts[1])
        except ValueError:  # binascii.Error is a ValueError
            out.append(Diff(f"line {lineno} is not 'base64 rank': {shorten(line)}"))
            continue
        by_rank.setdefault(rank, []).append(token)
    want = exp.ordinary_by_id
    if len(by_rank) != len(want):
        out.append(Diff(f"count: file has {len(by_rank)} ranks, artifact has {len(want)} ordinary tokens"))

    def describe(rank: int) -> str:
        return repr(want[rank]) if rank in want else exp.describe(rank)

    out += compare_ids("rank", by_rank, want, show=repr, describe=describe, remove="the line for")
    return out


def tiktoken_row(path: Path | None, exp: Expected, *, files: Any = None) -> Row:
    check = "surface.tiktoken"
    if path is None:
        return skip(check, "no .tiktoken file in or beside the directory")
    try:
        data = file_bytes(path, files)
    except OSError as exc:
        return Row(check, FILES, "fail", f"{path.name} is not readable ({exc})", f"{REEXPORT} ({path.name})")
    fix = f"{REEXPORT}: rank r of {path.name} must be the bytes of id r"
    return verdict(check, path.name, guarded(path.name, _tiktoken_diffs, data, exp), fix=fix)
