"""Where another encoder's pre-tokenizer tables differ from the reference's, one code point at a time.

A regex engine with older Unicode tables (tiktoken's fancy-regex, Oniguruma in
tokenizers, llama.cpp's hand-written classes) classifies some code points
differently from the reference's ``regex``; text holding one of them may
encode differently. :class:`Shape` is the text that makes any different
classification of a code point change the ids, and :class:`DriftCache` asks
an encoder about each code point once, and tells a classification difference
(the ids are what the reference gives with the code point in another class)
from any other difference. The conformance suite declares only the first; the
packer routes documents holding them to the reference and stops on the second.

Under the Llama-3 split the shape is strong for every code point (both of its pieces are
single tokens). Under another split that a non-ASCII character enters only through its class
(:data:`CLASS_SPLITS`: Qwen2's, GPT-2's) it need not be: with ``prove=True`` a code point is
``SAME`` only when the reference's ids of its shape differ under every other class it could be
put in (:func:`discriminates`), else ``UNPROVEN`` -- the encoder agreeing there proves nothing.

The reference is any tokenizer with what :class:`Reference` names (``StackTokenizer`` has it):
this module sits below the models and imports none. :func:`is_llama3` says whether a split is
the one the shapes are proven strong for.

Out of scope: regex differences that are not character classes (llama.cpp's
``'[sS]``), and white-space class changes that do not change ids.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import regex

from .pretokenize import GPT2_PATTERN, LLAMA3_PATTERN, QWEN2_PATTERN

CONTRACTIONS = ("'s", "'t", "'re", "'ve", "'m", "'ll", "'d")
#: a stand-in character of each class the Llama-3 split depends on
STAND_INS = {"L": "a", "N": "5", "S": "\u2003", "O": "!"}
SAME, TABLES, OTHER, UNPROVEN = "same", "tables", "other", "unproven"
#: splits in which a non-ASCII character counts only by its class: letter (``\p{L}``), number
#: (``\p{N}``), white space (``\s``, never ``\r``/``\n`` or the space itself) or other
CLASS_SPLITS = frozenset({LLAMA3_PATTERN, QWEN2_PATTERN, GPT2_PATTERN})
_CLASSES = (("L", regex.compile(r"\p{L}")), ("N", regex.compile(r"\p{N}")), ("S", regex.compile(r"\s")))


class Reference(Protocol):
    """What the shapes ask of the reference: its ids for a text, its (first) split regex, and the
    BPE of one pre-token's bytes."""

    _split_re: regex.Pattern[str]

    def encode(self, text: str) -> list[int]: ...

    def _bpe(self, data: bytes) -> list[int]: ...


def is_llama3(patterns: Sequence[str]) -> bool:
    """The one split the packer's drift shapes are proven for (:class:`Shape`)."""
    return tuple(patterns) == (LLAMA3_PATTERN,)


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


def choose_shape(tok: Reference) -> Shape:
    """The contraction and digit triple that are single tokens of ``tok``."""
    one = [c for c in CONTRACTIONS if len(tok.encode(c)) == 1]
    three = [d * 3 for d in "0123456789" if len(tok.encode(d * 3)) == 1]
    return Shape(one[0] if one else "'s", three[0] if three else "000", bool(one and three))


def hypothesis_ids(tok: Reference, shape: Shape, ch: str, cls: str) -> list[int]:
    """The reference's ids for ``shape.text(ch)`` if ``ch`` were of class ``cls``."""
    real, stand = shape.text(ch), shape.text(STAND_INS[cls])
    return [i for m in tok._split_re.finditer(stand) for i in tok._bpe(real[m.start() : m.end()].encode())]


def char_class(ch: str) -> str:
    """The class (a key of :data:`STAND_INS`) the reference's ``regex`` tables put ``ch`` in."""
    return next((name for name, cls in _CLASSES if cls.match(ch)), "O")


def discriminates(tok: Reference, shape: Shape, ch: str, ids: Sequence[int]) -> bool:
    """Whether ``ids`` (the reference's for ``shape.text(ch)``) differ from the ids under every
    other class ``ch`` could be put in: only then do an encoder's equal ids prove its class."""
    actual, want = char_class(ch), list(ids)
    return all(hypothesis_ids(tok, shape, ch, c) != want for c in STAND_INS if c != actual)


@dataclass
class DriftCache:
    """Which non-ASCII code points ``encode`` splits differently from ``ref`` (asked once each).

    ``encode`` takes untrusted text and returns ids; raising counts as drifting.
    ``prove``: the shape is not strong for every code point under this split (see the module
    docstring), so equal ids count only where they tell the classes apart.
    Threads may share one: a race only asks the same question twice.
    """

    ref: Reference
    encode: Callable[[str], Sequence[int]]
    shape: Shape | None = None
    prove: bool = False
    _safe: set[str] = field(default_factory=lambda: {chr(c) for c in range(128)})
    _drifting: set[str] = field(default_factory=set)
    _other: set[str] = field(default_factory=set)
    _unproven: set[str] = field(default_factory=set)
    _pattern: re.Pattern[str] | None = None
    _built: int = 0
    _misses: int = 0

    def __post_init__(self) -> None:
        if self.shape is None:
            self.shape = choose_shape(self.ref)

    def status(self, ch: str) -> str:
        """``SAME``; ``TABLES`` when the encoder's ids are the reference's with ``ch`` in another
        class; ``OTHER`` for a difference no classification explains (a real bug, never declared);
        ``UNPROVEN`` (only with ``prove``) when equal ids could not show a different class."""
        if ch in self._safe:
            return SAME
        if ch in self._drifting:
            return TABLES
        if ch in self._other:
            return OTHER
        if ch in self._unproven:
            return UNPROVEN
        text = self.shape.text(ch)  # type: ignore[union-attr]
        try:
            got = list(self.encode(text))
        except Exception:  # noqa: BLE001 -- an encoder raising on the shape is a difference
            got = None
        want = self.ref.encode(text)
        if got == want:
            if self.prove and not discriminates(self.ref, self.shape, ch, want):  # type: ignore[arg-type]
                self._unproven.add(ch)
                return UNPROVEN
            self._safe.add(ch)
            return SAME
        if got is not None and any(got == hypothesis_ids(self.ref, self.shape, ch, c) for c in STAND_INS):  # type: ignore[arg-type]
            self._drifting.add(ch)
            return TABLES
        self._other.add(ch)
        return OTHER

    def drifts(self, ch: str) -> bool:
        """Whether the encoder's tables put ``ch`` in another class than the reference's."""
        return self.status(ch) == TABLES

    def scan(self, text: str) -> tuple[bool, str | None]:
        """``(text holds a TABLES or UNPROVEN code point, the first OTHER code point or None)``.

        Text of known-safe code points is answered by one regex search (a negated class of
        them, rebuilt as the safe set grows), the rest by asking each new code point once.
        """
        if text.isascii() or not self._unknown().search(text):
            return False, None
        chars = set(text)
        if chars <= self._safe:
            self._misses += 1
            return False, None
        statuses = {ch: self.status(ch) for ch in sorted(chars - self._safe)}
        other = next((ch for ch, st in statuses.items() if st == OTHER), None)
        return bool({TABLES, UNPROVEN} & set(statuses.values())), other

    def _unknown(self) -> re.Pattern[str]:
        """A pattern matching any code point not (yet) known safe; rebuilt every 16 misses."""
        if self._pattern is None or (self._misses >= 16 and len(self._safe) != self._built):
            body = "".join(f"\\U{ord(c):08x}" for c in sorted(self._safe))
            self._pattern, self._built, self._misses = re.compile(f"[^{body}]"), len(self._safe), 0
        return self._pattern
