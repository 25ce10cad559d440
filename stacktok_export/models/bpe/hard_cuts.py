"""Hard cuts: where byte-level BPE can never merge across, so a long pre-token splits there.

A merge joins two adjacent tokens into one whose bytes are theirs end to end. So if the
byte pair ``x y`` occurs inside no token that a merge makes, no merge ever joins the
token ending in ``x`` with the one starting at ``y``: the two sides merge independently,
and the BPE of the pre-token is the BPE of each side, concatenated. The order argument
holds too: the textbook rule merges the lowest-rank pair anywhere, leftmost on a tie;
restricted to one side that is that side's own lowest-rank pair, leftmost on a tie.
This is true for any merge list (topological or not) and any byte -> id layout.

On text that is not made of vocabulary words (a minified asset, a base64 run, random
letters of several scripts) such pairs are common: one million random ASCII letters cut
into ~440,000 chunks of 1-30 bytes, each merged on the short paths (and cached), instead
of one million-byte sequence.

    >>> cuts = HardCuts([b"ab", b"abc"])        # the tokens merges make
    >>> cuts.split(b"abcxabc")                   # "cx" and "xa" occur in no token
    [b'abc', b'x', b'abc']

Out of scope: merging the chunks (``StackTokenizer._bpe_long``), pre-tokens without a cut
(the str passes and the heap in ``model.py``).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import numpy as np

_SEP = b"\xff"  # never in UTF-8 text: marks the cuts for one bytes.split
#: bytes cut at a time by :meth:`HardCuts.windows`: a 10 MB pre-token cut in one go allocates
#: arrays of 40-100 MB, fresh from the OS on every call (glibc maps anything over 32 MB), and
#: their page faults made 10x the input cost ~17x the time of the cut (0.67 s vs 0.04 s)
WINDOW_BYTES = 1 << 18


class HardCuts:
    """The byte pairs that occur inside some merged token, and :meth:`split` at the others."""

    def __init__(self, tokens: Iterable[bytes]) -> None:
        # every token's adjacent byte pairs, in numpy over all tokens back to back, leaving out
        # the pairs that straddle two tokens (Llama-3's 280,147 merge results: 0.2 s -> 0.04 s)
        toks = list(set(tokens))
        table = np.zeros(1 << 16, dtype=bool)
        arr = np.frombuffer(b"".join(toks), dtype=np.uint8).astype(np.int32)
        if len(arr) > 1:
            key = (arr[:-1] << 8) | arr[1:]
            inside = np.ones(len(key), dtype=bool)
            ends = np.cumsum(np.fromiter(map(len, toks), dtype=np.int64, count=len(toks)))
            inside[ends[(ends > 0) & (ends < len(arr))] - 1] = False  # (last byte, next token's first)
            table[key[inside]] = True
        self.inside = table

    def split(self, data: bytes) -> list[bytes]:
        """``data`` cut at every pair that no merge can join (``[data]`` when there is none)."""
        if len(data) < 2:
            return [data]
        arr = np.frombuffer(data, dtype=np.uint8)
        key = (arr[:-1].astype(np.int32) << 8) | arr[1:]
        cuts = np.flatnonzero(~self.inside[key]) + 1
        if not len(cuts):
            return [data]
        if _SEP not in data:
            return np.insert(arr, cuts, 0xFF).tobytes().split(_SEP)
        bounds = [0, *cuts.tolist(), len(data)]
        return [data[a:b] for a, b in zip(bounds, bounds[1:])]

    def windows(self, data: bytes, *, size: int | None = None) -> Iterator[list[bytes]]:
        """:meth:`split` of ``data``, in lists of the chunks of about ``size`` bytes at a time.

        A window's last chunk may go on past it: it is held back and starts the next window
        (so the pair across a window's end is judged there). A window without a cut is widened
        (doubled) until it has one or reaches the end, so a pre-token with no cut at all comes
        out as ``[[data]]``.
        """
        size = WINDOW_BYTES if size is None else size
        at, n = 0, len(data)
        while at < n:
            end = at + size
            while True:
                if end >= n:
                    yield self.split(data[at:] if at else data)
                    return
                chunks = self.split(data[at:end])
                if len(chunks) > 1:
                    at = end - len(chunks.pop())
                    yield chunks
                    break
                end = at + 2 * (end - at)
