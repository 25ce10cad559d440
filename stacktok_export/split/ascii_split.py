"""The Llama-3 and Qwen2 splits, with their ASCII stretches split by the standard library's ``re``.

``regex`` is what defines the split (its Unicode tables are recorded in every artifact), and it
is the slowest step of encoding: on the held-out text the split alone costs more than
tiktoken's whole encode. On ASCII characters the pattern's classes are plain byte ranges, and
the standard library's ``re`` runs them about twice as fast as ``regex`` (measured on the
held-out text's ASCII lines: 0.24 s vs 0.54 s). :func:`fast_split` returns a split that gives
exactly ``regex``'s ``findall`` for :data:`~stacktok_export.split.pretokenize.LLAMA3_PATTERN` and
:data:`~stacktok_export.split.pretokenize.QWEN2_PATTERN` (the same alternatives, but single digits:
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
  pattern, each run of stretches in one call; ``pos``/``endpos`` bound each call (no stretch is
  copied out; the text's lines, made once by ``str.split``, only say which lines are ASCII and
  where the cuts are).

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

#: a line that starts like this has a :data:`LINE_CUT` before it (the newline that ends the line before)
_AFTER_CUT = re.compile(r"[ \t]*[!-~]")

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
    """``compiled.findall`` at ``re``'s speed on ASCII stretches; ``None`` for another pattern.

    A text that is not all ASCII is taken line by line (``str.split`` and ``str.isascii`` run
    in C; a line's own string knows whether it is ASCII): the lines between two cuts are one
    stretch, maximal runs of ASCII stretches go to ``re`` and of the others to ``regex``, each in
    one call. Searching the text for non-ASCII characters and cuts instead cost ~7 ms a MB of
    the held-out text (the split ~60 ms).
    """
    if not cuts_at_lines(pattern):
        return None
    full = compiled.findall
    ascii_findall = re.compile(ASCII_FORMS[pattern]).findall
    after_cut = _AFTER_CUT.match

    def split(text: str) -> list[str]:
        if text.isascii():
            return ascii_findall(text)
        lines = text.split("\n")
        ascii_line = list(map(str.isascii, lines))
        n = len(lines)
        out: list[str] = []
        at = 0  # text position of line ``i``'s start; everything before it is split
        i = 0  # the first line not split yet (its start is a cut)
        while i < n:
            try:
                j = ascii_line.index(False, i)
            except ValueError:  # ASCII to the end
                out += ascii_findall(text, at)
                break
            k = j  # the last cut at or before line j: ASCII lines before it go to re
            while k > i and not after_cut(lines[k]):
                k -= 1
            if k > i:
                start = at + sum(map(len, lines[i:k])) + k - i
                out += ascii_findall(text, at, start)
                at, i = start, k
            m = _stretch_end(lines, j + 1, ascii_line, after_cut)
            if m == n:
                out += full(text, at)
                break
            end = at + sum(map(len, lines[i:m])) + m - i
            out += full(text, at, end)
            at, i = end, m
        return out

    return split


def _stretch_end(lines: list[str], m: int, ascii_line: list[bool], after_cut) -> int:
    """The first line from ``m`` on with a cut before it and an all-ASCII stretch from there to
    the next cut (``len(lines)`` if none): a run of non-ASCII stretches is split in one call."""
    n = len(lines)
    while True:
        while m < n and not after_cut(lines[m]):
            m += 1
        if m == n:
            return n
        e = m + 1  # the next cut
        while e < n and not after_cut(lines[e]):
            e += 1
        if all(ascii_line[m:e]):
            return m
        m = e
