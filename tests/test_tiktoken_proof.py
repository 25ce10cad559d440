"""The static proof that a ``.tiktoken`` file encodes like an imported artifact, against the
real tiktoken (issue 21: it decides whether the packer may use tiktoken on a 128k vocabulary).

- Generated vocabularies over ``a``/``b``/``c`` (tokens built from earlier ones or spelled at
  random, ids shuffled, each token's splits listed in random order, some left out): wherever
  :func:`tiktoken_refusal` proves equality, ``tiktoken.Encoding`` gives the reference's ids on
  random letter strings (one pre-token each, so only the BPE rules are compared). The
  generator also yields refused vocabularies, most of which do differ somewhere.
- Each rule is needed: for each, a vocabulary that breaks it alone, refused with its reason,
  and a text on which tiktoken really differs.
- What the old rules refused and the proof now accepts: overlapping splits (``aa``+``a`` and
  ``a``+``aa``) in any order, and real merge lists whose splits have parts above the result.

Out of scope: the regex engines (the suite's declared divergences) and the exporters' files
(tests/test_export_v2.py).
"""

from __future__ import annotations

import itertools
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stacktok_export import StackTokenizer
from stacktok_export.export.tiktoken_fmt import to_tiktoken
from stacktok_export.export.tiktoken_proof import tiktoken_refusal
from stacktok_export.split.pretokenize import LLAMA3_PATTERN

from .conftest import need

BYTES = [bytes([b]) for b in range(256)]


def _tok(
    extra: list[bytes], merges: list[tuple[bytes, bytes]], *, ignore_merges: bool = True
) -> StackTokenizer:
    """256 byte tokens, then ``extra`` in order, then one special; merges given by spelling."""
    tokens = BYTES + extra + [b"<|eos|>"]
    ids = {t: i for i, t in enumerate(tokens[:-1])}
    return StackTokenizer.from_vocab(
        tokens=tokens,
        merges=[(ids[a], ids[b]) for a, b in merges],
        specials={"<|eos|>": len(tokens) - 1},
        patterns=[LLAMA3_PATTERN],
        ignore_merges=ignore_merges,
        name="generated",
    )


def _random_vocabulary(seed: int) -> tuple[list[bytes], list[tuple[bytes, bytes]]]:
    rnd = random.Random(seed)
    alphabet = [b"a", b"b"] if seed % 2 else [b"a", b"b", b"c"]
    extra: list[bytes] = []
    known = set(alphabet)
    while len(extra) < 12:
        if rnd.random() < 0.7:
            t = rnd.choice([*alphabet, *extra]) + rnd.choice([*alphabet, *extra])
        else:
            t = b"".join(rnd.choice(alphabet) for _ in range(rnd.randint(2, 6)))
        if len(t) <= 6 and t not in known:
            known.add(t)
            extra.append(t)
    if rnd.random() < 0.5:
        rnd.shuffle(extra)  # ids no longer follow construction: parts above their result
    merges = []
    for t in extra:  # merge order = id order (rule 2), splits in random order, some dropped
        splits = [(t[:k], t[k:]) for k in range(1, len(t)) if t[:k] in known and t[k:] in known]
        rnd.shuffle(splits)
        merges += [s for s in splits if rnd.random() < 0.85]
    return extra, merges


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 10**9),
    texts=st.lists(st.text("abc", min_size=1, max_size=12), min_size=40, max_size=80),
)
def test_a_proven_vocabulary_encodes_like_tiktoken(seed, texts):
    need("tiktoken", "hf")
    extra, merges = _random_vocabulary(seed)
    tok = _tok(extra, merges)
    if tiktoken_refusal(tok) is not None:
        return  # counted below: the generator yields proven vocabularies often enough
    enc = to_tiktoken(tok)
    for text in texts:
        assert enc.encode_ordinary(text) == tok.encode(text), (text, extra, merges)


def test_the_generator_yields_both_kinds_and_refusals_are_mostly_real():
    """Not vacuous: a good share of generated vocabularies is proven, and most refused ones do
    differ from tiktoken on some short string (the proof is not refusing at random)."""
    need("tiktoken", "hf")
    strings = ["".join(p) for n in range(1, 9) for p in itertools.product("abc", repeat=n)]
    proven = refused_and_differs = refused = 0
    for seed in range(120):
        tok = _tok(*_random_vocabulary(seed))
        if tiktoken_refusal(tok) is None:
            proven += 1
            continue
        refused += 1
        enc = to_tiktoken(tok)
        refused_and_differs += any(enc.encode_ordinary(s) != tok.encode(s) for s in strings)
    assert proven >= 15 and refused >= 15, (proven, refused)
    assert refused_and_differs >= refused * 0.8, (refused_and_differs, refused)


# ------------------------------------------------------------------ each rule is needed
def _differs(tok: StackTokenizer, *texts: str) -> list[str]:
    """The texts on which the real tiktoken, built from ``tok``'s ranks, gives other ids."""
    need("tiktoken", "hf")
    enc = to_tiktoken(tok)
    return [t for t in texts if enc.encode_ordinary(t) != tok.encode(t)]


def test_merge_order_must_follow_result_ids():
    """``bc`` (id 257) listed before ``ab`` (id 256): the list merges ``bc`` first in ``abc``,
    tiktoken ``ab`` (lower id)."""
    tok = _tok([b"ab", b"bc"], [(b"b", b"c"), (b"a", b"b")])
    assert "merge order is not id order" in tiktoken_refusal(tok)
    assert _differs(tok, "abc")


def test_a_pair_the_list_never_merges_is_refused():
    """GPT-2's kind: ``the`` listed as ``t``+``he`` only, but ``th`` merges first, so the list's
    own run of ``the`` stops at ``[th, e]``; tiktoken merges that pair inside ``athe``."""
    tok = _tok([b"th", b"he", b"the"], [(b"t", b"h"), (b"h", b"e"), (b"t", b"he")])
    reason = tiktoken_refusal(tok)
    assert "without being a merge" in reason and "b'th'+b'e'" in reason
    assert _differs(tok, "athe")


def test_a_pair_listed_elsewhere_is_proven():
    """The same tokens with ``he`` merged first: the list's run of ``the`` is ``[t, he]``, listed,
    so ``th``+``e`` never meet as a pair (the old rule refused every unlisted pair)."""
    tok = _tok([b"he", b"th", b"the"], [(b"h", b"e"), (b"t", b"h"), (b"t", b"he")])
    assert tiktoken_refusal(tok) is None
    strings = ["".join(p) for n in range(1, 8) for p in itertools.product("thea", repeat=n)]
    assert _differs(tok, *strings) == []


def test_an_unreachable_token_needs_ignore_merges():
    """``abcd`` listed as ``ab``+``cd`` while ``bc`` merges first: its own bytes stop at three
    tokens ``[a, bc, d]``, so no pair of two tokens spelling it ever meets. With
    ``ignore_merges`` the reference takes ``abcd`` whole as tiktoken does; without it,
    tiktoken's whole-pre-token shortcut differs."""
    extra = [b"bc", b"ab", b"cd", b"abcd"]
    merges = [(b"b", b"c"), (b"a", b"b"), (b"c", b"d"), (b"ab", b"cd")]
    tok = _tok(extra, merges)
    assert tiktoken_refusal(tok) is None
    strings = ["".join(p) for n in range(1, 8) for p in itertools.product("abcd", repeat=n)]
    assert _differs(tok, *strings) == []
    plain = _tok(extra, merges, ignore_merges=False)
    assert "does not use ignore_merges" in tiktoken_refusal(plain)
    assert _differs(plain, "abcd", "xabcd") == ["abcd"]


# ------------------------------------------------------------------ what the old rules refused
@pytest.mark.parametrize("order", ["left first", "right first"])
def test_overlapping_splits_in_either_order_are_proven(order):
    """``aaa`` from ``a``+``aa`` and ``aa``+``a``; ``aba`` from ``ab``+``a`` and ``a``+``ba``:
    a state ``[aa, a, aa]`` or ``[ab, a, ba]`` never occurs, so the order is free."""
    splits = [[(b"aa", b"a"), (b"a", b"aa")], [(b"ab", b"a"), (b"a", b"ba")]]
    if order == "right first":
        splits = [s[::-1] for s in splits]
    tok = _tok(
        [b"aa", b"aaa", b"ab", b"ba", b"aba"],
        [(b"a", b"a"), *splits[0], (b"a", b"b"), (b"b", b"a"), *splits[1]],
    )
    assert tiktoken_refusal(tok) is None
    strings = ["".join(p) for n in range(1, 13) for p in itertools.product("ab", repeat=n)]
    assert _differs(tok, *strings, "a" * 41) == []


def test_a_byte_without_a_token_is_refused_before_any_merging():
    """No token for byte 0xc3 (DeepSeek/StarCoder/Falcon lack some): tiktoken fails on it, the
    reference drops it. Merging ``\\xc3a`` by the list would stop at ``[-1 - 0xc3, a]``, two
    parts that are not a pair of tokens: the reason must name the byte, not a made-up pair. A
    byte no UTF-8 text holds (0xc0, as MPT lacks it) is no obstacle, nor a token holding it."""
    for byte, reason in [(0xC3, "bytes [195] occur in UTF-8 text but have no token"), (0xC0, None)]:
        tokens = [bytes([b]) for b in range(256) if b != byte] + [bytes([byte]) + b"a", b"<|eos|>"]
        tok = StackTokenizer.from_vocab(
            tokens=tokens, merges=[], specials={"<|eos|>": 256}, patterns=[LLAMA3_PATTERN], name="gap"
        )
        assert tok.missing_bytes == bytes([byte])
        got = tiktoken_refusal(tok)
        assert got == reason if reason is None else got.startswith(reason), (byte, got)
