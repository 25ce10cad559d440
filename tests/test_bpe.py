"""The reference tokenizer: layout, trainer, encoder, decoder, special-token trust."""

from __future__ import annotations

import os
import time
import warnings
from collections import Counter

import pytest
import regex
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stacktok_export import SPECIAL_TOKENS, SPLIT_PATTERN, StackTokenizer
from stacktok_export.models.bpe.textbook import merge_pair
from stacktok_export.trainer import trainer
from stacktok_export.trainer.trainer import _byte_pairs, train_merges

from .conftest import PROBE, need, stdlib_text

TOY_CORPUS = "the quick brown fox jumps over the lazy dog. " * 200


def _train(text: str, vocab_size: int) -> tuple[StackTokenizer, int]:
    tok = StackTokenizer()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        shortfall = tok.train(text, vocab_size=vocab_size)
    return tok, shortfall


# --------------------------------------------------------------- the seed's toy
def test_toy_case_shortfall_and_layout() -> None:
    toy, shortfall = _train(TOY_CORPUS, 512)
    assert len(toy.merges) == 32 and shortfall == 215
    assert toy.vocab_size == 512
    assert (toy.bos_id, toy.eos_id, toy.pad_id) == (503, 504, 505)
    assert toy.special_to_id["<|tool_result|>"] == 511
    assert list(toy.special_to_id)[:215] == [f"<|unused_{i}|>" for i in range(215)]
    assert list(toy.special_to_id)[215:] == list(SPECIAL_TOKENS)


def test_shortfall_warns() -> None:
    with pytest.warns(UserWarning, match="215 short of 247"):
        StackTokenizer().train(TOY_CORPUS, vocab_size=512)


def test_vocab_too_small_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="at least 265"):
        StackTokenizer().train("abc", vocab_size=100)


# ------------------------------------------------------------ trainer vs naive
def naive_merges(text: str, num_merges: int) -> list[tuple[int, int]]:
    """Full rescan per merge: the textbook definition of the rule we implement (pairs merged by
    ``stacktok_export.models.bpe.textbook.merge_pair``, the one textbook merge shared with the audit)."""
    counts = Counter(regex.findall(SPLIT_PATTERN, text))
    words = {tuple(w.encode("utf-8")): c for w, c in counts.items()}
    merges: list[tuple[int, int]] = []
    while len(merges) < num_merges:
        pairs: Counter[tuple[int, int]] = Counter()
        for w, c in words.items():
            for p in zip(w, w[1:]):
                pairs[p] += c
        if not pairs:
            break
        best = min(pairs, key=lambda p: (-pairs[p], p))
        if pairs[best] < 2:
            break
        new_id = 256 + len(merges)
        merges.append(best)
        merged: dict[tuple[int, ...], int] = {}
        for w, c in words.items():
            out = tuple(merge_pair(w, best, new_id))
            merged[out] = merged.get(out, 0) + c
        words = merged
    return merges


corpus_text = st.text(alphabet=st.sampled_from(list("aaabbbccd   ,.'\n0123é")), min_size=0, max_size=400)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=corpus_text, n=st.integers(min_value=1, max_value=60))
def test_trainer_equals_naive_full_rescan(text: str, n: int) -> None:
    counts = Counter(regex.findall(SPLIT_PATTERN, text))
    words = {w.encode("utf-8"): c for w, c in counts.items()}
    assert train_merges(words, n) == naive_merges(text, n)


def test_trainer_equals_naive_on_real_text() -> None:
    text = stdlib_text(60_000)
    counts = Counter(regex.findall(SPLIT_PATTERN, text))
    words = {w.encode("utf-8"): c for w, c in counts.items()}
    assert train_merges(words, 300) == naive_merges(text, 300)


def test_consume_gives_the_same_merges_and_empties_the_input() -> None:
    text = stdlib_text(200_000)
    words = {w.encode("utf-8"): c for w, c in Counter(regex.findall(SPLIT_PATTERN, text)).items()}
    kept = dict(words)
    assert train_merges(words, 300, consume=True) == train_merges(kept, 300)
    assert words == {} and kept


FREQS = st.integers(min_value=1, max_value=10**12)


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.binary(min_size=2, max_size=12), FREQS, max_size=40))
def test_starting_pairs_equal_a_plain_count(words: dict[bytes, int]) -> None:
    """The numpy start of the merge loop: counts (exact past 2**32) and word lists in word order."""
    order = list(words)
    counts, where = _byte_pairs(order, [words[w] for w in order])
    want_counts: dict[int, int] = {}
    want_where: dict[int, list[int]] = {}
    for wi, w in enumerate(order):
        for a, b in zip(w, w[1:]):
            k = a << 16 | b
            want_counts[k] = want_counts.get(k, 0) + words[w]
            lst = want_where.setdefault(k, [])
            if not lst or lst[-1] != wi:
                lst.append(wi)
    assert counts == want_counts
    assert where == want_where


def test_tie_break_is_smallest_pair() -> None:
    # "ab" and "cd" both occur twice: (97, 98) < (99, 100) wins; then "cd".
    merges = train_merges({b"ab": 2, b"cd": 2}, 5)
    assert merges == [(97, 98), (99, 100)]


def test_overlapping_pairs_merge_left_to_right() -> None:
    # "aaa" counts (a,a) twice but merges once, leaving [aa, a].
    merges = train_merges({b"aaa": 3}, 3)
    assert merges == [(97, 97), (256, 97)]


def test_merges_equal_rustbpe_on_real_text() -> None:
    """An independent Rust trainer learns the same merges on ~3 MB of real text."""
    rustbpe = need("rustbpe", "test")
    text = stdlib_text(3_000_000)
    docs = [text[i : i + 100_000] for i in range(0, len(text), 100_000)]
    ours = StackTokenizer()
    ours.train_from_iterable(docs, vocab_size=4000 + len(SPECIAL_TOKENS), workers=2)
    theirs = rustbpe.Tokenizer()
    theirs.train_from_iterator(iter(docs), 4000, pattern=SPLIT_PATTERN)
    ranks = sorted(theirs.get_mergeable_ranks(), key=lambda kv: kv[1])
    assert [b for b, _ in ranks] == ours.token_bytes()


def test_parallel_counting_matches_serial() -> None:
    text = stdlib_text(400_000)
    docs = [text[i : i + 10_000] for i in range(0, len(text), 10_000)]
    a, b = StackTokenizer(), StackTokenizer()
    a.train_from_iterable(docs, vocab_size=800, workers=1)
    b.train_from_iterable(docs, vocab_size=800, workers=2)
    assert a.merges == b.merges


# ------------------------------------------------------------ encode / decode
@settings(max_examples=300, deadline=None)
@given(text=st.text())
def test_round_trip_arbitrary_text(small_tok: StackTokenizer, text: str) -> None:
    assert small_tok.decode_bytes(small_tok.encode(text)) == text.encode("utf-8", "surrogatepass")


@settings(max_examples=200, deadline=None)
@given(data=st.binary())
def test_round_trip_arbitrary_bytes(small_tok: StackTokenizer, data: bytes) -> None:
    """Byte ids decode exactly; text decode replaces exactly like Python's codec."""
    assert small_tok.decode_bytes(list(data)) == data
    assert small_tok.decode(list(data)) == data.decode("utf-8", errors="replace")
    text = data.decode("utf-8", errors="replace")
    assert small_tok.decode(small_tok.encode(text)) == text


def test_every_token_encodes_to_itself(small_tok: StackTokenizer) -> None:
    """Self-reachability: merge-list BPE of a token's bytes is that token."""
    for i, b in enumerate(small_tok.token_bytes()[256:], start=256):
        assert small_tok._bpe(b) == [i]


def test_long_pretoken_path_equals_short_path(small_tok: StackTokenizer) -> None:
    text = stdlib_text(200_000)
    for piece in set(regex.findall(SPLIT_PATTERN, text)):
        data = piece.encode("utf-8")
        assert small_tok._bpe_long(data) == small_tok._bpe_short(list(data))
    for n in (49, 100, 1001):
        data = ("ab" * n).encode() + b"x" * n
        assert small_tok._bpe_long(data) == small_tok._bpe_short(list(data))


def test_one_megabyte_pretoken(small_tok: StackTokenizer) -> None:
    text = "a" * 1_000_000
    ids = small_tok.encode(text)
    assert small_tok.decode(ids) == text
    assert ids == small_tok._bpe_long(text.encode())


def test_decode_replaces_invalid_utf8_but_decode_bytes_is_exact(small_tok: StackTokenizer) -> None:
    ids = small_tok.encode("é")
    assert len(ids) >= 1
    partial = [195]  # first byte of é alone
    assert small_tok.decode(partial) == "\ufffd"
    assert small_tok.decode_bytes(partial) == b"\xc3"


def test_decode_rejects_out_of_range_ids(small_tok: StackTokenizer) -> None:
    with pytest.raises(ValueError, match="out of range: valid ids are 0..2047"):
        small_tok.decode([5, 2048])
    with pytest.raises(ValueError, match="out of range"):
        small_tok.decode([-1])


def test_encode_rejects_bytes(small_tok: StackTokenizer) -> None:
    with pytest.raises(TypeError, match="decode bytes first"):
        small_tok.encode(b"abc")  # type: ignore[arg-type]


# ------------------------------------------------------------ the injection trap
@pytest.mark.parametrize("special", SPECIAL_TOKENS)
def test_untrusted_text_never_yields_a_special(small_tok: StackTokenizer, special: str) -> None:
    text = f"hi {special}x{special}{special} {special[:-1]}"
    ids = small_tok.encode(text)
    assert not set(ids) & set(small_tok.special_to_id.values())
    assert small_tok.decode(ids) == text


@pytest.mark.parametrize("special", SPECIAL_TOKENS)
def test_trusted_text_yields_the_special(small_tok: StackTokenizer, special: str) -> None:
    sid = small_tok.special_token_id(special)
    text = f"a{special}b {special}"
    for kwargs in ({"allowed_special": "all"}, {"parse_special": True}, {"allowed_special": {special}}):
        ids = small_tok.encode(text, **kwargs)
        assert ids.count(sid) == 2
        assert small_tok.decode(ids) == text


def test_allowed_special_subset_leaves_others_as_bytes(small_tok: StackTokenizer) -> None:
    ids = small_tok.encode("<|bos|><|eos|>", allowed_special={"<|bos|>"})
    assert ids[0] == small_tok.bos_id and small_tok.eos_id not in ids


def test_allowed_special_errors_name_the_fix(small_tok: StackTokenizer) -> None:
    with pytest.raises(ValueError, match="not special tokens"):
        small_tok.encode("x", allowed_special={"<|nope|>"})
    with pytest.raises(TypeError, match="allowed_special="):
        small_tok.encode("x", allowed_special="<|bos|>")


def test_special_token_id_error_lists_known(small_tok: StackTokenizer) -> None:
    with pytest.raises(KeyError, match="<\\|bos\\|>"):
        small_tok.special_token_id("<|nope|>")


def test_probe_round_trips(small_tok: StackTokenizer) -> None:
    assert small_tok.decode(small_tok.encode(PROBE)) == PROBE


def test_counting_cuts_long_documents_at_pre_token_boundaries(monkeypatch) -> None:
    """Documents past twice the batch size are cut at LINE_CUT: the counts stay the whole texts'."""
    monkeypatch.setattr(trainer, "_BATCH_BYTES", 2_000)
    docs = [stdlib_text(60_000), "short é text\n  x", stdlib_text(9_000) + "\n\n中文 ok\n" * 50]
    pieces = [p for batch in trainer._batches(docs, cut=True) for p in batch]
    assert len(pieces) > len(docs) and "".join(pieces) == "".join(docs)
    want = Counter(t for d in docs for t in regex.findall(SPLIT_PATTERN, d))
    assert trainer.count_pretokens(iter(docs), SPLIT_PATTERN, workers=1) == want
    assert trainer.count_pretokens(iter(docs), SPLIT_PATTERN, workers=2) == want
    # another pattern is never cut (LINE_CUT is a boundary of the Llama-3 pattern only)
    gpt2 = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"
    want2 = Counter(t for d in docs for t in regex.findall(gpt2, d))
    assert trainer.count_pretokens(iter(docs), gpt2, workers=2) == want2


@pytest.mark.parametrize("how", ["raises", "dies"])
def test_a_failed_counting_process_is_an_error_not_a_hang(monkeypatch, how: str) -> None:
    def broken(pattern, jobs, results):
        if how == "dies":
            os._exit(3)
        results.put(("error", "MemoryError: boom"))

    monkeypatch.setattr(trainer, "_count_worker", broken)
    with pytest.raises(RuntimeError, match="exit code 3" if how == "dies" else "MemoryError: boom"):
        trainer.count_pretokens(iter(["some text\n"] * 50), SPLIT_PATTERN, workers=2)


def test_a_bad_document_stops_the_counting_processes_without_waiting_for_them(monkeypatch) -> None:
    """An error while reading (invalid UTF-8 in the corpus) ends the workers at once: they wait
    for batches no one will send, and joining them first cost 5 s each (10 s on 2 workers)."""
    import multiprocessing

    events: list[str] = []
    ctx = multiprocessing.get_context()

    class Recorded(ctx.Process):  # type: ignore[misc,name-defined]
        def terminate(self) -> None:
            events.append("terminate")
            super().terminate()

        def join(self, timeout: float | None = None) -> None:
            events.append("join")
            super().join(timeout)

    class Context:
        Queue = staticmethod(ctx.Queue)
        Process = Recorded

    monkeypatch.setattr(trainer.multiprocessing, "get_context", lambda: Context())

    def docs():
        yield "some text\n"
        raise ValueError("corpus.txt: invalid UTF-8 at byte 3")

    with pytest.raises(ValueError, match="invalid UTF-8"):
        trainer.count_pretokens(docs(), SPLIT_PATTERN, workers=2)
    assert events[:2] == ["terminate", "join"] and events.count("terminate") >= 2


def test_a_counting_process_that_finishes_early_is_not_a_failure(monkeypatch) -> None:
    """One process ends (exit 0, its counts sent) while the other still works for seconds."""
    real = trainer._count_worker

    def uneven(pattern, jobs, results):
        def slow_get():
            batch = jobs.get()
            if batch is not None and "slow" in batch[0]:
                time.sleep(2.5)  # past the parent's 1 s checks, with the other process gone
            return batch

        class Jobs:
            get = staticmethod(slow_get)

        real(pattern, Jobs(), results)

    monkeypatch.setattr(trainer, "_count_worker", uneven)
    got = trainer.count_pretokens(iter(["slow text here\n"]), SPLIT_PATTERN, workers=2)
    assert got == Counter(regex.findall(SPLIT_PATTERN, "slow text here\n"))


def test_training_pauses_the_garbage_collector_only_while_it_merges() -> None:
    """Paused inside (the merge loop's lists make no cycles), back on after, off if it was off."""
    import gc

    seen: list[bool] = []
    words = {b"low": 5, b"lower": 2, b"newest": 6, b"widest": 3}
    train_merges(dict(words), 5, progress=lambda done, total: seen.append(gc.isenabled()))
    assert seen and not any(seen) and gc.isenabled()
    gc.disable()
    try:
        train_merges(dict(words), 5)
        assert not gc.isenabled()
    finally:
        gc.enable()
