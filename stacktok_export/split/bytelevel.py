"""GPT-2's byte <-> printable-character table, used by tokenizer.json and GGUF.

Printable ASCII and most of Latin-1 map to themselves; the other 68 byte
values (controls, space, NBSP, soft hyphen) map to U+0100 onwards in byte
order, so space is ``Ġ`` (U+0120) and newline is ``Ċ`` (U+010A). No mapped
character is a space, which is why ``"left right"`` merge strings are safe.

Out of scope: any other byte-to-text scheme (SentencePiece ``<0xNN>`` bytes).
"""

from __future__ import annotations

import functools


@functools.lru_cache(maxsize=1)
def byte_to_char() -> tuple[str, ...]:
    """``byte_to_char()[b]`` is the character standing for byte ``b``."""
    printable = [
        *range(ord("!"), ord("~") + 1),
        *range(ord("\N{INVERTED EXCLAMATION MARK}"), ord("\N{NOT SIGN}") + 1),
        *range(ord("\N{REGISTERED SIGN}"), ord("\N{LATIN SMALL LETTER Y WITH DIAERESIS}") + 1),
    ]
    table: dict[int, str] = {b: chr(b) for b in printable}
    shifted = 0
    for b in range(256):
        if b not in table:
            table[b] = chr(256 + shifted)
            shifted += 1
    return tuple(table[b] for b in range(256))


@functools.lru_cache(maxsize=1)
def char_to_byte() -> dict[str, int]:
    return {c: b for b, c in enumerate(byte_to_char())}


@functools.lru_cache(maxsize=1)
def _latin1_to_char() -> dict[int, str]:
    """``str.translate`` table: the Latin-1 decoding of byte ``b`` (``chr(b)``) -> its character."""
    return dict(enumerate(byte_to_char()))


def to_chars(token: bytes) -> str:
    """Token bytes -> the byte-level string used in vocab files (in C: a Latin-1 decode, one
    character per byte, then ``str.translate``; a vocabulary's 130,000 tokens in ~0.05 s)."""
    return token.decode("latin-1").translate(_latin1_to_char())


def from_chars(text: str) -> bytes:
    """The inverse of :func:`to_chars`; ``KeyError`` on a character outside the table."""
    table = char_to_byte()
    return bytes(table[c] for c in text)
