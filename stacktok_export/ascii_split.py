"""The Llama-3 and Qwen2 splits, with their ASCII stretches split by the standard library's ``re``.

``regex`` is what defines the split (its Unicode tables are recorded in every artifact), and it
is the slowest step of encoding: on the held-out text the split alone costs more than
tiktoken's whole encode. On ASCII characters the pattern's classes are plain byte ranges, and
the standard library's ``re`` runs them about twice as fast as ``regex`` (measured on the
held-out text's ASCII lines: 0.24 s vs 0.54 s). :func:`fast_split` returns a split that gives
exactly ``regex``'s ``findall`` for :data:`~stacktok_export.pretokenize.LLAMA3_PATTERN` and
:data:`~stacktok_export.pretokenize.QWEN2_PATTERN` (the same alternatives, but single digits:
a digit rule holds no white space, so every argument below is the same for both):

- a text is cut only at :data:`LINE_CUT` -- after a newline whose following run of spaces and
  tabs ends at a visible ASCII character. Every such cut is a pre-token boundary, and the
  pre-tokens on each side do not depend on the other side: the match that covers the newline
  is a white space run ending in newlines (``\\s*[\\r\\n]+``) or punctuation with its trailing
  newlines (``[\\r\\n]*``), neither of which can take the next character; and the only look-ahead,
  ``(?!\\S)``, belongs to an alternative that comes after ``\\s*[\\r\\n]+`` and so never decides a
  run that holds a newline;
- stretches between cuts that hold only ASCII go to the pattern's ASCII form (``re``:
  :data:`ASCII_PATTERN`, :data:`QWEN2_ASCII_PATTERN`), the rest to ``regex`` with the full
  pattern; ``pos``/``endpos`` bound each call, so no text is copied.

Why by hand: no library splits with a Unicode regex at ``re``'s speed; the equivalence of the two
patterns on ASCII is tested character by character and on generated text
(``tests/test_ascii_split.py``).

Out of scope: any other pattern (GPT-2's ``\\s+(?!\\S)`` comes before its newline rule, so a
stretch ending in newlines splits differently alone: those patterns keep ``regex`` for the whole
text), and non-ASCII stretches, which ``regex`` splits as before.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator

import regex

from .pretokenize import LLAMA3_PATTERN, QWEN2_PATTERN

#: Cuts that are pre-token boundaries of the Llama-3 and Qwen2 patterns (see the module docstring).
LINE_CUT = re.compile(r"\n(?=[ \t]*[!-~])")

_PUNCT = r"!-/:-@\[-`{-~"  # ASCII characters that are neither letter, digit nor white space
#: More Llama-3 boundaries, for cutting a long text into windows (a line may be megabytes long:
#: a base64 blob, a minified asset). A match is the character after a cut (or, for LINE_CUT's
#: newline, the character before it): a digit or punctuation after an ASCII letter, punctuation
#: after a digit. No alternative of the pattern holds a letter followed by anything but letters
#: (``[^\r\n\p{L}\p{N}]?\p{L}+``), nor a digit followed by a non-digit (``\p{N}{1,3}``, Qwen2's
#: ``\p{N}``); a match
#: that starts at the cut never looks behind it, and the text before the cut ends in a letter or
#: digit, so no white space run reaches the cut (``(?!\S)`` is not read there). Each alternative
#: starts with its own character class, so ``re`` skips letters and CJK text fast (17 ns a char).
WINDOW_CUT = re.compile(rf"[0-9{_PUNCT}](?<=[A-Za-z][0-9{_PUNCT}])|[{_PUNCT}](?<=[0-9].)|\n(?=[ \t]*[!-~])")
#: characters searched for a cut past a window's end before the rest is left as one window
_CUT_SEARCH = 1 << 16

_WS = r"\t\n\x0b\x0c\r "  # what regex's \s matches among ASCII characters (tested)
#: LLAMA3_PATTERN for ASCII text: \p{L} = A-Za-z, \p{N} = 0-9, \s = the six characters above,
#: the case-insensitive contractions spelled out.
ASCII_PATTERN = (
    r"'(?:[sStTmMdD]|[rR][eE]|[vV][eE]|[lL][lL])"
    r"|[^\r\nA-Za-z0-9]?[A-Za-z]+"
    r"|[0-9]{1,3}"
    rf"| ?[^{_WS}A-Za-z0-9]+[\r\n]*"
    rf"|[{_WS}]*[\r\n]+"
    rf"|[{_WS}]+(?![^{_WS}])"
    rf"|[{_WS}]+"
)

#: QWEN2_PATTERN for ASCII text (single digits; otherwise ASCII_PATTERN)
QWEN2_ASCII_PATTERN = ASCII_PATTERN.replace(r"|[0-9]{1,3}", r"|[0-9]", 1)
#: the patterns :data:`LINE_CUT` and :data:`WINDOW_CUT` are proven for, with their ASCII forms
ASCII_FORMS = {LLAMA3_PATTERN: ASCII_PATTERN, QWEN2_PATTERN: QWEN2_ASCII_PATTERN}

_NON_ASCII = re.compile(r"[^\x00-\x7f]")

Split = Callable[[str], list[str]]


def windows(text: str, size: int) -> Iterator[str]:
    """``text`` in consecutive pieces of at least ``size`` characters, cut at :data:`WINDOW_CUT`
    (each piece splits on its own exactly as inside the text); the last piece holds the rest,
    also when no cut is found within ``_CUT_SEARCH`` characters past a window's end."""
    at, n = 0, len(text)
    while n - at > size:
        m = WINDOW_CUT.search(text, at + size, at + size + _CUT_SEARCH)
        if m is None:  # no cut near: a run of letters (one pre-token, windowed by _bpe_long) or such
            break
        cut = m.end() if m.group() == "\n" else m.start()
        yield text[at:cut]
        at = cut
    yield text[at:] if at else text


def cuts_at_lines(pattern: str) -> bool:
    """Whether :data:`LINE_CUT` and :data:`WINDOW_CUT` positions are pre-token boundaries of
    ``pattern`` (and so whether :func:`fast_split` serves it): the Llama-3 and Qwen2 patterns."""
    return pattern in ASCII_FORMS


def fast_split(pattern: str, compiled: regex.Pattern[str]) -> Split | None:
    """``compiled.findall`` at ``re``'s speed on ASCII stretches; ``None`` for another pattern."""
    if not cuts_at_lines(pattern):
        return None
    full = compiled.findall
    ascii_findall = re.compile(ASCII_FORMS[pattern]).findall
    non_ascii = _NON_ASCII.search
    cut_after = LINE_CUT.search

    def split(text: str) -> list[str]:
        if text.isascii():
            return ascii_findall(text)
        out: list[str] = []
        done = 0  # everything before ``done`` is split; ``done`` is a cut
        n = len(text)
        while done < n:
            m = non_ascii(text, done)
            if m is None:
                out += ascii_findall(text, done)
                break
            start = _cut_before(text, done, m.start())
            if start > done:
                out += ascii_findall(text, done, start)
            # the full pattern from ``start`` to the first cut after which the text is ASCII for
            # at least one whole cut-to-cut stretch
            end = _stretch_end(text, m.start(), n, cut_after, non_ascii)
            out += full(text, start, end)
            done = end
        return out

    return split


def _cut_before(text: str, lo: int, at: int) -> int:
    """The last cut in ``[lo, at]`` (``lo`` itself is one)."""
    while True:
        nl = text.rfind("\n", lo, at)
        if nl < 0:
            return lo
        if LINE_CUT.match(text, nl):
            return nl + 1
        at = nl


def _stretch_end(text: str, at: int, n: int, cut_after, non_ascii) -> int:
    """The first cut after ``at`` that an ASCII stretch follows: the cut after the non-ASCII
    character at ``at``, moved on past every later non-ASCII character that no cut separates
    from it (a run of non-ASCII lines is split in one ``regex`` call)."""
    while True:
        c = cut_after(text, at)
        if c is None:
            return n
        end = c.end()
        m = non_ascii(text, end)
        if m is None:
            return end
        # another non-ASCII character: keep going if no cut separates it from ``end``
        if _cut_before(text, end, m.start()) > end:
            return end
        at = m.start()
