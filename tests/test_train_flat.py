"""The trainer's numpy phase (``train_flat.py``) and its long words (``train_long.py``): the same
merges and counts as the Python loop."""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Iterator

import pytest
import regex
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stacktok_export import SPLIT_PATTERN
from stacktok_export.trainer import train_flat, trainer
from stacktok_export.trainer.trainer import _MergeState, train_merges

from .conftest import stdlib_text
from .test_bpe import corpus_text, naive_merges

MODES = ("numpy only", "python only", "switch", "long words", "numpy with long words", "switch with long")


@contextlib.contextmanager
def phase(mode: str) -> Iterator[None]:
    """The numpy phase for every merge, for none, or ended by the first merge touching < 3 words;
    "long" modes: every word of 2 (3) bytes or more is a LongWord."""
    saved = trainer._FLAT_FROM, trainer._FLAT_SPAN, trainer.LONG_FROM
    trainer._FLAT_FROM, trainer._FLAT_SPAN, trainer.LONG_FROM = {
        "numpy only": (0, 200, saved[2]),
        "python only": (float("inf"), 200, saved[2]),
        "switch": (3, 1, saved[2]),
        "long words": (float("inf"), 200, 2),
        "numpy with long words": (0, 200, 3),
        "switch with long": (3, 1, 3),
    }[mode]
    try:
        yield
    finally:
        trainer._FLAT_FROM, trainer._FLAT_SPAN, trainer.LONG_FROM = saved


def _words(text: str) -> dict[bytes, int]:
    return {w.encode("utf-8"): c for w, c in Counter(regex.findall(SPLIT_PATTERN, text)).items()}


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=corpus_text, n=st.integers(min_value=1, max_value=60), mode=st.sampled_from(MODES))
def test_every_phase_equals_a_full_rescan(text: str, n: int, mode: str) -> None:
    with phase(mode):
        assert train_merges(_words(text), n) == naive_merges(text, n)


runs = st.text(alphabet=st.sampled_from(list("aab")), min_size=2, max_size=9)
WORDS = st.dictionaries(
    st.one_of(runs, st.text(alphabet="abcab ", min_size=2, max_size=12)), st.integers(1, 50), max_size=30
)


def _merge_beside(plain: _MergeState, other: _MergeState, other_mode: str, *, merges: int = 40) -> None:
    """Merge ``plain`` (Python lists) and ``other`` (in ``other_mode``) pair by pair, the same
    pairs; after each merge their pair counts are equal."""
    for n in range(merges):
        best = plain.pop_best()
        assert other.pop_best() == best
        if best is None:
            return
        with phase("python only"):
            plain.merge(best[0], 256 + n)
        with phase(other_mode):
            other.merge(best[0], 256 + n)
        assert other.counts == plain.counts


def _word_ids(state: _MergeState) -> list[list[int]]:
    """Every word's ids now, long words' included (ends the numpy phase)."""
    words = state.flat.to_lists() if state.flat is not None else list(state.words)
    for wi, word in state.long.items():
        words[wi] = word.live()
    return words


@settings(max_examples=200, deadline=None)
@given(words=WORDS)
def test_numpy_merges_keep_the_counts_and_words_of_the_python_loop(words: dict[str, int]) -> None:
    """Merge by merge, the pair counts after each merge are the Python loop's, and so are the
    words at the end (runs like ``aaaa`` and words holding a pair twice are generated)."""
    data = {w.encode(): c for w, c in words.items()}
    with phase("numpy only"):
        flat = _MergeState(dict(data))
    with phase("python only"):
        plain = _MergeState(dict(data))
    _merge_beside(plain, flat, "numpy only")
    if flat.flat is not None:
        saved, train_flat._LIST_CHUNK = train_flat._LIST_CHUNK, 3  # lists built 3 words at a time
        try:
            assert flat.flat.to_lists() == plain.words
        finally:
            train_flat._LIST_CHUNK = saved


@pytest.mark.parametrize("mode", MODES)
def test_every_phase_equals_a_full_rescan_on_real_text(mode: str) -> None:
    text = stdlib_text(60_000)
    with phase(mode):
        assert train_merges(_words(text), 300) == naive_merges(text, 300)


def test_the_numpy_phase_runs_and_ends_on_real_text() -> None:
    """With the shipped thresholds a real text's first merges go through numpy and the rest
    through Python lists (both phases are exercised by the trainer's own defaults)."""
    state = _MergeState(_words(stdlib_text(400_000)))
    assert state.flat is not None
    done = 0
    while state.flat is not None:
        key, _ = state.pop_best()
        state.merge(key, 256 + done)
        done += 1
    assert 10 < done < 2000 and len(state.words) > 1000


@settings(max_examples=200, deadline=None)
@given(words=WORDS, long_from=st.integers(2, 6), mode=st.sampled_from(["python only", "numpy only"]))
def test_long_words_keep_the_counts_and_words_of_the_list_loop(
    words: dict[str, int], long_from: int, mode: str
) -> None:
    """Merge by merge, with words of ``long_from`` bytes or more as LongWords (beside the Python
    lists or the numpy arrays): the pair counts and, at the end, the words are the list loop's
    (runs like ``aaaa``: the non-overlap rule; a pair twice side by side: the neighbours read
    after the merge before)."""
    data = {w.encode(): c for w, c in words.items()}
    with phase("python only"):
        plain = _MergeState(dict(data))
    saved, trainer.LONG_FROM = trainer.LONG_FROM, long_from
    try:
        with phase(mode):
            longs = _MergeState(dict(data))
        _merge_beside(plain, longs, mode)
        assert len(longs.long) == sum(len(w) >= long_from for w in data)
        assert _word_ids(longs) == _word_ids(plain)
    finally:
        trainer.LONG_FROM = saved


def test_a_long_run_of_letters_merges_as_a_long_word() -> None:
    """A pre-token of 3,000 letters (``LONG_FROM`` is 1,024) goes on as a LongWord holding its
    bytes, and the merges equal the list loop's."""
    run = "".join(chr(97 + (i * i + 3 * i) % 7) for i in range(3000))
    words = _words(stdlib_text(20_000) + " " + run)
    with phase("python only"):
        state = _MergeState(dict(words))
        key, _ = state.pop_best()
        state.merge(key, 256)
        (long_word,) = state.long.values()
        table = [bytes([i]) for i in range(256)] + [bytes([key >> 16, key & 0xFFFF])]
        assert b"".join(table[t] for t in long_word.live()) == b" " + run.encode()
        merged = train_merges(dict(words), 200)
        saved, trainer.LONG_FROM = trainer.LONG_FROM, 10**9  # no long words
        try:
            assert train_merges(dict(words), 200) == merged
        finally:
            trainer.LONG_FROM = saved


def test_a_merge_without_holders_or_occurrences_changes_nothing() -> None:
    """Stale or empty word lists (a pair no word holds any more) merge nothing and count nothing."""
    from stacktok_export.trainer.train_flat import FlatWords

    flat = FlatWords([b"abc", b"bcd"], [2, 3])
    ab, cd = 97 << 16 | 98, 99 << 16 | 100
    assert flat.merge(ab, 256, []) == ({}, {})
    assert flat.merge(cd, 256, [0]) == ({}, {})  # word 0 holds no (c, d)
    assert flat.to_lists() == [[97, 98, 99], [98, 99, 100]]
