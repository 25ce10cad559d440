"""The BPE model: one pre-token's bytes to ids by a ranked merge list, textbook-exact on every path.

:class:`BPEModel` stands on the vocabulary's tables (:class:`~.tables.BPETables`) and under
:class:`~.bpe.StackTokenizer`, which adds the text (pre-tokens, specials, the line cache, the
public API). It holds the merge paths and what they keep beside the tables (the whole-token
table, the ranks keyed by characters or as numpy arrays, the hard cuts, the caches).

One pre-token goes by ``_bpe``: ``_bpe_short`` (one leftmost lowest-rank merge at a time,
``min``/``index`` in C), ``_bpe_long`` (hard cuts, :mod:`.hard_cuts`, then every chunk merged
once), ``_bpe_passes`` (whole-string ``str.replace`` passes while they are cheap) and
``_bpe_heap`` (heap + linked list, O(n log n), exact for any merge list). Many distinct
pre-tokens go together (``_bpe_keyed``: whole tokens from a table, the short ones in numpy,
:mod:`.batch`). ``tests/test_bpe_paths.py`` checks every path against the textbook rule
(:mod:`.textbook`).

Out of scope: text (``bpe.py``), validating a vocabulary (``artifact/vocab.py``).
"""

from __future__ import annotations

import heapq
import itertools
import operator
from collections.abc import Callable, Collection, Sequence
from typing import TYPE_CHECKING, Any

from ...artifact.vocab import unsafe_ranks
from ...util.gc import paused as _gc_paused
from .tables import BPETables

if TYPE_CHECKING:
    from .batch import PairRanks
    from .hard_cuts import HardCuts

_SHORT = 48  # single pre-tokens up to this many bytes merge in _bpe_short, longer in _bpe_long
_MISS = 1 << 62  # rank of a pair that never merges (above every packed rank)
_ID = (1 << 31) - 1  # a rank value's low 31 bits are the merged id
_CACHE_MAX = 1 << 18  # cached pre-tokens (or chunks) before a cache starts over
_BATCH = 200  # distinct new pre-tokens (or chunks) from which short ones merge together in numpy
_BATCH_BYTES = 256  # longest pre-token merged in the numpy batch (one round per distinct rank)


class BPEModel(BPETables):
    """Merge-list BPE of pre-tokens over one vocabulary's tables; see the module docstring."""

    ignore_merges: bool

    # ------------------------------------------------------------------ tables
    def _build(
        self, table: list[bytes], results: list[int], *, plain: dict[bytes, int] | None = None
    ) -> dict[bytes, int]:
        """The tables (:meth:`BPETables._build`), then what the merge paths keep beside them."""
        plain = super()._build(table, results, plain=plain)
        n, sh = len(table), self._shift
        # bytes -> id answered without merging: the whole-token rule (``ignore_merges``), or (once
        # worth it) every token whose own BPE is itself (``_self_reachable``)
        self._reach: dict[bytes, int] | None = plain if self.ignore_merges else None
        self._batched = 0  # pre-tokens merged in numpy batches so far (see ``_self_reachable``)
        unsafe = unsafe_ranks(self.merges, results, n)
        self._unsafe = frozenset(self._rank[(a << sh) | b] for a, b in (self.merges[r] for r in unsafe))
        self._wide = n > 0x110000  # ids past chr()'s range: no str passes
        # the same ranks keyed by two characters, for the str passes: built on the first long
        # pre-token (0.2 s for Llama-3's 280,147 merges, which most jobs never need)
        self._pair_rank: dict[str, int] | None = None
        self._rank_pair: dict[int, str] = {}
        self._pair_ranks: PairRanks | None = None  # numpy form of _rank, built on first batch
        self._cuts: HardCuts | None = None  # built on the first long pre-token
        self._clear_caches()
        return plain

    def _clear_caches(self) -> None:
        """Forget every cached merge (pre-tokens, chunks of long pre-tokens)."""
        self._cache: dict[str, list[int]] = {}
        self._chunks: dict[bytes, list[int]] = {}  # chunk of a long pre-token (see _bpe_long) -> ids

    def _self_reachable(self) -> dict[bytes, int]:
        """Bytes -> id of every ordinary token whose BPE is that token alone.

        BPE is a function of a pre-token's bytes, so a new pre-token spelled like such a token
        is that token: the batch answers it from this table instead of merging it (on the
        held-out text a third of the distinct pre-tokens, the commonest words). A token whose
        own BPE is something else (unreachable, or spelled like an earlier token) is not in
        it. Built by merging every token once in one numpy batch (~0.09 s for 32,759 tokens),
        which the encoder does only after it has merged as many pre-tokens as the vocabulary
        holds, so a short job never pays for it. Merge-list BPE alone: an ``ignore_merges``
        source's whole-token rule is not asked (:func:`self_reachable` reads this too).
        """
        ids = [i for i in range(len(self._table)) if i not in self.id_to_special]
        got: dict[int, list[int]] = {}
        # merges only, and the batch below must not build this table again
        saved, self._reach = self._reach, {}
        try:
            self._bpe_keyed(ids, [self._table[i] for i in ids], got)
        finally:
            self._reach = saved
        return {self._table[i]: i for i in ids if got[i] == [i]}

    def _str_ranks(self) -> dict[str, int]:
        """Pair ranks keyed by two characters (one per id), and ``_rank_pair`` back (built once)."""
        if self._pair_rank is None:
            sh, mask = self._shift, (1 << self._shift) - 1
            self._pair_rank = {chr(k >> sh) + chr(k & mask): r for k, r in self._rank.items()}
            self._rank_pair = {r: q for q, r in self._pair_rank.items()}
        return self._pair_rank

    def _batch_ranks(self, bpe_batch):  # noqa: ANN001, ANN202 -- the lazily imported module
        """The numpy pair table: rank values as they are, or ranks + result ids when packed."""
        import numpy as np

        n = len(self._rank)
        keys = np.fromiter(self._rank.keys(), dtype=np.int64, count=n)
        values = np.fromiter(self._rank.values(), dtype=np.int64, count=n)
        unsafe = np.fromiter(self._unsafe, dtype=np.int64, count=len(self._unsafe))
        results = None
        if self._packed:
            ranks = values >> 31
            results = np.empty(n, dtype=np.int64)
            results[ranks] = values & _ID
            values, unsafe = ranks, unsafe >> 31
        return bpe_batch.PairRanks(
            keys,
            values,
            shift=self._shift,
            byte_ids=None if self._byte_map is None else [-1 if i is None else i for i in self._byte_map],
            results=results,
            unsafe=unsafe,
        )

    # ------------------------------------------------------------------ merging
    def _bpe(self, data: bytes) -> list[int]:
        """Merge-list BPE of one pre-token's bytes."""
        if self._reach is not None and data in self._reach:
            return [self._reach[data]]  # a whole token by the source's rule or by its own BPE
        if self._drop is not None:  # bytes without a token leave before any path sees the data
            data = data.translate(None, self._drop)
        if len(data) <= _SHORT:
            return self._bpe_short(self._ids(data))
        return self._bpe_long(data)

    def _ids(self, data: bytes) -> list[int]:
        """The ids of ``data``'s bytes (no byte of it is missing: ``_bpe`` dropped those)."""
        bm = self._byte_map
        return list(data) if bm is None else list(map(bm.__getitem__, data))

    def _bpe_merges(self, data: bytes) -> list[int]:
        """Merge-list BPE of bytes that are not a whole pre-token (no ``ignore_merges`` rule, no cuts)."""
        if len(data) <= _SHORT:
            return self._bpe_short(self._ids(data))
        if self._wide:
            return self._bpe_heap(self._ids(data))
        return self._bpe_passes(data)

    def _bpe_keyed(self, keys: Sequence[Any], datas: Sequence[bytes], into: dict[Any, list[int]]) -> None:
        """``into[keys[j]] = _bpe(datas[j])`` for every ``j``, short ones together in numpy."""
        if len(keys) < _BATCH:
            for key, data in zip(keys, datas):
                into[key] = self._bpe(data)
            return
        from . import batch as bpe_batch

        if self._pair_ranks is None:
            self._pair_ranks = self._batch_ranks(bpe_batch)
        self._batched += len(keys)
        if self._reach is None and self._batched >= len(self._table):
            self._reach = self._self_reachable()
        if self._reach is not None:  # whole tokens first, in C (a third of the pre-tokens)
            found = list(map(self._reach.get, datas))
            if found.count(None) < len(found):
                into.update((key, [t]) for key, t in zip(keys, found) if t is not None)
                rest = [t is None for t in found]
                keys, datas = list(itertools.compress(keys, rest)), list(itertools.compress(datas, rest))
        short, batch = keys, datas
        if self._drop is not None or (datas and max(map(len, datas)) > _BATCH_BYTES):
            short, batch = [], []
            for piece, data in zip(keys, datas):
                if self._drop is not None:
                    data = data.translate(None, self._drop)
                if not data:
                    into[piece] = []  # only bytes without a token
                elif len(data) <= _BATCH_BYTES:
                    short.append(piece)
                    batch.append(data)
                else:
                    into[piece] = self._bpe_long(data)
        bpe_batch.batch_bpe(short, batch, self._pair_ranks, into, finish=self._bpe_short)

    def _bpe_short(self, ids: list[int]) -> list[int]:
        """Merge the leftmost lowest-rank pair, one at a time; ``min``/``index`` run in C.

        Keeps one rank per adjacent pair and updates only the two pairs around
        each merge: O(n) C work per merge, cheapest for short pre-tokens.
        """
        get = self._rank.get
        miss = _MISS
        sh = self._shift
        ranks = [get((a << sh) | b, miss) for a, b in zip(ids, ids[1:])]
        while ranks:
            r = min(ranks)
            if r == miss:
                break
            i = ranks.index(r)
            ids[i] = t = r & _ID
            del ids[i + 1]
            del ranks[i]
            if i < len(ranks):
                ranks[i] = get((t << sh) | ids[i + 1], miss)
            if i:
                ranks[i - 1] = get((ids[i - 1] << sh) | t, miss)
        return ids

    def _bpe_long(self, data: bytes) -> list[int]:
        """Long pre-tokens: cut where no merge can join (:mod:`.bpe_long`), each chunk merged once.

        Chunks are cached by their bytes; many new ones merge together in numpy. A
        pre-token without a cut goes to :meth:`_bpe_merges` whole.
        """
        if self._cuts is None:
            from .hard_cuts import HardCuts

            self._cuts = HardCuts(self._table[t] for t in self._results)
        cache = self._chunks
        out: list[int] = []
        with _gc_paused():
            for part in self._cuts.windows(data):  # bounded working sets keep the cost linear
                if len(part) == 1 and len(part[0]) == len(data):
                    return self._bpe_merges(data)  # no cut anywhere
                _fill(cache, part, self._merge_chunks)
                out += itertools.chain.from_iterable(map(cache.__getitem__, part))
        return out

    def _merge_chunks(self, chunks: Collection[bytes], cache: dict[bytes, list[int]]) -> None:
        """BPE of distinct chunks into ``cache``: the short ones in one numpy batch when there are many."""
        if len(chunks) < _BATCH:
            for data in chunks:
                cache[data] = self._bpe_merges(data)
            return
        from . import batch as bpe_batch

        if self._pair_ranks is None:
            self._pair_ranks = self._batch_ranks(bpe_batch)
        short = [data for data in chunks if len(data) <= _BATCH_BYTES]
        for data in chunks:
            if len(data) > _BATCH_BYTES:
                cache[data] = self._bpe_merges(data)
        bpe_batch.batch_bpe(short, short, self._pair_ranks, cache, finish=self._bpe_short)

    def _bpe_passes(self, data: bytes, *, batch_work: int | None = None) -> list[int]:
        """Long sequences without a cut: whole-string passes while they are cheap, then the heap.

        Each id is one character of a ``str``; the lowest-rank pair present is
        merged everywhere at once by ``str.replace`` (leftmost, non-overlapping:
        the BPE rule) and the new pairs around the merged id are found with
        ``str.split``. A pass costs O(length) in C, so once the passes have
        read ``batch_work`` characters (default 32 per input byte) the rest is
        finished by :meth:`_bpe_heap`; the total stays O(n log n).
        """
        s = data.decode("latin-1")
        if self._translate is not None:
            s = s.translate(self._translate)
        budget = 32 * len(s) if batch_work is None else batch_work
        pair_rank = self._str_ranks()  # never for ids past chr()'s range: _bpe_merges routes those
        rank_pair, unsafe = self._rank_pair, self._unsafe
        get = pair_rank.get
        heap = list(set(map(get, map(operator.add, s, s[1:]))) - {None})
        heapq.heapify(heap)
        while heap:
            if budget < len(s):
                return self._bpe_heap(list(map(ord, s)))
            r = heapq.heappop(heap)
            pair = rank_pair[r]
            budget -= len(s)
            if pair not in s:
                continue  # stale: an earlier merge consumed every occurrence
            if r in unsafe:  # may make a lower-rank pair: one occurrence at a time from here
                return self._bpe_heap(list(map(ord, s)))
            c = chr(r & _ID)
            s = s.replace(pair, c)
            budget -= 2 * len(s)
            for q in _pairs_around(s, c):
                nr = get(q)
                if nr is not None:
                    heapq.heappush(heap, nr)
        return list(map(ord, s))

    def _bpe_heap(self, sym: list[int]) -> list[int]:
        """Heap + linked list: O(n log n) for sequences of any length."""
        rank = self._rank
        sh = self._shift
        n = len(sym)
        nxt = list(range(1, n + 1))
        prv = list(range(-1, n - 1))
        heap = [(r, i) for i in range(n - 1) if (r := rank.get((sym[i] << sh) | sym[i + 1])) is not None]
        heapq.heapify(heap)
        while heap:
            r, i = heapq.heappop(heap)
            j = nxt[i]
            if sym[i] < 0 or j >= n or rank.get((sym[i] << sh) | sym[j]) != r:
                continue  # stale: node merged away or its pair changed
            sym[i] = t = r & _ID
            sym[j] = -1
            nxt[i] = k = nxt[j]
            if k < n:
                prv[k] = i
                nr = rank.get((t << sh) | sym[k])
                if nr is not None:
                    heapq.heappush(heap, (nr, i))
            p = prv[i]
            if p >= 0:
                pr = rank.get((sym[p] << sh) | t)
                if pr is not None:
                    heapq.heappush(heap, (pr, p))
        return [s for s in sym if s >= 0]


def self_reachable(model: BPEModel) -> bool:
    """Every non-special token's own bytes encode to that token (so ``ignore_merges`` is moot):
    the encoder's table of such tokens (``_self_reachable``, all merged at once in numpy) holds
    every one of them (tokens spelled alike cannot all be in it)."""
    ordinary = sum(1 for i in range(len(model._table)) if i not in model.id_to_special)
    return len(model._self_reachable()) == ordinary


def _fill(cache: dict, keys: list, merge: Callable[[set, dict], None]) -> None:
    """Add the ``keys`` missing from ``cache`` by ``merge(new, cache)``.

    When they would overflow it, the cache starts over holding only the entries ``keys`` read:
    only the new keys are merged (clearing everything re-merged ~15 % of the chunks of a 10 MB
    mixed-script pre-token, whose windows each read many chunks cached before).
    """
    wanted = set(keys)
    new = wanted.difference(cache)
    if new:
        if len(cache) + len(new) > _CACHE_MAX:
            known = wanted.difference(new)
            kept = dict(zip(known, map(cache.__getitem__, known)))
            cache.clear()
            cache.update(kept)
        merge(new, cache)


def _pairs_around(s: str, c: str) -> set[str]:
    """Every two-character pair of ``s`` that contains ``c`` (C-speed, via ``str.split``)."""
    parts = s.split(c)
    n = len(parts) - 1
    pairs = set(map(operator.add, map(_LAST, filter(None, parts[:-1])), itertools.repeat(c, n)))
    pairs.update(map(operator.add, itertools.repeat(c, n), map(_FIRST, filter(None, parts[1:]))))
    if c + c in s:
        pairs.add(c + c)
    return pairs


_FIRST, _LAST = operator.itemgetter(0), operator.itemgetter(-1)
