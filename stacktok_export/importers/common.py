"""What every importer shares: the refusal error, the GPT-2 split, and the id table builder.

- :class:`ImportRefused`: a source (or one component of it) that is not a byte-level BPE the
  reference can follow; its message is one line naming the file and the component.
- :data:`GPT2_PATTERN`: the split ByteLevel's ``use_regex=True`` means (GPT-2's ``encoder.py``);
  :data:`WHOLE_TEXT`: no split.
- :func:`dense_table`: ``{id: bytes}`` -> one entry per id, refusing holes in the id space.
- :func:`merge_ids`: ``"left right"`` merge strings -> id pairs through a string -> id map.
- :func:`vocabulary`: the keyword dict of ``StackTokenizer.from_vocab``.

Out of scope: reading any particular file kind (one module per source).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ..pretokenize import GPT2_PATTERN  # noqa: F401 -- re-exported for the readers

#: GPT-2's pre-tokenizer (HF ByteLevel ``use_regex=True``; llama.cpp pre type ``gpt-2``)
#: no split at all (a source without a pre-tokenizer regex): the whole text is one piece
WHOLE_TEXT = r"(?s:.+)"


class ImportRefused(ValueError):
    """A source the reference cannot follow; one line: ``FILE: COMPONENT: why``."""

    def __init__(self, path: str | os.PathLike[str], component: str, why: str) -> None:
        message = f"{os.fspath(path)}: {component}: {why}"
        super().__init__(message.replace("\r", "\\r").replace("\n", "\\n"))  # always one line
        self.component = component


def dense_table(path: str | os.PathLike[str], by_id: Mapping[int, bytes]) -> list[bytes]:
    """One entry per id 0..max; a missing id is refused (every id must be a token)."""
    n = max(by_id) + 1 if by_id else 0
    if len(by_id) != n:
        hole = next(i for i in range(n) if i not in by_id)
        raise ImportRefused(
            path, "vocabulary", f"id {hole} has no token (ids must be 0..{n - 1} without holes)"
        )
    return [by_id[i] for i in range(n)]


def merge_ids(
    path: str | os.PathLike[str], merges: Iterable[str | Sequence[str]], ids: Mapping[str, int]
) -> list[tuple[int, int]]:
    """``"a b"`` (or ``["a", "b"]``) merge entries -> ``(id(a), id(b))`` in rank order."""
    out: list[tuple[int, int]] = []
    for r, m in enumerate(merges):
        parts = m.split(" ") if isinstance(m, str) else list(m)
        if len(parts) != 2:
            raise ImportRefused(path, f"merges[{r}]", f"{m!r} is not two tokens separated by one space")
        try:
            out.append((ids[parts[0]], ids[parts[1]]))
        except KeyError as exc:
            raise ImportRefused(
                path, f"merges[{r}]", f"{exc.args[0]!r} is not a token of the vocabulary"
            ) from None
    return out


def vocabulary(
    *,
    specials: Mapping[str, int],
    roles: Mapping[str, int] | None = None,
    in_text: Iterable[str] = (),
    **fields: Any,
) -> dict[str, Any]:
    """The keyword arguments of ``StackTokenizer.from_vocab``: ``fields`` as given (``tokens``,
    ``merges``, ``patterns``, ``name``, flags), specials in id order, roles and ``in_text`` sorted."""
    return {
        **fields,
        "specials": dict(sorted(specials.items(), key=lambda kv: kv[1])),
        "roles": dict(sorted((roles or {}).items())),
        "in_text": sorted(set(in_text)),
    }


def role_ids(specials: Mapping[str, int], named: Mapping[str, str | None]) -> dict[str, int]:
    """``{"bos": "<s>", ...}`` -> ``{"bos": id}`` for the names that are specials."""
    return {role: specials[s] for role, s in named.items() if s is not None and s in specials}
