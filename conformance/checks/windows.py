"""The first-difference window: where a backend's ids part from the reference's, with bytes.

``first_window`` gives the position of the first differing id and three ids either
side from both sequences, each with the bytes the reference decodes it to; it is
what a failing row carries (``Row.window``) and what every renderer shows.
``first_difference`` is the floor's (``stacktok_export.diff``), re-exported here so
the suite and the packer count positions the same way.

Out of scope: deciding whether a difference is a failure (``conformance.checks.runner``)
and rendering the window (``conformance.report``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from stacktok_export import StackTokenizer
from stacktok_export.diff import first_difference

#: ids shown on each side of the first difference
CONTEXT = 3


def first_window(ref: Sequence[int], got: Sequence[int], tok: StackTokenizer) -> dict[str, Any]:
    """Position of the first differing id and three ids either side, with bytes, from both."""
    pos = first_difference(ref, got)
    lo = max(0, pos - CONTEXT)

    def side(ids: Sequence[int]) -> list[list[Any]]:
        return [[i, _bytes_repr(tok, i)] for i in ids[lo : pos + CONTEXT + 1]]

    return {
        "position": pos,
        "reference": side(ref),
        "backend": side(got),
        "reference_len": len(ref),
        "backend_len": len(got),
    }


def _bytes_repr(tok: StackTokenizer, token_id: int) -> str:
    try:
        return repr(tok.decode_bytes([token_id]))
    except (ValueError, TypeError):
        return "<out of range>"


__all__ = ["first_difference", "first_window"]
