"""The BPE trainer: pre-token counting and the incremental merge loop.

Rule: repeatedly merge the adjacent pair with the highest frequency-weighted
count; ties go to the smallest ``(left id, right id)``; occurrences inside a
word merge left to right without overlap; training stops early when no pair
occurs at least twice. With this rule the merges equal ``rustbpe``'s on the
same input (tested).

Memory is O(distinct pre-tokens): documents are streamed and only the
``Counter`` of pre-token strings is kept. Each merge touches only the words
that contain the merged pair and updates the counts of the neighbouring
pairs in place, so the whole loop costs about one step per merge applied:
occurrences are found with ``list.index`` and each word is edited in place,
and a count that drops pushes nothing (``pop_best`` requeues a stale entry).
The first merges, which touch many words each, run on all the words at once in
numpy (:mod:`.train_flat`): on the 100 MB sample the loop took 15.5 s in
Python alone and takes 10.9 s so.

Out of scope: training on raw bytes that are not valid UTF-8 text, and
dropout/sentencepiece-style variants.
"""

from __future__ import annotations

import heapq
import multiprocessing
import os
import queue as stdqueue
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import numpy as np

from ..split.ascii_split import LINE_CUT, cuts_at_lines, fast_split
from ..split.pretokenize import compile_pattern
from ..util.gc import paused as _gc_paused
from ..util.progress import Bar, Progress
from .train_flat import MASK, SHIFT, FlatWords, byte_pair_keys, shared_ints  # the key's layout lives there
from .train_long import LONG_FROM, LongWord

ProgressFn = Callable[[int, int], None]

_BATCH_BYTES = 4 << 20  # documents handed to a worker at once
_KEY_BITS = 32  # a heap entry is key - (count << 32); keys are below 2**32
_KEY_MASK = (1 << _KEY_BITS) - 1
#: merges run in numpy (train_flat.py) while the words they touch average at least this many
#: over about the last ``_FLAT_SPAN`` merges: a numpy merge costs ~0.25 ms + 0.5 us a word, one
#: in Python ~2 us a word (the 100 MB sample)
_FLAT_FROM = 170
_FLAT_SPAN = 200


def _splitter(pattern: str) -> Callable[[str], list[str]]:
    compiled = compile_pattern(pattern)
    return fast_split(pattern, compiled) or compiled.findall


def _batches(docs: Iterable[str], *, cut: bool) -> Iterator[list[str]]:
    """Documents in groups of about ``_BATCH_BYTES`` characters; with ``cut``, a longer document
    is cut at pre-token boundaries (:data:`~stacktok_export.split.ascii_split.LINE_CUT`) into
    pieces of about that size, so that the workers share the end of the corpus evenly."""
    batch: list[str] = []
    size = 0
    for doc in docs:
        for piece in _pieces(doc) if cut and len(doc) > 2 * _BATCH_BYTES else (doc,):
            batch.append(piece)
            size += len(piece)
            if size >= _BATCH_BYTES:
                yield batch
                batch, size = [], 0
    if batch:
        yield batch


def _pieces(doc: str) -> Iterator[str]:
    start = 0
    while start < len(doc):
        m = LINE_CUT.search(doc, start + _BATCH_BYTES)
        end = len(doc) if m is None else m.end()
        yield doc[start:end]
        start = end


def _count_worker(pattern: str, jobs: Any, results: Any) -> None:
    """A counting process: split every batch from ``jobs`` until ``None``, then send one Counter."""
    try:
        split = _splitter(pattern)
        counts: Counter[str] = Counter()
        for batch in iter(jobs.get, None):
            for doc in batch:
                counts.update(split(doc))
        results.put(("ok", counts))
    except BaseException as exc:  # noqa: BLE001 -- reported to the parent, which raises it
        results.put(("error", f"{type(exc).__name__}: {exc}"))


def count_pretokens(docs: Iterable[str], pattern: str, *, workers: int = 1) -> Counter[str]:
    """Count pre-token strings over a stream of documents.

    With ``workers > 1`` batches of documents are split in worker processes, each keeping its own
    Counter and sending it once at the end (one merge per worker here, not one per batch); at
    most ``2 x workers`` batches wait in the queue, so memory does not grow with the corpus. The
    result is identical, only faster on multi-core machines.
    """
    cut = cuts_at_lines(pattern)
    if workers <= 1:
        split = _splitter(pattern)
        total: Counter[str] = Counter()
        for batch in _batches(docs, cut=cut):
            for doc in batch:
                total.update(split(doc))
        return total
    ctx = multiprocessing.get_context()
    jobs, results = ctx.Queue(maxsize=2 * workers), ctx.Queue()
    procs = [
        ctx.Process(target=_count_worker, args=(pattern, jobs, results), daemon=True) for _ in range(workers)
    ]
    for proc in procs:
        proc.start()
    done = False
    try:
        for batch in _batches(docs, cut=cut):
            _put(jobs, batch, procs)
        for _ in procs:
            _put(jobs, None, procs)
        total = Counter()
        for _ in procs:
            kind, got = _get(results, procs)
            if kind != "ok":
                raise RuntimeError(f"a pre-token counting process failed: {got}")
            if total:
                total.update(got)
            else:
                total = got
        done = True
        return total
    finally:
        for proc in procs:
            if not done:  # an error (a bad input file, a failed worker): they wait for jobs no one sends
                proc.terminate()
            proc.join(timeout=5)
            if proc.is_alive():
                proc.terminate()


def _put(queue: Any, item: Any, procs: list[Any]) -> None:
    while True:
        try:
            return queue.put(item, timeout=1)
        except stdqueue.Full:
            _check_failed(procs)


def _get(queue: Any, procs: list[Any]) -> Any:
    """The next result; an error when a process failed, or when every process exited and the
    queue stayed empty for another second (a process that exited with 0 sent its counts first)."""
    all_exited_before = False
    while True:
        try:
            return queue.get(timeout=1)
        except stdqueue.Empty:
            _check_failed(procs)
            if all_exited_before:
                lost = "the pre-token counting processes exited without sending every count"
                raise RuntimeError(lost) from None
            all_exited_before = all(p.exitcode == 0 for p in procs)


def _check_failed(procs: list[Any]) -> None:
    """Raise when a counting process exited with an error or a signal (exit code 0 is a process
    that finished: its counts are in the queue, not lost)."""
    failed = [p.exitcode for p in procs if p.exitcode not in (None, 0)]
    if failed:
        raise RuntimeError(f"a pre-token counting process ended without its counts (exit code {failed[0]})")


def default_workers() -> int:
    return max(1, min(os.cpu_count() or 1, 8))


class _MergeState:
    """Words, live pair counts, an inverted index and a lazy max-heap (the starting counts and
    index built in numpy, :func:`_byte_pairs`). The merges run on the words end to end in numpy
    (:mod:`.train_flat`) while they touch many words; once the moving average of the words a
    merge touches falls below ``_FLAT_FROM``, the words become Python lists, edited one at a time.
    A word of ``LONG_FROM`` bytes or more is a :class:`~.train_long.LongWord` in both phases.

    A heap entry is one int, ``key - (count << 32)``: the smallest is the highest count, ties to
    the smallest key (a tuple per entry cost ~80 MB more at the end of the 100 MB sample's run).
    """

    def __init__(self, word_counts: dict[bytes, int], *, consume: bool = False) -> None:
        items = _drain(word_counts) if consume else iter(word_counts.items())
        words: list[bytes] = []
        freqs: list[int] = []
        for word, freq in items:
            if len(word) >= 2:  # a single byte holds no pair
                words.append(word)
                freqs.append(freq)
        self.freqs = freqs
        numbers = shared_ints(len(words))  # one int object per word, for every word list
        self.counts, self.where = _byte_pairs(words, freqs, numbers=numbers)
        # words of LONG_FROM bytes or more merge their own way from the start (empty elsewhere)
        self.long = {wi: LongWord(w) for wi, w in enumerate(words) if len(w) >= LONG_FROM}
        for wi in self.long:
            words[wi] = b""
        self.flat: FlatWords | None = FlatWords(words, freqs, word_objects=numbers) if words else None
        self.words: list[list[int]] = []  # the Python lists, once the flat phase is over
        self.touched = float(len(words))  # the recent merges' mean word count (moving average)
        self.heap: list[int] = [k - (c << _KEY_BITS) for k, c in self.counts.items()]
        heapq.heapify(self.heap)

    def pop_best(self) -> tuple[int, int] | None:
        """The live (key, count) with the highest count, smallest key on ties."""
        heap, counts = self.heap, self.counts
        while heap:
            entry = heapq.heappop(heap)
            key, count = entry & _KEY_MASK, -(entry >> _KEY_BITS)
            live = counts.get(key)
            if live == count:
                return key, live
            if live is not None and live < count:  # decreased since pushed: requeue at its count
                heapq.heappush(heap, key - (live << _KEY_BITS))
        return None

    def merge(self, key: int, new_id: int) -> None:
        """Replace every occurrence of pair ``key`` by ``new_id``; fix neighbour counts."""
        holders = self.where.pop(key, ())
        if self.flat is not None:
            self.touched += (len(holders) - self.touched) / _FLAT_SPAN
            if self.touched >= _FLAT_FROM:
                delta, lists = self.flat.merge(key, new_id, holders)
                self.where.update(lists)  # every key holds new_id: none is in ``where`` yet
                self._merge_long(key, new_id, holders, delta)
                self._apply(key, delta)
                return
            self.words, self.flat = self.flat.to_lists(), None
        a, b = key >> SHIFT, key & MASK
        words, freqs, where = self.words, self.freqs, self.where
        delta: dict[int, int] = {}
        for wi in dict.fromkeys(holders):
            word = words[wi]
            f = freqs[wi]
            i = 0
            left = word.count(a)  # occurrences of ``a`` still to visit (no exception at the end)
            while left:
                i = word.index(a, i)  # the next candidate, found in C; the word is edited in place
                left -= 1
                if i + 1 < len(word) and word[i + 1] == b:
                    if a == b:
                        left -= 1  # the merge consumes the next ``a`` too
                    if i:
                        prev = word[i - 1]
                        k = (prev << SHIFT) | a
                        delta[k] = delta.get(k, 0) - f
                        k = (prev << SHIFT) | new_id
                        delta[k] = delta.get(k, 0) + f
                        where.setdefault(k, []).append(wi)
                    if i + 2 < len(word):
                        nxt = word[i + 2]
                        k = (b << SHIFT) | nxt
                        delta[k] = delta.get(k, 0) - f
                        k = (new_id << SHIFT) | nxt
                        delta[k] = delta.get(k, 0) + f
                        where.setdefault(k, []).append(wi)
                    word[i : i + 2] = (new_id,)
                i += 1
        self._merge_long(key, new_id, holders, delta)
        self._apply(key, delta)

    def _merge_long(self, key: int, new_id: int, holders: Iterable[int], delta: dict[int, int]) -> None:
        """The long words among ``holders`` (in the word lists like any word) merge their own way."""
        if self.long:
            for wi in self.long.keys() & holders:
                self.long[wi].merge(key, new_id, self.freqs[wi], delta, self._holds(wi))

    def _holds(self, wi: int) -> Callable[[int], None]:
        """Record that long word ``wi`` holds a pair key (in the word lists, as the list loop does;
        once in a row: a merge in a long word makes the same pair at many slots)."""
        where = self.where

        def holds(k: int) -> None:
            found = where.get(k)
            if found is None:
                where[k] = [wi]
            elif found[-1] != wi:
                found.append(wi)

        return holds

    def _apply(self, merged: int, delta: dict[int, int]) -> None:
        counts, heap = self.counts, self.heap
        counts.pop(merged, None)
        delta.pop(merged, None)
        for k, d in delta.items():
            if not d:
                continue
            c = counts.get(k, 0) + d
            if c > 0:
                counts[k] = c
                if d > 0:  # a decrease keeps its older, higher entry; pop_best requeues it
                    heapq.heappush(heap, k - (c << _KEY_BITS))
            else:
                counts.pop(k, None)
                self.where.pop(k, None)


def _byte_pairs(
    words: list[bytes], freqs: list[int], *, numbers: np.ndarray | None = None
) -> tuple[dict[int, int], dict[int, list[int]]]:
    """The starting pair counts (weighted by word frequency) and, per pair, the words holding it.

    In numpy: at the start every id is a byte, so a pair is one of 65,536 values and its count
    is a ``bincount``; the word lists come from one stable sort of the pairs (radix for 16-bit
    keys), so each list is in word order without repeats. Over 546k words this takes ~0.4 s where
    the equivalent Python loop took 3.6 s.
    """
    if not words:
        return {}, {}
    lens = np.fromiter(map(len, words), dtype=np.int64, count=len(words))
    flat = np.frombuffer(b"".join(words), dtype=np.uint8)
    inside = np.ones(len(flat) - 1, dtype=bool)
    inside[np.cumsum(lens)[:-1] - 1] = False  # no pair across two words
    pair = ((flat[:-1].astype(np.uint16) << 8) | flat[1:])[inside]
    del flat, inside
    word = np.repeat(np.arange(len(words), dtype=np.int32), lens - 1)
    # float64 weights, as bincount takes them: sums are exact below 2**53
    sums = np.bincount(pair, weights=np.asarray(freqs, dtype=np.float64)[word], minlength=1 << 16)
    order = np.argsort(pair, kind="stable")
    pair, word = pair[order], word[order]
    del order
    first = np.ones(len(pair), dtype=bool)
    first[1:] = (pair[1:] != pair[:-1]) | (word[1:] != word[:-1])
    pair, word = pair[first], word[first]
    starts = np.flatnonzero(np.r_[True, pair[1:] != pair[:-1]])
    present = pair[starts].astype(np.int64)
    keys = byte_pair_keys(present).tolist()
    counts = dict(zip(keys, sums[present].astype(np.int64).tolist()))
    # one int object per word, shared by every list that holds it (``numbers``, as FlatWords'
    # lists share them): a fresh int per entry would cost 28 bytes x ~3.8M entries
    flat_words = (shared_ints(len(words)) if numbers is None else numbers)[word].tolist()
    del word
    bounds = [*starts.tolist(), len(flat_words)]
    where = {k: flat_words[a:b] for k, a, b in zip(keys, bounds, bounds[1:])}
    return counts, where


def _drain(d: dict[bytes, int]) -> Iterator[tuple[bytes, int]]:
    """Yield and remove every item, so each word's bytes are freed once it is a list."""
    while d:
        yield d.popitem()


def train_merges(
    word_counts: dict[bytes, int],
    num_merges: int,
    *,
    progress: ProgressFn | None = None,
    consume: bool = False,
) -> list[tuple[int, int]]:
    """Learn up to ``num_merges`` merges from ``{pre-token bytes: count}``.

    Merge ``i`` creates id ``256 + i``. Stops early (returns fewer) when no
    pair occurs at least twice; the caller reports that shortfall. With
    ``consume=True`` ``word_counts`` is emptied while it is read (lower peak
    memory; the merges do not depend on the order of the words).
    """
    if num_merges + 256 > MASK:
        raise ValueError(f"num_merges={num_merges} is too large: ids must stay below {MASK + 1}")
    with _gc_paused():  # millions of lists, no cycles: the collector's passes cost ~15 % (util/gc.py)
        state = _MergeState(word_counts, consume=consume)
        merges: list[tuple[int, int]] = []
        while len(merges) < num_merges:
            best = state.pop_best()
            if best is None or best[1] < 2:
                break
            key = best[0]
            state.merge(key, 256 + len(merges))
            merges.append((key >> SHIFT, key & MASK))
            if progress is not None:
                progress(len(merges), num_merges)
    return merges


def learn_merges(
    docs: Iterable[str],
    pattern: str,
    num_merges: int,
    *,
    workers: int | None = None,
    progress: ProgressFn | None = None,
) -> list[tuple[int, int]]:
    """Count the pre-tokens of ``docs`` under ``pattern`` and learn up to ``num_merges`` merges from
    them (:func:`count_pretokens`, then :func:`train_merges`, the counts freed as they are read)."""
    counts = count_pretokens(docs, pattern, workers=workers or default_workers())
    word_counts = {s.encode("utf-8"): c for s, c in counts.items()}
    del counts
    return train_merges(word_counts, num_merges, progress=progress, consume=True)


class ProgressBar:
    """Merges done as one progress bar (:mod:`stacktok_export.util.progress`): a live tqdm bar on a
    terminal, a plain line every ``every`` seconds otherwise, then one "done" line.

    A ``train_merges`` progress callback: ``bar(done, total)``. It closes itself when
    ``done == total``, when :meth:`close` is called, or -- after a run that stopped early
    (corpus exhausted) -- when it is dropped.
    """

    def __init__(self, *, stream=None, every: float | None = None, quiet: bool = False) -> None:
        self._progress = Progress(quiet=quiet, stream=stream, interval=every)
        self._bar: Bar | None = None

    def __call__(self, done: int, total: int) -> None:
        if self._bar is None:
            self._bar = self._progress.bar("train", total, unit="merges")
        self._bar.set(done)
        if done >= total:
            self._bar.close()

    def close(self) -> None:
        self._progress.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001 -- never raise from a finalizer
            pass
