"""The first-difference window: where a backend's ids part from the reference's, with bytes and text.

``first_window`` gives the position of the first differing id and three ids either
side from both sequences, each with the bytes the reference decodes it to, plus where
that id starts in the reference text (``offset``, in characters) and the text around it
(``text``: :func:`shorten`, repr-escaped, ~80 characters); it is what a failing row
carries (``Row.window``, which the runner completes with the probe id) and what every
renderer shows. :func:`text_difference` says where two texts part (the stream check's
joined pieces). ``first_difference`` is the floor's (``stacktok_export.util.diff``),
re-exported here so the suite and the packer count positions the same way.

    >>> shorten("abc\\tdef", at=3)
    "'abc\\\\tdef'"
    >>> text_difference("hello world", "hello_world")
    "first difference at char 5: want 'hello world', got 'hello_world'"

Out of scope: deciding whether a difference is a failure (``conformance.checks.compare``)
and rendering the window (``conformance.report``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from stacktok_export import StackTokenizer
from stacktok_export.util.diff import first_difference

#: ids shown on each side of the first difference
CONTEXT = 3
#: characters of text shown around a difference: this many before it, the rest after
TEXT_WIDTH, TEXT_BEFORE = 80, 30


def first_window(ref: Sequence[int], got: Sequence[int], tok: StackTokenizer) -> dict[str, Any]:
    """Position of the first differing id and three ids either side, with bytes, from both;
    the reference text around it (``offset``: the character where the differing id starts)."""
    pos = first_difference(ref, got)
    lo = max(0, pos - CONTEXT)

    def side(ids: Sequence[int]) -> list[list[Any]]:
        return [[i, _bytes_repr(tok, i)] for i in ids[lo : pos + CONTEXT + 1]]

    text, offset = _reference_text(tok, ref, pos)
    return {
        "position": pos,
        "start": lo,  # the id position of each side's first entry
        "reference": side(ref),
        "backend": side(got),
        "reference_len": len(ref),
        "backend_len": len(got),
        "offset": offset,
        "text": shorten(text, at=offset),
    }


def shorten(text: str, *, at: int, width: int = TEXT_WIDTH) -> str:
    """``repr`` of about ``width`` characters of ``text`` around character ``at``; ``...``
    outside the quotes where text was cut (invisible and control characters show escaped)."""
    start = max(0, min(at - TEXT_BEFORE, len(text) - width))
    end = start + width
    head = "..." if start > 0 else ""
    tail = "..." if end < len(text) else ""
    return f"{head}{text[start:end]!r}{tail}"


def text_difference(want: str, got: str) -> str:
    """Where ``got`` first parts from ``want``, with both sides shortened around it."""
    pos = first_difference(want, got)
    return f"first difference at char {pos}: want {shorten(want, at=pos)}, got {shorten(got, at=pos)}"


def _reference_text(tok: StackTokenizer, ref: Sequence[int], pos: int) -> tuple[str, int]:
    """The reference ids' text and the character where id ``pos`` starts (a split character
    counts as before it)."""
    try:
        data = tok.decode_bytes(list(ref))
        before = len(tok.decode_bytes(list(ref[:pos])))
    except (ValueError, TypeError):
        return "", 0
    return data.decode("utf-8", errors="replace"), len(data[:before].decode("utf-8", errors="ignore"))


def _bytes_repr(tok: StackTokenizer, token_id: int) -> str:
    try:
        return repr(tok.decode_bytes([token_id]))
    except (ValueError, TypeError):
        return "<out of range>"


__all__ = ["first_difference", "first_window", "shorten", "text_difference"]
