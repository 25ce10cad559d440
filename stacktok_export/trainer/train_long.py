"""The trainer's long words: a merge visits the pair's occurrences, not the whole word.

In the one-word-at-a-time phase (``trainer.py``) a merge finds its pair in a word by scanning
for the left id (``list.count``, ``list.index``) and deletes the right one from the list. That
is the cheapest way for ordinary words; in one 1 MB word (a run of letters: a sequence file, a
minified asset) every merge of two letters scans the million ids, visits each occurrence of the
left letter (~1/52 of them) and moves the list's tail once per occurrence: on the first 5 MB of
the held-out sample plus one line of 1,000,000 random letters (vocab 8,192) training took
69.7 s against 2.5 s without that line (HF's ``BpeTrainer`` 717 s, rustbpe ~5 s).

A :class:`LongWord` keeps its ids in slots that never move, linked to their live neighbours,
and for each pair the slots where it starts (some stale: checked when read, never removed), so
a merge costs its occurrences: 4.1-4.7 s on the same input (rustbpe 3.7-4.6 s), merges
identical. The rule and the counts are the trainer's: occurrences merge left to right without
overlap, and the pairs around each one change by the word's frequency, read from the current
neighbours (tested against the list loop and a full rescan, ``tests/test_train_flat.py``). A
word is long from the first merge: the numpy phase (``train_flat.py``) reads every slot of each
word it merges in, ~3 ms a merge for a 1 MB word.

Why by hand: the merge rule and its counts are the trainer's own (the reference must not run a
BPE trainer from a library); ``array`` holds 4 bytes a slot where lists of ints held ~36.

Out of scope: choosing the merge and the other words (``trainer.py``, ``train_flat.py``).
"""

from __future__ import annotations

from array import array
from collections.abc import Callable

import numpy as np

from .train_flat import MASK, SHIFT, byte_pair_keys

#: words of at least this many bytes are LongWords from the first merge (the 100 MB sample's
#: longest pre-token has 320 bytes: none of its words is one)
LONG_FROM = 1024
DEAD = -1  # a slot merged into its left neighbour


class LongWord:
    """One word's ids in fixed slots with live-neighbour links and each pair's starting slots."""

    __slots__ = ("at", "ids", "nxt", "prv")

    def __init__(self, word: bytes) -> None:
        """``word``: the pre-token's bytes (every id a byte: the word has not merged yet)."""
        n = len(word)
        if n >= 1 << 31:
            raise ValueError(f"a pre-token of {n} bytes is too long to train on (the limit is 2**31 - 1)")
        raw = np.frombuffer(word, dtype=np.uint8)
        # 4 bytes a slot in each array (C ints; ids stay below 65,536, slots below 2**31)
        self.ids = _ints(raw)  # edited in place: a merged-away slot holds DEAD
        self.nxt = _ints(np.arange(1, n + 1, dtype=np.int32))  # n: no live slot after
        self.prv = _ints(np.arange(-1, n - 1, dtype=np.int32))  # -1: none before
        # pair key -> the slots where it may start (checked when read): the byte pairs grouped
        # by one stable radix sort, so each key's slots are in order
        pairs = (raw[:-1].astype(np.uint16) << 8) | raw[1:]
        order = np.argsort(pairs, kind="stable").astype(np.int32)
        pairs = pairs[order]
        starts = np.flatnonzero(np.r_[True, pairs[1:] != pairs[:-1]])
        bounds = [*starts.tolist(), len(pairs)]
        self.at: dict[int, array[int]] = {
            key: _ints(order[lo:hi])
            for key, lo, hi in zip(byte_pair_keys(pairs[starts]).tolist(), bounds, bounds[1:])
        }

    def live(self) -> list[int]:
        """The word's ids now (as the list loop would hold them)."""
        return [t for t in self.ids if t != DEAD]

    def merge(
        self, key: int, new_id: int, freq: int, delta: dict[int, int], holds: Callable[[int], None]
    ) -> None:
        """Merge pair ``key`` into ``new_id`` at each of its occurrences, leftmost first without
        overlap; add the count changes (times ``freq``) to ``delta`` and call ``holds(k)`` for
        every pair ``k`` the merges create."""
        slots = self.at.pop(key, None)
        if not slots:
            return
        a, b = key >> SHIFT, key & MASK
        ids, nxt, prv, at = self.ids, self.nxt, self.prv, self.at
        n = len(ids)
        # ``slots`` is in slot order: the first lists are built left to right, and every later
        # key holds the id of one merge, whose pass appends its slots left to right
        for i in slots:
            if ids[i] != a:
                continue  # stale: merged since, or merged away as the right of an (a, a) just before
            j = nxt[i]
            if j == n or ids[j] != b:
                continue  # stale: the right neighbour changed
            p, k = prv[i], nxt[j]
            if p >= 0:  # (left, a) becomes (left, new), starting at p
                left = ids[p]
                _moved(delta, at, holds, (left << SHIFT) | a, (left << SHIFT) | new_id, p, freq)
            if k < n:  # (b, right) becomes (new, right), starting at i
                right = ids[k]
                _moved(delta, at, holds, (b << SHIFT) | right, (new_id << SHIFT) | right, i, freq)
                prv[k] = i
            ids[i] = new_id
            ids[j] = DEAD
            nxt[i] = k


def _moved(
    delta: dict[int, int],
    at: dict[int, array[int]],
    holds: Callable[[int], None],
    old: int,
    made: int,
    slot: int,
    freq: int,
) -> None:
    """A neighbour pair of a merged occurrence: ``old`` loses ``freq``, ``made`` gains it and now
    starts at ``slot`` (the count rule, the same on either side of the occurrence)."""
    delta[old] = delta.get(old, 0) - freq
    delta[made] = delta.get(made, 0) + freq
    _slots(at, made).append(slot)
    holds(made)


def _slots(at: dict[int, array[int]], key: int) -> array[int]:
    found = at.get(key)
    if found is None:
        at[key] = found = array("i")
    return found


def _ints(values: np.ndarray) -> array[int]:
    """``values`` as an ``array("i")`` (C ints)."""
    out = array("i")
    out.frombytes(values.astype(np.int32).tobytes())
    return out
