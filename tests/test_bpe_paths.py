"""Every fast path of the encoder against the textbook definition, over random merge tables.

The textbook rule: find the lowest-rank adjacent pair (leftmost on a tie), merge it, repeat.
Random tables are topological (each merge combines earlier ids), the contract the artifact
loader enforces. Out of scope: speed (see ``benchmarks/bench_encode.py``).
"""

from __future__ import annotations

import random

import pytest
import regex
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from stacktok_export import SPLIT_PATTERN, StackTokenizer, load_tokenizer
from stacktok_export.artifact import vocab
from stacktok_export.models.bpe import batch as bpe_batch
from stacktok_export.models.bpe import bpe as bpe_module
from stacktok_export.models.bpe import model as merging_module
from stacktok_export.models.bpe.batch import batch_bpe

from .conftest import ROOT, SHIPPED, need
from .test_tiktoken_proof import _random_vocabulary, _tok

ALPHABET = "ab \n\u00e9"  # bytes 0x61 0x62 0x20 0x0a 0xc3 0xa9
BYTES = sorted(set(ALPHABET.encode("utf-8")))


def textbook_bpe(data: bytes, merges: list[tuple[int, int]], results: list[int] | None = None) -> list[int]:
    """One merge at a time: the lowest-rank pair present, leftmost occurrence.

    Merge ``i`` makes id ``results[i]`` (``256 + i`` by default); a repeated pair keeps its
    first rank. Bytes are ids 0..255.
    """
    made = results or [256 + i for i in range(len(merges))]
    rank: dict[tuple[int, int], int] = {}
    for i, pair in enumerate(merges):
        rank.setdefault(pair, i)
    ids = list(data)
    while True:
        found = [(rank[p], i) for i, p in enumerate(zip(ids, ids[1:])) if p in rank]
        if not found:
            return ids
        r, i = min(found)
        ids[i : i + 2] = [made[r]]


@st.composite
def merge_tables(draw: st.DrawFn) -> list[tuple[int, int]]:
    """Up to 40 merges; each combines two earlier ids (bytes of ALPHABET or earlier merges)."""
    ids = list(BYTES)
    merges: list[tuple[int, int]] = []
    for _ in range(draw(st.integers(0, 40))):
        pair = (draw(st.sampled_from(ids)), draw(st.sampled_from(ids)))
        if pair not in merges:
            merges.append(pair)
            ids.append(255 + len(merges))
    return merges


def tokenizer(merges: list[tuple[int, int]]) -> StackTokenizer:
    tok = StackTokenizer()
    tok.merges = merges
    tok._index()
    return tok


byte_strings = st.lists(st.sampled_from(BYTES), max_size=300).map(bytes)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(merges=merge_tables(), data=byte_strings, work=st.integers(0, 2000))
def test_every_bpe_path_equals_the_textbook(merges: list[tuple[int, int]], data: bytes, work: int) -> None:
    tok = tokenizer(merges)
    want = textbook_bpe(data, merges)
    assert tok._bpe_short(list(data)) == want
    assert tok._bpe_heap(list(data)) == want
    assert tok._bpe_long(data) == want
    assert tok._bpe_passes(data) == want
    # a small budget hands over to the heap part-way through the str passes
    assert tok._bpe_passes(data, batch_work=work) == want
    assert tok._bpe(data) == want


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(merges=merge_tables(), datas=st.lists(byte_strings.filter(bool), min_size=1, max_size=40))
def test_numpy_batch_equals_the_textbook(merges: list[tuple[int, int]], datas: list[bytes]) -> None:
    """All pre-tokens merge in lock-step, each with its own lowest-rank pair per round."""
    tok = tokenizer(merges)
    got: dict[str, list[int]] = {}
    keys = [f"k{j}" for j in range(len(datas))]
    batch_bpe(keys, datas, tok._batch_ranks(bpe_batch), got)
    assert [got[k] for k in keys] == [textbook_bpe(d, merges) for d in datas]
    tail: dict[str, list[int]] = {}  # the last few pre-tokens finished one by one in Python
    batch_bpe(keys, datas, tok._batch_ranks(bpe_batch), tail, finish=tok._bpe_short)
    assert tail == got


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    merges=merge_tables(),
    datas=st.lists(byte_strings.filter(bool), min_size=70, max_size=160),
    tail=st.sampled_from([0, 24]),
)
def test_numpy_batch_removes_finished_pretokens_exactly(
    merges: list[tuple[int, int]], datas: list[bytes], tail: int
) -> None:
    """Batches large enough that finished pre-tokens and dead slots leave the arrays mid-way
    (``_Batch.compact``), with and without the Python tail."""
    tok = tokenizer(merges)
    got: dict[int, list[int]] = {}
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(bpe_batch, "_COMPACT_FROM", 4)
        mp.setattr(bpe_batch, "TAIL", tail)
        batch_bpe(list(range(len(datas))), datas, tok._batch_ranks(bpe_batch), got, finish=tok._bpe_short)
    assert [got[j] for j in range(len(datas))] == [textbook_bpe(d, merges) for d in datas]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10**9), n=st.integers(1, 120))
def test_numpy_batch_merges_unsafe_ranks_one_at_a_time(seed: int, n: int) -> None:
    """Imported vocabularies: ids shuffled, a token made by several merges (ranks not topological,
    ``vocab.unsafe_ranks``), results packed beside the ranks. Strings of the tokens' letters."""
    extra, merge_spellings = _random_vocabulary(seed)
    tok = _tok(extra, merge_spellings, ignore_merges=False)
    spelling = {t: i for i, t in enumerate(tok.id_bytes()[: 256 + len(extra)])}
    merges = [(spelling[a], spelling[b]) for a, b in merge_spellings]
    results = [spelling[a + b] for a, b in merge_spellings]
    rnd = random.Random(seed)
    datas = [bytes(rnd.choice(b"abc") for _ in range(rnd.randint(1, 14))) for _ in range(n)]
    got: dict[int, list[int]] = {}
    batch_bpe(list(range(n)), datas, tok._batch_ranks(bpe_batch), got, finish=tok._bpe_short)
    assert [got[j] for j in range(n)] == [textbook_bpe(d, merges, results) for d in datas]


def test_the_generated_imports_have_unsafe_ranks() -> None:
    """Not vacuous: the vocabularies above do have ranks the batch must merge one at a time."""
    with_unsafe = 0
    for seed in range(40):
        tok = _tok(*_random_vocabulary(seed), ignore_merges=False)
        with_unsafe += bool(vocab.unsafe_ranks(tok.merges, tok._results, len(tok.id_bytes())))
    assert with_unsafe >= 10, with_unsafe


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(merges=merge_tables(), texts=st.lists(st.text(alphabet=ALPHABET, max_size=400), max_size=4))
def test_encode_with_its_cache_equals_the_textbook(merges: list[tuple[int, int]], texts: list[str]) -> None:
    """Several calls share the pre-token cache (tiny, so it overflows); each result is textbook."""
    tok = tokenizer(merges)
    saved = merging_module._CACHE_MAX
    merging_module._CACHE_MAX = 8
    try:
        for text in texts + texts:
            pieces = regex.findall(SPLIT_PATTERN, text)
            want = [i for piece in pieces for i in textbook_bpe(piece.encode(), merges)]
            assert tok.encode(text) == want
    finally:
        merging_module._CACHE_MAX = saved


#: bytes 0xff (never in UTF-8, the cut marker of HardCuts.split) and 0x00 besides the alphabet's
CUT_BYTES = [*BYTES, 0x00, 0xFF]


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    merges=merge_tables(),
    datas=st.lists(st.lists(st.sampled_from(CUT_BYTES), min_size=49, max_size=400).map(bytes), max_size=6),
    batch=st.sampled_from([1, 1000]),
)
def test_long_pretokens_cut_where_no_merge_joins(
    merges: list[tuple[int, int]], datas: list[bytes], batch: int
) -> None:
    """_bpe_long cuts at pairs inside no merged token; chunks merge alone (numpy batch or one by one)."""
    from stacktok_export.models.bpe import hard_cuts as bpe_long

    tok = tokenizer(merges)
    saved = merging_module._BATCH, bpe_long.WINDOW_BYTES
    merging_module._BATCH = batch  # _bpe_long's chunks (merging.py)
    try:
        for window in (3, 1 << 18):  # cut a few bytes at a time, and all at once
            bpe_long.WINDOW_BYTES = window
            tok._clear_caches()
            for data in datas + datas:  # the second round is served from the chunk cache
                assert tok._bpe_long(data) == textbook_bpe(data, merges)
                assert b"".join(tok._cuts.split(data)) == data
    finally:
        merging_module._BATCH, bpe_long.WINDOW_BYTES = saved


def test_hard_cuts_split_only_between_pairs_no_token_holds() -> None:
    from stacktok_export.models.bpe.hard_cuts import HardCuts

    cuts = HardCuts([b"ab", b"abc"])
    assert cuts.split(b"abcxabc") == [b"abc", b"x", b"abc"]
    assert cuts.split(b"ab\xffab") == [b"ab", b"\xff", b"ab"]  # the marker byte itself: sliced
    assert cuts.split(b"abab") == [b"ab", b"ab"]  # "ba" is in no token
    assert cuts.split(b"a") == [b"a"]
    assert HardCuts([]).split(b"xyz") == [b"x", b"y", b"z"]


def test_long_repetitive_pretoken_takes_the_str_passes() -> None:
    """The 1 MB-pre-token shape, smaller: "a" * n merges by doubling; both long paths agree."""
    merges = [(97, 97), (256, 256), (257, 257), (258, 97)]  # a2, a4, a8, a9
    tok = tokenizer(merges)
    for n in (0, 1, 2, 3, 7, 9, 17, 1001):
        assert tok._bpe_long(b"a" * n) == textbook_bpe(b"a" * n, merges)
    ids = tok._bpe_long(b"a" * 100_003)
    assert ids == tok._bpe_heap(list(b"a" * 100_003))
    assert ids == [258] * 12_500 + [256, 97]


def test_cold_encode_of_the_heldout_equals_tiktoken() -> None:
    """A fresh tokenizer (empty cache) takes the numpy batch and the long paths on 2 MB."""
    tiktoken_fmt = need("stacktok_export.export.tiktoken_fmt", "tiktoken")
    text = (ROOT / "fixtures" / "heldout-2mb.txt").read_text(encoding="utf-8")
    tok = load_tokenizer(SHIPPED)
    assert tok.encode(text) == tiktoken_fmt.to_tiktoken(tok).encode_ordinary(text)
    assert tok._pair_ranks is not None  # the batch path ran


# white space the regex engine and Python disagree on, CR/LF mixes, visible ASCII, letters, digits
LINE_ALPHABET = "ab9'!#\t\n\n\n\r  \x0b\x0c\x1c\x85\u2028\u3000\u00e9"


LINE_BYTES = sorted(set(LINE_ALPHABET.encode("utf-8")))
#: every pair of the alphabet's bytes merges, so a pre-token cut in the wrong place changes the ids
ALL_PAIRS = [(a, b) for a in LINE_BYTES for b in LINE_BYTES]


lines_text = st.lists(st.text(alphabet=LINE_ALPHABET, max_size=12), max_size=25).map("\n".join)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(texts=st.lists(lines_text, min_size=1, max_size=4), hit=st.sampled_from([0.0, 0.5]))
def test_line_cache_equals_the_textbook(texts: list[str], hit: float) -> None:
    """Texts cut into lines, lines cached on their second sighting: ids equal the textbook."""
    tok = tokenizer(ALL_PAIRS)
    saved = bpe_module._LINES_FROM, bpe_module._LINES_HIT
    bpe_module._LINES_FROM, bpe_module._LINES_HIT = 0, hit  # every text takes the line path
    try:
        for text in texts + texts[::-1] + ["".join(texts)]:
            pieces = regex.findall(SPLIT_PATTERN, text)
            assert tok.encode(text) == [i for p in pieces for i in textbook_bpe(p.encode(), ALL_PAIRS)]
    finally:
        bpe_module._LINES_FROM, bpe_module._LINES_HIT = saved
    assert tok._seen_lines


def test_line_cache_serves_repeated_lines(small_tok: StackTokenizer) -> None:
    tok = tokenizer(small_tok.merges)
    text = "".join(f"    x = f({i % 50})\n\tif y:\n" for i in range(4000))
    assert len(text) >= bpe_module._LINES_FROM
    want: list[int] = []
    small_tok._encode_pieces(text, want)
    assert tok.encode(text) == want  # first sighting: lines only remembered
    assert not tok._lines
    assert tok.encode(text) == want  # second: cached
    assert "    x = f(7)" in tok._lines and tok.encode(text) == want


@pytest.mark.parametrize("pattern", [r"\S+|\s+"])
def test_other_patterns_skip_the_line_cache(pattern: str) -> None:
    """The line cuts are proven for the Llama-3 pattern only."""
    tok = StackTokenizer(pattern)
    text = "a\n b\n" * 2000
    assert tok.encode(text) == list(text.encode()) and not tok._seen_lines


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(merges=merge_tables(), datas=st.lists(byte_strings.filter(bool), min_size=1, max_size=40))
def test_whole_token_table_holds_exactly_the_tokens_their_own_bpe_makes(
    merges: list[tuple[int, int]], datas: list[bytes]
) -> None:
    """Random tables hold unreachable tokens and tokens spelled alike: neither may be answered
    from the table, and pre-tokens answered from it encode as the textbook says."""
    tok = tokenizer(merges)
    table = tok.id_bytes()
    reach = tok._self_reachable()
    assert reach == {table[i]: i for i in range(len(table)) if textbook_bpe(table[i], merges) == [i]}
    tok._reach = reach
    keys = [*datas, *table[:300]]  # many, so the numpy batch runs: the table is read there too
    got: dict[bytes, list[int]] = {}
    tok._bpe_keyed(keys, keys, got)
    assert got == {d: textbook_bpe(d, merges) for d in keys}
    assert [tok._bpe(d) for d in datas] == [textbook_bpe(d, merges) for d in datas]


def test_whole_token_table_is_built_once_the_batches_have_merged_a_vocabulary() -> None:
    """Not before (a short job never pays ~0.1 s for it), and then with every shipped token."""
    tok = load_tokenizer(SHIPPED)
    text = (ROOT / "fixtures" / "heldout-2mb.txt").read_text(encoding="utf-8")
    tok.encode(text[:20_000])
    assert tok._reach is None
    tok.encode(text)  # ~37,000 distinct pre-tokens: more than the 32,759 ordinary tokens
    assert tok._reach is not None and len(tok._reach) == 32_759
    tok._clear_caches()
    assert tok.encode(text[:200_000]) == need("stacktok_export.export.tiktoken_fmt", "tiktoken").to_tiktoken(
        tok
    ).encode_ordinary(text[:200_000])


@pytest.mark.parametrize("n", [5, 255, 256, 5000])
def test_numpy_pair_ranks_equal_the_rank_dict(n: int) -> None:
    """Both look-up paths (a binary search below 256 keys, the hash above it, with its crowded
    slots) against the dict, on present pairs, absent pairs and pairs of absent ids."""
    import numpy as np

    tok = load_tokenizer(SHIPPED)
    ranks = tok._batch_ranks(bpe_batch)
    assert len(ranks._rest_keys) > 100  # crowded slots exist: the second path is exercised
    rng = np.random.default_rng(n)
    present = rng.choice(np.array(list(tok._rank), dtype=np.int64), n)
    crowded = ranks._rest_keys[rng.integers(0, len(ranks._rest_keys) - 1, n)]
    absent = rng.integers(0, 1 << 16, n, dtype=np.int64) << 16 | rng.integers(0, 1 << 16, n)
    for keys in (present, crowded, absent, np.concatenate((present, absent))):
        got = ranks.lookup(keys >> 16, keys & 0xFFFF)
        want = [tok._rank.get(k, int(bpe_batch.MISS)) for k in keys.tolist()]
        assert got.tolist() == want


def test_the_garbage_collector_is_paused_only_while_new_ids_merge() -> None:
    """The collector runs again afterwards (also after an error), and stays off if it was off."""
    import gc

    tok = load_tokenizer(SHIPPED)
    data = ("abcdefghij" * 2000).encode()
    assert gc.isenabled()
    assert tok._bpe_long(data) == tok._bpe_heap(list(data))
    assert gc.isenabled()
    tok.encode(" ".join(f"w{i}" for i in range(5000)))  # many new pre-tokens: the cache's pause
    assert gc.isenabled()
    tok._merge_chunks, saved = None, tok._merge_chunks  # the merge step fails mid-way
    with pytest.raises(TypeError):
        tok._bpe_long(b"xyz" * 5000)
    tok._merge_chunks = saved
    assert gc.isenabled()
    gc.disable()
    try:
        tok._bpe_long(data)
        assert not gc.isenabled()
    finally:
        gc.enable()


small_bytes = st.lists(st.sampled_from(b"abcd\xff"), max_size=120).map(bytes)


@settings(max_examples=400, deadline=None)
@given(
    tokens=st.lists(st.lists(st.sampled_from(b"abcd"), max_size=4).map(bytes), max_size=12),
    data=small_bytes,
)
def test_hard_cuts_equal_the_pairwise_rule(tokens: list[bytes], data: bytes) -> None:
    """With or without the marker byte: a cut before every byte whose pair with the previous one
    is inside no token, and nowhere else."""
    from stacktok_export.models.bpe.hard_cuts import HardCuts

    inside = {pair for t in tokens for pair in zip(t, t[1:])}
    want, start = [], 0
    for i in range(1, len(data)):
        if (data[i - 1], data[i]) not in inside:
            want.append(data[start:i])
            start = i
    want.append(data[start:])
    cuts = HardCuts(tokens)
    assert cuts.split(data) == want
    for size in (1, 2, 7, 1 << 18):  # windows: the same chunks, whatever the window
        assert [chunk for part in cuts.windows(data, size=size) for chunk in part] == (want if data else [])


def test_the_textbook_merges_one_occurrence_at_a_time_like_the_libraries() -> None:
    """``ab``+``a`` -> ``aba`` is listed before ``a``+``b`` -> ``ab``: in ``abab`` the first merge
    makes a pair that outranks the second ``ab``. Hugging Face ``tokenizers``, tiktoken and the
    reference all give ``aba``, ``b``; replacing every ``ab`` at once would give ``ab``, ``ab``."""
    need("tokenizers", "hf")
    from tokenizers import Tokenizer, models

    from stacktok_export.models.bpe.textbook import MergeListBPE

    hf = Tokenizer(models.BPE(vocab={"a": 0, "b": 1, "ab": 2, "aba": 3}, merges=[("ab", "a"), ("a", "b")]))
    assert hf.encode("abab").tokens == ["aba", "b"]
    tok = _tok([b"ab", b"aba"], [(b"ab", b"a"), (b"a", b"b")], ignore_merges=False)
    assert tok.encode("abab") == [257, 98]
    textbook = MergeListBPE({97: 97, 98: 98}, [(256, 97, 257), (97, 98, 256)])
    assert textbook(b"abab") == [257, 98]


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10**9))
@example(seed=18067864)  # a merge ranked above the merge that makes its part: not the v1 layout
def test_the_textbook_equals_the_encoder_on_imported_vocabularies(seed: int) -> None:
    """The oracle ``stacktok audit`` and the tiktoken proof use, on generated lists with unsafe ranks."""
    from stacktok_export.models.bpe.textbook import MergeListBPE

    tok = _tok(*_random_vocabulary(seed), ignore_merges=False)
    textbook = MergeListBPE.of(tok)
    rnd = random.Random(seed)
    for _ in range(60):
        data = bytes(rnd.choice(b"abc") for _ in range(rnd.randint(1, 14)))
        assert textbook(data) == tok._bpe_merges(data), data


def test_the_textbook_of_a_tokenizer_keeps_a_byte_without_a_token_apart() -> None:
    """A byte the vocabulary lacks becomes ``-1 - byte`` (never merged; ``stacktok audit``
    reports it so), not ``None``."""
    from stacktok_export.models.bpe.textbook import MergeListBPE

    tokens = [bytes([b]) for b in range(255)] + [b"ab", b"<|eos|>"]  # no 0xff
    tok = StackTokenizer.from_vocab(
        tokens=tokens,
        merges=[(97, 98)],
        specials={"<|eos|>": 256},
        patterns=[SPLIT_PATTERN],
        name="no-ff",
    )
    assert MergeListBPE.of(tok)(b"ab\xffab") == [255, -256, 255]


def test_a_full_cache_starts_over_keeping_what_the_call_reads() -> None:
    """Overflow drops the entries this call does not read and merges only its new keys."""
    from stacktok_export.models.bpe.model import _fill

    merged: list[set] = []

    def merge(new: set, cache: dict) -> None:
        merged.append(set(new))
        cache.update((k, [len(k)]) for k in new)

    saved = merging_module._CACHE_MAX
    merging_module._CACHE_MAX = 4
    try:
        cache: dict = {}
        _fill(cache, ["a", "bb", "a"], merge)
        _fill(cache, ["ccc", "a"], merge)
        assert merged == [{"a", "bb"}, {"ccc"}] and len(cache) == 3
        _fill(cache, ["a", "dddd", "eeeee"], merge)  # 3 + 2 > 4: start over with "a" kept
        assert merged[-1] == {"dddd", "eeeee"}
        assert cache == {"a": [1], "dddd": [4], "eeeee": [5]}
    finally:
        merging_module._CACHE_MAX = saved


def test_a_long_text_encodes_a_window_at_a_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """Windows of a few hundred characters (held-out documents, a base64 line, a letter run
    between them) give the ids of the whole text encoded at once, and the windows are used."""
    import base64

    tok = load_tokenizer(SHIPPED)
    heldout = (ROOT / "fixtures" / "heldout-2mb.txt").read_text(encoding="utf-8")
    rng = random.Random(11)
    text = (
        heldout[:20_000]
        + base64.b64encode(rng.randbytes(6_000)).decode()
        + "".join(rng.choices("abcdefXYZ", k=3_000))
        + heldout[-20_000:]
    )
    whole = tok.encode(text)
    seen: list[int] = []
    window = bpe_module.StackTokenizer._encode_window

    def counted(self: StackTokenizer, part: str, out: list[int]) -> None:
        seen.append(len(part))
        window(self, part, out)

    monkeypatch.setattr(bpe_module, "_WINDOW_CHARS", 300)
    monkeypatch.setattr(bpe_module.StackTokenizer, "_encode_window", counted)
    tok._clear_caches()
    assert tok.encode(text) == whole
    assert len(seen) > 100 and sum(seen) == len(text)
