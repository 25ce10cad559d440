"""Where another encoder's pre-tokenizer tables differ from the reference's, one code point at a time.

A regex engine with older Unicode tables (tiktoken's fancy-regex, Oniguruma in
tokenizers, llama.cpp's hand-written classes) classifies some code points
differently from the reference's ``regex``; text holding one of them may
encode differently. :class:`Shape` is the text that makes any different
classification of a code point change the ids, and :class:`DriftCache` asks
an encoder about each code point once. The conformance suite declares such
differences with it; the packer routes documents holding them to the reference.

Out of scope: regex differences that are not character classes (llama.cpp's
``'[sS]``), and white-space class changes that do not change ids.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from .bpe import StackTokenizer

CONTRACTIONS = ("'s", "'t", "'re", "'ve", "'m", "'ll", "'d")


@dataclass(frozen=True)
class Shape:
    """Per code point ``c``: ``" {c}'s{c}000"``.

    ``{c}'s`` keeps the contraction token only if ``c`` is a letter, number or
    space (otherwise ``c'`` is one punctuation run); ``{c}000`` keeps the
    ``000`` token only if ``c`` is not a number (otherwise ``c00`` + ``0``).
    Both pieces are single tokens in a trained vocabulary (``strong``), so a
    different classification always changes the ids. Shapes are independent:
    a block's ids are the concatenation of its shapes' ids.
    """

    contraction: str = "'s"
    digits: str = "000"
    strong: bool = True

    def text(self, ch: str) -> str:
        return f" {ch}{self.contraction}{ch}{self.digits}"

    def block(self, cps: Sequence[int]) -> str:
        return "".join(self.text(chr(c)) for c in cps)


def choose_shape(tok: StackTokenizer) -> Shape:
    """The contraction and digit triple that are single tokens of ``tok``."""
    one = [c for c in CONTRACTIONS if len(tok.encode(c)) == 1]
    three = [d * 3 for d in "0123456789" if len(tok.encode(d * 3)) == 1]
    return Shape(one[0] if one else "'s", three[0] if three else "000", bool(one and three))


@dataclass
class DriftCache:
    """Which non-ASCII code points ``encode`` splits differently from ``ref`` (asked once each).

    ``encode`` takes untrusted text and returns ids; raising counts as drifting.
    Threads may share one: a race only asks the same question twice.
    """

    ref: StackTokenizer
    encode: Callable[[str], Sequence[int]]
    shape: Shape | None = None
    _known: dict[str, bool] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.shape is None:
            self.shape = choose_shape(self.ref)

    def drifts(self, ch: str) -> bool:
        if ch.isascii():
            return False
        got = self._known.get(ch)
        if got is None:
            text = self.shape.text(ch)  # type: ignore[union-attr]
            try:
                got = list(self.encode(text)) != self.ref.encode(text)
            except Exception:  # noqa: BLE001 -- an encoder raising on the shape is a difference
                got = True
            self._known[ch] = got
        return got

    def any_drift(self, text: str) -> bool:
        """Whether ``text`` holds a drifting code point (ASCII text never does)."""
        if text.isascii():
            return False
        return any(self.drifts(ch) for ch in set(text))
