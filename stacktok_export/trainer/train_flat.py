"""The trainer's first merges in numpy: every word end to end in one array.

A corpus's first merges are its commonest pairs, and each one touches a large share of the
words: on the 100 MB sample the first 4,000 of 32,503 merges visit 5.1 million words and took
9.9 s of the Python loop's 15.5 s (~2 us a word). Here a merge is a fixed few dozen numpy calls
(~0.25 ms) over the slots of the words that hold the pair, found through the trainer's word
lists, plus ~0.5 us a word; the pair counts change by ``bincount`` over ids (one side of every
pair around a merge is known), so nothing is sorted but the new pairs' word lists (a 16-bit
radix sort). The first 4,000 merges take 3.7 s; the whole loop 10.9 s. Once the merges touch
few words the trainer turns the array into Python lists (:meth:`FlatWords.to_lists`) and goes
on one word at a time, where a merge costs microseconds instead of the calls' fixed cost.

The rule is the trainer's (``trainer.py``): in each word the pair's occurrences merge left to
right without overlap, and the counts of the pairs around each merged occurrence change by the
word's frequency. Here every pair boundary that touches a merged occurrence is counted once,
before and after the merge (two occurrences side by side share one boundary), which is the
same net change as the loop's edits one occurrence at a time (tested against it and against a
full rescan, ``tests/test_train_flat.py``).

Hand-written because no library applies our merge rule and its counts to a word list without
being a BPE trainer itself (the reference must not run one).

Out of scope: choosing the merge (the trainer's heap) and the words' lists per pair (the
trainer's ``where``, which this reads and extends with the new id's pairs).
"""

from __future__ import annotations

import numpy as np

GAP = -1  # the slot before and after every word: no pair with it exists
DEAD = -2  # a slot merged into its left neighbour
#: the trainer's pair key: ``left << SHIFT | right`` (ids stay below 65,536; trainer.py checks)
SHIFT = 16
MASK = (1 << SHIFT) - 1
_LIST_CHUNK = 1 << 16  # words turned into lists at a time (FlatWords.to_lists)


def byte_pair_keys(pairs: np.ndarray) -> np.ndarray:
    """The pair keys of byte pairs given as ``left << 8 | right`` (16-bit values, int64 out)."""
    pairs = pairs.astype(np.int64)
    return ((pairs >> 8) << SHIFT) | (pairs & 0xFF)


class FlatWords:
    """Words (each at least two bytes) end to end, a ``GAP`` slot between, with live-slot links."""

    def __init__(
        self, words: list[bytes], freqs: list[int], *, word_objects: np.ndarray | None = None
    ) -> None:
        n = len(words)
        lens = np.fromiter(map(len, words), dtype=np.int64, count=n)
        self.start = np.cumsum(lens + 1) - lens  # word j's first slot (slot 0 is a GAP)
        self.wlen = lens  # slots from ``start``, dead ones included
        size = int(lens.sum()) + n + 1
        index = np.int32 if size < (1 << 31) else np.int64
        at = np.arange(int(lens.sum()), dtype=np.int64) + np.repeat(np.arange(1, n + 1), lens)
        self.ids = np.full(size, GAP, dtype=np.int32)
        self.ids[at] = np.frombuffer(b"".join(words), dtype=np.uint8)
        self.word = np.full(size, -1, dtype=np.int32 if n < (1 << 31) else np.int64)
        self.word[at] = np.repeat(np.arange(n), lens)
        # the word numbers the word lists hold (``word_objects``: the trainer's, shared_ints(n))
        self._word_obj = shared_ints(n) if word_objects is None else word_objects
        # float64: what bincount sums, exact below 2**53
        self.freq = np.asarray(freqs, dtype=np.float64)
        self.nxt = np.arange(1, size + 1, dtype=index)
        self.prv = np.arange(-1, size - 1, dtype=index)

    def merge(self, key: int, new_id: int, holders: list[int]) -> tuple[dict[int, int], dict[int, list[int]]]:
        """Merge pair ``key`` in the words ``holders`` (stale ones allowed) into ``new_id``; return
        the pair count changes and, for every new pair (all hold ``new_id``), the words holding it
        in word order."""
        a, b = key >> SHIFT, key & MASK
        ids, nxt, prv = self.ids, self.nxt, self.prv
        held = np.array(holders, dtype=np.int64)
        if not len(held):
            return {}, {}
        if len(held) > 1 and not (held[1:] > held[:-1]).all():  # the lists this phase makes are
            held = np.unique(held)  # sorted without repeats, as _byte_pairs' are; any other is made so
        lens = self.wlen[held]
        ends = np.cumsum(lens)
        slots = np.arange(int(ends[-1]), dtype=np.int64) + np.repeat(self.start[held] - (ends - lens), lens)
        s = slots[ids[slots] == a]  # in slot order: each word's occurrences left to right
        r = nxt[s]
        hit = ids[r] == b
        s, r = s[hit], r[hit]
        if not len(s):
            return {}, {}
        if a == b and len(s) > 1 and (s[1:] == r[:-1]).any():  # a run x x x: every other from its left
            s = leftmost_non_overlapping(s, r)
            r = nxt[s]
        left, right = prv[s], nxt[r]
        left_id, right_id = ids[left], ids[right]
        owner = self.word[s]
        f = self.freq[owner]
        # boundaries: (left, a) before each occurrence and (b, right) after it; two occurrences
        # side by side share one, counted as the first one's right: (b, a) becomes (new, new)
        shared = np.zeros(len(s), dtype=bool)
        shared[1:] = left[1:] == r[:-1]
        before = (left_id >= 0) & ~shared
        after = right_id >= 0
        right_new = right_id.copy()
        right_new[:-1][right[:-1] == s[1:]] = new_id
        lid, lf, lw = left_id[before], f[before], owner[before]
        rid, rf, rw = right_new[after], f[after], owner[after]
        delta = _sums(lid, -lf, a, other_left=True)
        gone = _sums(right_id[after], -rf, b, other_left=False)
        both = (b << SHIFT) | a  # the only key both can hold
        if both in delta and both in gone:
            gone[both] += delta.pop(both)
        delta.update(gone)
        delta.update(_sums(lid, lf, new_id, other_left=True))
        delta.update(_sums(rid, rf, new_id, other_left=False))
        # the links and ids after the merge
        ids[s] = new_id
        ids[r] = DEAD
        following = nxt[r]
        nxt[s] = following
        prv[following] = s
        lists = _holders(lid, lw, new_id, self._word_obj, other_left=True)
        lists.update(_holders(rid, rw, new_id, self._word_obj, other_left=False))
        return delta, lists  # a zero change (both sides of one key) is skipped by the trainer

    def to_lists(self) -> list[list[int]]:
        """Every word's live ids, in word order (for the one-word-at-a-time loop). Ends this
        object: its links go first, and the lists are built ``_LIST_CHUNK`` words at a time, so
        the switch adds little to the trainer's peak memory (all at once it added ~170 MB on the
        100 MB sample, more than the whole flat phase's arrays)."""
        del self.nxt, self.prv, self._word_obj
        ids, word, start, n = self.ids, self.word, self.start, len(self.start)
        shared = shared_ints(int(ids.max()) + 1)
        out: list[list[int]] = []
        for lo in range(0, n, _LIST_CHUNK):
            hi = min(lo + _LIST_CHUNK, n)
            end = int(start[hi - 1] + self.wlen[hi - 1])
            part = slice(int(start[lo]), end)
            live = ids[part] >= 0
            vals = shared[ids[part][live]].tolist()
            ends = np.cumsum(np.bincount(word[part][live] - lo, minlength=hi - lo))
            out += map(vals.__getitem__, map(slice, [0, *ends[:-1].tolist()], ends.tolist()))
        del self.ids, self.word
        return out


def shared_ints(n: int) -> np.ndarray:
    """The ints ``0 .. n-1`` as an object array: lists gathered from it share one int object per
    value, as the Python loop's lists do (a fresh int per entry costs 28 bytes x millions)."""
    return np.array(list(range(n)), dtype=object)


def _key(other: np.ndarray, fixed: int, *, other_left: bool) -> np.ndarray:
    """Pair keys (``other``, ``fixed``), or (``fixed``, ``other``)."""
    other = other.astype(np.int64)
    return (other << SHIFT) | fixed if other_left else (fixed << SHIFT) | other


def _sums(other: np.ndarray, weights: np.ndarray, fixed: int, *, other_left: bool) -> dict[int, int]:
    """``{pair key: summed weight}`` of the pairs of ``other`` with ``fixed`` (see :func:`_key`),
    one per id in ``other`` (a bincount over ids: no sort)."""
    if not len(other):
        return {}
    sums = np.bincount(other, weights=weights)
    present = np.flatnonzero(sums)
    return dict(
        zip(_key(present, fixed, other_left=other_left).tolist(), sums[present].astype(np.int64).tolist())
    )


def _holders(
    other: np.ndarray, words: np.ndarray, fixed: int, word_obj: np.ndarray, *, other_left: bool
) -> dict[int, list[int]]:
    """The words holding each pair of ``other`` with ``fixed`` (see :func:`_key`), in word order
    without repeats (``words`` is in word order; a stable 16-bit sort keeps it)."""
    if not len(other):
        return {}
    order = np.argsort(other.astype(np.uint16), kind="stable")
    other, words = other[order], words[order]
    fresh = np.ones(len(other), dtype=bool)
    fresh[1:] = (other[1:] != other[:-1]) | (words[1:] != words[:-1])
    other, words = other[fresh], words[fresh]
    starts = np.flatnonzero(np.r_[True, other[1:] != other[:-1]])
    keys = _key(other[starts], fixed, other_left=other_left)
    bounds = [*starts.tolist(), len(words)]
    flat = word_obj[words].tolist()
    return dict(zip(keys.tolist(), map(flat.__getitem__, map(slice, bounds, bounds[1:]))))


def leftmost_non_overlapping(pos: np.ndarray, right: np.ndarray) -> np.ndarray:
    """In a chain of pairs sharing a slot (``x x x``), keep every other one from the left: the
    trainer's rule (occurrences merge left to right without overlap), which the encoder's numpy
    batch (``models/bpe/batch.py``) applies to a pair like ``(x, x)`` too."""
    chained = np.zeros(len(pos), dtype=bool)
    chained[1:] = pos[1:] == right[:-1]
    k = np.arange(len(pos))
    run_start = np.maximum.accumulate(np.where(chained, 0, k))
    return pos[(k - run_start) % 2 == 0]
