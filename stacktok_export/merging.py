"""The merge paths of the reference: one pre-token's bytes to ids, textbook-exact on every path.

A mixin of :class:`~stacktok_export.bpe.StackTokenizer` (its tables come from
:mod:`.tables`): ``_bpe_short`` (one leftmost lowest-rank merge at a time, ``min``/``index``
in C), ``_bpe_long`` (hard cuts, :mod:`.bpe_long`, then every chunk merged once),
``_bpe_passes`` (whole-string ``str.replace`` passes while they are cheap) and ``_bpe_heap``
(heap + linked list, O(n log n), exact for any merge list). ``tests/test_bpe_paths.py``
checks every path against the textbook rule.

Out of scope: splitting text into pre-tokens and the caches (``bpe.py``), the public API
(``api.py``).
"""

from __future__ import annotations

import heapq
import itertools
import operator
from collections.abc import Callable, Collection

from ._gc import paused as _gc_paused

_MISS = 1 << 62  # rank of a pair that never merges (above every packed rank, see tables.py)
_ID = (1 << 31) - 1  # a rank value's low 31 bits are the merged id
_CACHE_MAX = 1 << 18  # cached pre-tokens before the cache is cleared
_BATCH = 200  # distinct new pre-tokens from which encode() merges short ones in numpy (bpe_batch)
_BATCH_BYTES = 256  # longest pre-token merged in the numpy batch (one round per distinct rank)


class MergePaths:
    """The merge paths; every attribute they read is set by :class:`~stacktok_export.tables.VocabTables`."""

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
            from .bpe_long import HardCuts

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
        from . import bpe_batch

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
