"""Batch BPE with numpy: thousands of distinct short pre-tokens merged in lock-step.

Hand-written because no library applies a rank-ordered merge list to many sequences at
once without being a tokenizer itself (and the reference must not run one). Each round,
every unfinished pre-token merges *all* leftmost, non-overlapping occurrences of its own
lowest-rank pair. That is the textbook rule (one leftmost merge at a time) because a merge
only creates pairs that contain the new id, whose ranks are higher -- except for the
``unsafe`` ranks (``artifact/vocab.py``'s ``unsafe_ranks``: merges that are not topological), which merge only
their leftmost occurrence per round. A merge relinks slots instead of moving data; finished
pre-tokens leave the arrays in bulk (``_Batch.compact``), so a round costs a fixed ~30 numpy
calls over O(bytes still merging) -- the calls, not the data, are most of its cost (measured on
the held-out text: ~0.14 ms a round, 17 rounds for a 50 KB document's ~550 new pre-tokens).
Ranks of id pairs come from a direct-mapped hash (``PairRanks``).

Out of scope: long pre-tokens (the caller keeps them on the str-pass/heap paths, a round
here per distinct rank would be quadratic).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ...trainer.train_flat import leftmost_non_overlapping

MISS = np.int32(1 << 30)  # rank of a pair that never merges
TAIL = 24  # pre-tokens left in a batch below which ``finish`` ends them one by one
_COMPACT_FROM = 64  # pre-tokens in the arrays from which finished ones are removed
GAP = np.int32(-1)  # the slot after each pre-token: no pair with it merges
DEAD = np.int32(-2)  # a slot merged into its left neighbour
_SEARCH_BELOW = 256  # look-ups of fewer keys binary-search the sorted keys, more read the hash
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)  # Fibonacci hashing's multiplier (2^64 / golden ratio)


class PairRanks:
    """``rank[(a << shift) | b]`` for arrays of ``a`` and ``b``, vectorized (a sorted key array).

    Built from the pair keys and their rank values as arrays (no Python loop: 280k merges
    in milliseconds). ``byte_ids`` maps each byte to its id when bytes are not ids 0..255 in
    byte order; ``results`` maps a rank to the id it makes when rank values are not the ids
    themselves; ``unsafe`` lists the rank values that merge one occurrence per round.
    """

    def __init__(
        self,
        keys: np.ndarray,
        values: np.ndarray,
        *,
        shift: int = 16,
        byte_ids: list[int] | None = None,
        results: np.ndarray | None = None,
        unsafe: np.ndarray | None = None,
    ) -> None:
        self.key_shift = np.int64(shift)
        self.byte_ids = None if byte_ids is None else np.array(byte_ids, dtype=np.int32)
        self.results = None if results is None else results.astype(np.int32)
        order = np.argsort(keys, kind="stable")
        self._keys = keys[order].astype(np.int64)
        self._vals = values[order].astype(np.int32)
        # the same with a sentinel key above every pair key (a search never runs off the end)
        self._keys_all = np.append(self._keys, np.iinfo(np.int64).max)
        self._vals_all = np.append(self._vals, MISS)
        self.unsafe: np.ndarray | None = None  # unsafe[rank value]: merge one occurrence per round
        if unsafe is not None and len(unsafe):
            self.unsafe = np.zeros(int(max(values.max(), unsafe.max())) + 1, dtype=bool)
            self.unsafe[unsafe] = True
        self._hash_table()
        ids = np.arange(256, dtype=np.int32) if self.byte_ids is None else self.byte_ids
        # dense: (x << 8) | y for two bytes x, y
        self.bytes = self.lookup(np.repeat(ids, 256), np.tile(ids, 256))

    def _hash_table(self) -> None:
        """A direct-mapped hash of the keys (4 to 8 slots a key: 1.7 MB for our 32,503 merges, 27 MB
        for Llama-3's 280,147): one random read per look-up where a binary search makes ~17 over
        the whole key array (measured: 30 us vs 250 us for 2,000 keys; below ``_SEARCH_BELOW``
        keys the search's fewer numpy calls win). The first key of a slot lives in
        it; the others (~10 %) stay in a sorted array, searched only for the keys whose
        slot is marked ``_crowded``."""
        bits = max(10, (4 * max(1, len(self._keys)) - 1).bit_length())
        self._hash_shift = np.uint64(64 - bits)
        home = self._slot(self._keys)
        taken, first = np.unique(home, return_index=True)
        self._slot_keys = np.full(1 << bits, -1, dtype=np.int64)  # no pair key is negative
        self._slot_vals = np.full(1 << bits, MISS, dtype=np.int32)
        self._slot_keys[taken] = self._keys[first]
        self._slot_vals[taken] = self._vals[first]
        rest = np.ones(len(self._keys), dtype=bool)
        rest[first] = False
        self._crowded = np.zeros(1 << bits, dtype=bool)
        self._crowded[home[rest]] = True
        # sorted (``_keys`` is), with a sentinel above every key so a search never runs off the end
        self._rest_keys = np.append(self._keys[rest], np.iinfo(np.int64).max)
        self._rest_vals = np.append(self._vals[rest], MISS)

    def _slot(self, key: np.ndarray) -> np.ndarray:
        return ((key.astype(np.uint64) * _GOLDEN) >> self._hash_shift).astype(np.intp)

    def lookup(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        key = (a.astype(np.int64) << self.key_shift) | b
        if len(key) < _SEARCH_BELOW:  # a few keys: one binary search costs fewer numpy calls
            at = np.searchsorted(self._keys_all, key)
            return np.where(self._keys_all[at] == key, self._vals_all[at], MISS)
        slot = self._slot(key)
        out = np.where(self._slot_keys[slot] == key, self._slot_vals[slot], MISS)
        crowded = np.flatnonzero(self._crowded[slot])
        if len(crowded):
            k = key[crowded]
            at = np.searchsorted(self._rest_keys, k)
            out[crowded] = np.where(self._rest_keys[at] == k, self._rest_vals[at], out[crowded])
        return out


def batch_bpe(
    keys: list[str],
    datas: list[bytes],
    ranks: PairRanks,
    into: dict[str, list[int]],
    *,
    finish: Callable[[list[int]], list[int]] | None = None,
) -> None:
    """Set ``into[keys[j]]`` to the BPE ids of ``datas[j]`` (each non-empty) for every ``j``.

    The pre-tokens lie end to end in flat arrays, each followed by one ``GAP`` slot (whose
    pairs never merge). A merge leaves the right slot ``DEAD`` and relinks the live ones
    (``nxt``/``prv``), so a round moves no data; finished pre-tokens and dead slots leave the
    arrays once three quarters of the pre-tokens are finished. ``finish`` (one-at-a-time BPE
    from any partly merged state, e.g. ``_bpe_short``) takes over once at most ``TAIL``
    pre-tokens are left: a round costs the same few numpy calls however few still merge.
    """
    lens = np.fromiter(map(len, datas), dtype=np.int64, count=len(datas))
    raw = np.frombuffer(b"\x00".join(datas) + b"\x00", dtype=np.uint8).astype(np.int32)
    gaps = np.cumsum(lens + 1) - 1
    b = _Batch(raw if ranks.byte_ids is None else ranks.byte_ids[raw], np.empty(len(raw), dtype=np.int32))
    b.rk[:-1] = ranks.bytes[(raw[:-1] << 8) | raw[1:]]
    b.ids[gaps] = GAP
    b.rk[gaps] = b.rk[gaps - 1] = MISS
    b.owner = np.arange(len(datas))
    b.layout(np.repeat(b.owner, lens + 1), len(datas))
    parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    while True:
        best = np.minimum.reduceat(b.rk, b.starts)
        done = best == MISS
        n_done = int(np.count_nonzero(done))
        if n_done == len(best) or (finish is not None and len(best) - n_done <= TAIL):
            break
        if n_done and 4 * n_done >= 3 * len(best) and len(best) >= _COMPACT_FROM:
            parts.append(b.compact(done))
            best, done, n_done = best[~done], done[~done], 0
        if n_done:
            best[done] = -1  # no rank equals it: finished pre-tokens merge nothing
        pos = np.flatnonzero(b.rk == best[b.piece])
        _merge(b, pos, ranks)
    if n_done < len(best):  # ``finish`` ends the tail, the rest were finished in numpy
        b.finish_tail(keys, ~done, finish, into)
    parts.append(b.collect(done))
    _emit(keys, parts, into)


class _Batch:
    """The flat arrays of one batch: ids, pair ranks, links, and which pre-token owns a slot."""

    def __init__(self, ids: np.ndarray, rk: np.ndarray) -> None:
        self.ids = ids  # an id; ``GAP`` after each pre-token, ``DEAD`` where merged away
        self.rk = rk  # rank of the pair (slot, next live slot); ``MISS`` if none
        self.owner = np.empty(0, dtype=np.intp)  # pre-token j of the i-th pre-token here

    def layout(self, piece: np.ndarray, n: int) -> None:
        """Set the owner of each slot, each pre-token's first slot, and links to neighbours."""
        self.piece = piece
        size = np.bincount(piece, minlength=n)
        self.starts = np.cumsum(size) - size
        self.nxt = np.arange(1, len(piece) + 1)
        self.prv = np.arange(-1, len(piece) - 1)  # -1: the last slot, always a gap

    def collect(self, done: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The current ids, lengths and owners of the pre-tokens ``done`` marks (for ``_emit``)."""
        at = done[self.piece]
        ids = self.ids[at]
        real = ids >= 0
        lens = np.bincount(self.piece[at][real], minlength=len(done))[done]
        return ids[real], lens, self.owner[done]

    def compact(self, done: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Remove the finished pre-tokens (returned as by ``collect``) and every dead slot."""
        finished = self.collect(done)
        live = ~done
        keep = live[self.piece] & (self.ids != DEAD)
        self.ids, self.rk = self.ids[keep], self.rk[keep]
        self.owner = self.owner[live]
        self.layout((np.cumsum(live) - 1)[self.piece[keep]], len(self.owner))
        return finished

    def finish_tail(self, keys: list[str], tail: np.ndarray, finish: Callable, into: dict) -> None:
        """The pre-tokens still merging, each finished by ``finish`` from its current ids."""
        ids, lens, owner = self.collect(tail)
        flat = ids.tolist()
        start = 0
        for n, j in zip(lens.tolist(), owner.tolist()):
            into[keys[j]] = finish(flat[start : start + n])
            start += n


def _merge(b: _Batch, pos: np.ndarray, ranks: PairRanks) -> None:
    """Merge the pairs at ``pos`` (each its pre-token's lowest rank), then re-rank their neighbours."""
    right = b.nxt[pos]
    if len(pos) > 1 and (pos[1:] == right[:-1]).any():  # a pair (x, x) in x x x
        pos = leftmost_non_overlapping(pos, right)
        right = b.nxt[pos]
    rank = b.rk[pos]
    if ranks.unsafe is not None:
        pos, right, rank = _first_if_unsafe(pos, right, rank, b.piece, ranks.unsafe)
    new = rank if ranks.results is None else ranks.results[rank]
    b.ids[pos] = new
    b.ids[right] = DEAD
    b.rk[right] = MISS
    after = b.nxt[right]
    b.nxt[pos] = after
    b.prv[after] = pos
    before = b.prv[pos]
    b.rk[np.concatenate((pos, before))] = ranks.lookup(
        np.concatenate((new, b.ids[before])), np.concatenate((b.ids[after], new))
    )


def _first_if_unsafe(
    pos: np.ndarray, right: np.ndarray, rank: np.ndarray, piece: np.ndarray, unsafe: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Keep only each pre-token's leftmost position where its rank is unsafe."""
    u = unsafe[rank]
    if not u.any():
        return pos, right, rank
    p = piece[pos]
    first = np.ones(len(pos), dtype=bool)
    first[1:] = p[1:] != p[:-1]
    keep = ~u | first
    return pos[keep], right[keep], rank[keep]


def _emit(keys: list[str], parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]], into: dict) -> None:
    """Store every finished pre-token's ids as a Python list (slicing and zipping run in C)."""
    if not parts:  # ``finish`` ended them all
        return
    flat = np.concatenate([p[0] for p in parts]).tolist()
    lens = np.concatenate([p[1] for p in parts])
    owner = np.concatenate([p[2] for p in parts]).tolist()
    ends = np.cumsum(lens)
    segments = map(flat.__getitem__, map(slice, (ends - lens).tolist(), ends.tolist()))
    into.update(zip(map(keys.__getitem__, owner), segments))
