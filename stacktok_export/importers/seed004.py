"""Read the layout of seed 004 (``ByteBpeTokenizer``, /work/shared/seeds/004_*.txt).

That tokenizer puts its special tokens first (``<pad>``, ``<s>``, ``</s>``, ``<unk>`` and
more, ids ``0..k-1``), the 256 bytes next in byte order (ids ``k..k+255``), and each merge
after them (``merges[(a, b)] = new_id``, new ids from ``k + 256`` up). The seed shows no save
code, so the file read here is that state as JSON::

    {"special_tokens": ["<pad>", "<s>", "</s>", "<unk>", ...],
     "merges": [[a, b, new_id], ...]      (or [[a, b], ...] in order, or {"a,b": new_id}),
     "pattern": "..."}                    (optional)

The pattern defaults to the one the class binds (``ByteBpeTokenizer.SPLIT_REGEX``: the first
``SPLIT_REGEX`` of the module; the seed rebinds the module name afterwards, not the class
attribute). Roles: ``<pad>``, ``<s>``, ``</s>`` are pad, BOS and EOS; ``encode`` adds neither
unless asked (``add_bos=False``), and specials are split out only when allowed.

Read as untrusted input: bounded (``limits``), every merge a triple or pair of integer ids,
tokens built by the merges bounded (:class:`~.common.TokenBytes`).

Out of scope: training (the seed's ``train``), its ``decode(skip_special_tokens=...)``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ..util.limits import current
from .common import ImportRefused, TokenBytes, check_entries, dense_table, load_json, role_ids, vocabulary

#: ``ByteBpeTokenizer.SPLIT_REGEX`` as the class binds it
SEED_PATTERN = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
_ROLES = {"pad": "<pad>", "bos": "<s>", "eos": "</s>"}


def _merge_list(path: Path, raw: Any, first: int) -> list[tuple[int, int]]:
    """Merges in id order, checking each stated new id is the next one."""
    shape = "expected a list of [a, b(, new_id)] or an {'a,b': new_id} object"
    if isinstance(raw, dict):
        check_entries(path, "merges", len(raw))
        try:
            raw = [[*map(_id, k.split(",")), v] for k, v in raw.items()]
        except ValueError:
            raise ImportRefused(path, "merges", shape) from None
    if not isinstance(raw, list):
        raise ImportRefused(path, "merges", shape)
    check_entries(path, "merges", len(raw))
    width = len(raw[0]) if raw and isinstance(raw[0], list) else 0
    for r, m in enumerate(raw):
        if not (isinstance(m, list) and len(m) == width in (2, 3) and all(type(x) is int for x in m)):
            raise ImportRefused(path, f"merges[{r}]", f"{str(m)[:60]}: {shape}")
    rows = sorted(raw, key=lambda m: m[2]) if width == 3 else raw
    out = []
    for r, m in enumerate(rows):
        if len(m) == 3 and m[2] != first + r:
            raise ImportRefused(
                path, f"merges[{r}]", f"new id {m[2]}, expected {first + r} (ids follow the bytes)"
            )
        out.append((int(m[0]), int(m[1])))
    return out


def _id(text: str) -> int:
    text = text.strip()
    if not (text.isascii() and text.isdigit() and len(text) <= 10):
        raise ValueError(text)
    return int(text)


def read_seed004(
    path: str | os.PathLike[str], *, pattern: str | None = None, name: str | None = None
) -> dict[str, Any]:
    """The ``from_vocab`` keywords of a seed-004 tokenizer saved as JSON."""
    path = Path(path)
    data = load_json(path, limit=current().tokenizer_json)
    specials = data.get("special_tokens") if isinstance(data, dict) else None
    if not isinstance(specials, list) or not all(isinstance(s, str) for s in specials):
        raise ImportRefused(path, "special_tokens", "expected the list of special token strings (ids 0..k-1)")
    check_entries(path, "special_tokens", len(specials))
    k = len(specials)
    by_id = {i: s.encode("utf-8") for i, s in enumerate(specials)}
    by_id.update({k + b: bytes([b]) for b in range(256)})
    merges = _merge_list(path, data.get("merges", []), k + 256)
    made = TokenBytes(path)
    for r, (a, b) in enumerate(merges):
        if a not in by_id or b not in by_id or a < k or b < k:
            raise ImportRefused(
                path, f"merges[{r}]", f"[{a}, {b}] uses an id that is not a byte or an earlier merge"
            )
        by_id[k + 256 + r] = made.join(f"merges[{r}]", by_id[a], by_id[b])
    special_ids = {s: i for i, s in enumerate(specials)}
    return vocabulary(
        tokens=dense_table(path, by_id),
        merges=merges,
        specials=special_ids,
        patterns=[pattern or data.get("pattern") or SEED_PATTERN],
        roles=role_ids(special_ids, _ROLES),
        name=name or path.stem,
    )
