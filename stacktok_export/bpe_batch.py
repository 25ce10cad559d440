"""Batch BPE with numpy: thousands of distinct short pre-tokens merged in lock-step.

Hand-written because no library applies a rank-ordered merge list to many sequences at
once without being a tokenizer itself (and the reference must not run one). Each round,
every unfinished pre-token merges *all* leftmost, non-overlapping occurrences of its own
lowest-rank pair. That is the textbook rule (one leftmost merge at a time) because a merge
only creates pairs that contain the new id, whose ranks are higher -- except for the
``unsafe`` ranks (``vocab.unsafe_ranks``: merges that are not topological), which merge only
their leftmost occurrence per round. Finished pre-tokens leave the arrays, so a round costs
O(bytes still merging). Ranks of id pairs come from a sorted key array (``np.searchsorted``).

Out of scope: long pre-tokens (the caller keeps them on the str-pass/heap paths, a round
here per distinct rank would be quadratic).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

MISS = np.int32(1 << 30)  # rank of a pair that never merges
TAIL = 24  # pre-tokens left in a batch below which ``finish`` ends them one by one
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

    ``finish`` (one-at-a-time BPE from any partly merged state, e.g. ``_bpe_short``) takes
    over once at most ``TAIL`` pre-tokens are left: a round costs the same few numpy calls
    however few pre-tokens still merge, so the long tail of a batch is cheaper in Python.
    """
    done_parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    lens = np.fromiter(map(len, datas), dtype=np.int64, count=len(datas))
    owner = np.arange(len(datas))
    raw = np.frombuffer(b"".join(datas), dtype=np.uint8).astype(np.int32)
    ends = np.cumsum(lens)
    rk = np.empty(len(raw), dtype=np.int32)  # rank of the pair (i, i + 1); MISS at a piece's end
    rk[:-1] = ranks.bytes[(raw[:-1] << 8) | raw[1:]]
    ids = raw if ranks.byte_ids is None else ranks.byte_ids[raw]
    rk[ends - 1] = MISS
    while len(ids):
        starts = ends - lens
        best = np.minimum.reduceat(rk, starts)
        done = best == MISS
        if done.any():
            at_done = np.repeat(done, lens)
            done_parts.append((ids[at_done], lens[done], owner[done]))
            ids, rk = ids[~at_done], rk[~at_done]
            lens, owner, best = lens[~done], owner[~done], best[~done]
            if not len(ids):
                break
            ends = np.cumsum(lens)
            starts = ends - lens
        if finish is not None and len(lens) <= TAIL:
            _finish(keys, ids, lens, owner, finish, into)
            break
        want = np.repeat(best, lens)
        pos = _leftmost_non_overlapping(np.flatnonzero(rk == want))
        if ranks.unsafe is not None:
            pos = _first_if_unsafe(pos, want, starts, ranks.unsafe)
        ids[pos] = want[pos] if ranks.results is None else ranks.results[want[pos]]
        gone = np.zeros(len(ids), dtype=bool)
        gone[pos + 1] = True
        piece = np.searchsorted(starts, pos, side="right") - 1
        ids, rk = ids[~gone], rk[~gone]
        lens = lens - np.bincount(piece, minlength=len(lens))
        ends = np.cumsum(lens)
        _rerank(ids, rk, pos - np.arange(len(pos)), ends[piece], lens[piece], ranks)
    _emit(keys, done_parts, into)


def _finish(
    keys: list[str], ids: np.ndarray, lens: np.ndarray, owner: np.ndarray, finish: Callable, into: dict
) -> None:
    """The pre-tokens still merging, each finished by ``finish`` from its current ids."""
    flat = ids.tolist()
    start = 0
    for n, j in zip(lens.tolist(), owner.tolist()):
        into[keys[j]] = finish(flat[start : start + n])
        start += n


def _leftmost_non_overlapping(pos: np.ndarray) -> np.ndarray:
    """In a run of consecutive positions (a pair ``(x, x)`` in ``x x x``), keep every other one."""
    if len(pos) < 2:
        return pos
    chained = np.zeros(len(pos), dtype=bool)
    chained[1:] = pos[1:] == pos[:-1] + 1
    if not chained.any():
        return pos
    k = np.arange(len(pos))
    run_start = np.maximum.accumulate(np.where(chained, 0, k))
    return pos[(k - run_start) % 2 == 0]


def _first_if_unsafe(pos: np.ndarray, want: np.ndarray, starts: np.ndarray, unsafe: np.ndarray) -> np.ndarray:
    """Keep only each pre-token's leftmost position where its rank is unsafe."""
    u = unsafe[want[pos]]
    if not u.any():
        return pos
    piece = np.searchsorted(starts, pos, side="right") - 1
    first = np.ones(len(pos), dtype=bool)
    first[1:] = piece[1:] != piece[:-1]
    return pos[~u | first]


def _rerank(
    ids: np.ndarray, rk: np.ndarray, at: np.ndarray, end: np.ndarray, length: np.ndarray, ranks: PairRanks
) -> None:
    """Recompute the pair ranks around each merged position ``at`` (after compaction).

    ``end`` and ``length`` describe the pre-token that holds each position.
    """
    is_end = at == end - 1
    rk[at[is_end]] = MISS
    pair = np.concatenate((at[~is_end], at[at != end - length] - 1))  # right pairs, then left pairs
    rk[pair] = ranks.lookup(ids[pair], ids[pair + 1])


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
