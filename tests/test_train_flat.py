"""The trainer's numpy phase (``train_flat.py``): the same merges and counts as the Python loop."""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Iterator

import pytest
import regex
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stacktok_export import SPLIT_PATTERN, train_flat, trainer
from stacktok_export.trainer import _MergeState, train_merges

from .conftest import stdlib_text
from .test_bpe import corpus_text, naive_merges

MODES = ("numpy only", "python only", "switch")


@contextlib.contextmanager
def phase(mode: str) -> Iterator[None]:
    """The numpy phase for every merge, for none, or ended by the first merge touching < 3 words."""
    saved = trainer._FLAT_FROM, trainer._FLAT_SPAN
    trainer._FLAT_FROM, trainer._FLAT_SPAN = {
        "numpy only": (0, 200),
        "python only": (float("inf"), 200),
        "switch": (3, 1),
    }[mode]
    try:
        yield
    finally:
        trainer._FLAT_FROM, trainer._FLAT_SPAN = saved


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
        for n in range(40):
            best = plain.pop_best()
            assert flat.pop_best() == best
            if best is None:
                break
            plain.merge(best[0], 256 + n)
            with phase("numpy only"):
                flat.merge(best[0], 256 + n)
            assert flat.counts == plain.counts
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


def test_a_merge_without_holders_or_occurrences_changes_nothing() -> None:
    """Stale or empty word lists (a pair no word holds any more) merge nothing and count nothing."""
    from stacktok_export.train_flat import FlatWords

    flat = FlatWords([b"abc", b"bcd"], [2, 3])
    ab, cd = 97 << 16 | 98, 99 << 16 | 100
    assert flat.merge(ab, 256, []) == ({}, {})
    assert flat.merge(cd, 256, [0]) == ({}, {})  # word 0 holds no (c, d)
    assert flat.to_lists() == [[97, 98, 99], [98, 99, 100]]
