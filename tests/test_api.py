"""The tiktoken-shaped API of ``StackTokenizer`` (``stacktok_export/models/bpe/bpe.py``), against
tiktoken itself.

Every method is compared with ``tiktoken.Encoding`` built on the same artifact where tiktoken's
semantics are the contract (``disallowed_special`` raising exactly where tiktoken raises, batch
and byte-decoding results, the vocabulary numbers); our one deliberate difference -- ``encode``
defaults to ``disallowed_special=()``, special strings are bytes -- is asserted on its own.

Out of scope: the BPE (``test_bpe.py``), the ``tiktoken_ext`` plugin (``test_tiktoken_plugin.py``).
"""

from __future__ import annotations

import warnings

import pytest

from stacktok_export import SPECIAL_TOKENS, StackTokenizer
from stacktok_export.export.tiktoken_fmt import to_tiktoken

from .conftest import need
from .helpers.strings import HARD_STRINGS

tiktoken = need("tiktoken", "tiktoken")

#: texts holding special strings (whole, several, adjacent, cut short) in every position
SPECIAL_TEXTS = [
    "hi <|eos|>",
    "<|bos|>hello<|eos|>",
    "a<|user|>b<|assistant|>c<|end|>",
    "<|eos|><|eos|> and <|eos",
    "no specials at all",
    "<|tool_call|>{}<|tool_result|>",
]
#: (allowed_special, disallowed_special) pairs, tiktoken's spelling
OPTIONS = [
    (frozenset(), "all"),
    ("all", "all"),
    ({"<|eos|>"}, "all"),
    (frozenset(), {"<|eos|>"}),
    ({"<|eos|>"}, {"<|eos|>"}),  # listed in both: tiktoken still raises
    ({"<|bos|>"}, {"<|user|>", "<|end|>"}),
    ("all", ()),
]


@pytest.fixture(scope="module")
def enc(shipped_tok: StackTokenizer):
    return to_tiktoken(shipped_tok)


def _outcome(encode, text: str, **options) -> list[int] | str:
    """The ids, or ``"raises"`` when encode raised ValueError (the two libraries word it differently)."""
    try:
        return encode(text, **options)
    except ValueError:
        return "raises"


# ------------------------------------------------------------------ encode
@pytest.mark.parametrize("text", SPECIAL_TEXTS)
@pytest.mark.parametrize(("allowed", "disallowed"), OPTIONS, ids=[f"{a}-{d}" for a, d in OPTIONS])
def test_disallowed_special_raises_exactly_where_tiktoken_raises(shipped_tok, enc, text, allowed, disallowed):
    options = {"allowed_special": allowed, "disallowed_special": disallowed}
    assert _outcome(shipped_tok.encode, text, **options) == _outcome(enc.encode, text, **options)


def test_disallowed_error_names_token_position_and_fix(shipped_tok) -> None:
    with pytest.raises(ValueError) as info:
        shipped_tok.encode("say <|user|> then <|eos|>", disallowed_special="all")
    msg = str(info.value)
    assert "'<|user|>'" in msg and "character 4" in msg
    assert "allowed_special={'<|user|>'}" in msg and "disallowed_special=()" in msg
    assert "\n" not in msg


@pytest.mark.parametrize("text", SPECIAL_TEXTS + HARD_STRINGS[:40])
def test_default_encode_is_ordinary_bytes_where_tiktoken_would_raise(shipped_tok, enc, text) -> None:
    ids = shipped_tok.encode(text)
    assert ids == enc.encode_ordinary(text) == enc.encode(text, disallowed_special=())
    assert ids == shipped_tok.encode_ordinary(text)
    assert not set(ids) & set(shipped_tok.special_to_id.values())


@pytest.mark.parametrize("text", SPECIAL_TEXTS)
def test_parse_special_parses_every_special_like_allowed_all(shipped_tok, enc, text) -> None:
    ids = shipped_tok.encode(text, parse_special=True)
    assert ids == shipped_tok.encode(text, allowed_special="all") == enc.encode(text, allowed_special="all")


def test_parse_special_with_a_subset_is_refused(shipped_tok) -> None:
    with pytest.raises(ValueError, match="parse_special=True already parses every special"):
        shipped_tok.encode("x", parse_special=True, allowed_special={"<|bos|>"})
    assert shipped_tok.encode("<|bos|>", parse_special=True, allowed_special="all") == [shipped_tok.bos_id]


def test_add_special_tokens_is_gone_and_names_the_new_keyword(shipped_tok) -> None:
    for value in (True, False):
        with pytest.raises(TypeError, match=r"no longer takes add_special_tokens=.*parse_special=True"):
            shipped_tok.encode("x", add_special_tokens=value)
    with pytest.raises(TypeError, match="unexpected keyword argument 'allowed_specials'"):
        shipped_tok.encode("x", allowed_specials="all")


def test_options_are_keyword_only(shipped_tok) -> None:
    with pytest.raises(TypeError):
        shipped_tok.encode("<|bos|>", "all")  # type: ignore[misc]
    with pytest.raises(TypeError):
        shipped_tok.encode_batch(["x"], 2)  # type: ignore[misc]


def test_option_values_are_checked_and_errors_name_the_fix(shipped_tok) -> None:
    with pytest.raises(TypeError, match=r"disallowed_special=\{'<\|eos\|>'\}"):
        shipped_tok.encode("x", disallowed_special="<|eos|>")
    with pytest.raises(ValueError, match="disallowed_special contains .*not special tokens"):
        shipped_tok.encode("x", disallowed_special={"<|nope|>"})
    with pytest.raises(TypeError, match=r"allowed_special=\{'<\|bos\|>'\}"):
        shipped_tok.encode("x", allowed_special="<|bos|>")


# ------------------------------------------------------------------- batch
def test_batches_equal_tiktoken_and_single_calls(shipped_tok, enc) -> None:
    texts = SPECIAL_TEXTS + HARD_STRINGS
    assert shipped_tok.encode_ordinary_batch(texts) == enc.encode_ordinary_batch(texts)
    assert shipped_tok.encode_batch(texts) == [shipped_tok.encode(t) for t in texts]
    trusted = shipped_tok.encode_batch(texts, num_threads=2, allowed_special="all")
    assert trusted == enc.encode_batch(texts, num_threads=2, allowed_special="all")
    assert shipped_tok.encode_batch([]) == []


def test_a_batch_merges_its_new_pre_tokens_together_and_gives_tiktoken_ids(enc, monkeypatch) -> None:
    """``encode_batch`` on a fresh tokenizer: one text over the line-cache threshold between short
    ones, duplicates, empty texts, specials, groups cut small (``_MANY_CHARS``): tiktoken's ids,
    in order, and each text's ids alone on another fresh tokenizer."""
    from stacktok_export.models.bpe import bpe

    from .conftest import SHIPPED, stdlib_text

    monkeypatch.setattr(bpe, "_MANY_CHARS", 5_000)
    source = stdlib_text(400_000)
    texts = [source[i : i + 3_000] for i in range(0, 120_000, 3_000)]
    texts[7:7] = [source[150_000:], "", texts[3], *SPECIAL_TEXTS, *HARD_STRINGS]  # 250 KB: line cache
    batch = StackTokenizer.load(SHIPPED).encode_batch(texts)
    assert batch == enc.encode_ordinary_batch(texts)
    alone = StackTokenizer.load(SHIPPED)
    assert batch == [alone.encode(t) for t in texts]
    trusted = StackTokenizer.load(SHIPPED).encode_batch(texts, allowed_special="all")
    assert trusted == enc.encode_batch(texts, allowed_special="all")


def test_batch_raises_like_tiktoken_and_checks_its_options(shipped_tok, enc) -> None:
    texts = ["fine", "then <|eos|>"]
    with pytest.raises(ValueError):
        enc.encode_batch(texts)
    with pytest.raises(ValueError, match="'<\\|eos\\|>' at character 5"):
        shipped_tok.encode_batch(texts, disallowed_special="all")
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="num_threads must be a positive int"):
            shipped_tok.encode_batch(texts, num_threads=bad)
    with pytest.raises(TypeError, match="str items, got bytes at index 1"):
        shipped_tok.encode_batch(["a", b"b"])  # type: ignore[list-item]


# ---------------------------------------------------------------- decoding
def test_single_token_bytes_equal_tiktoken_for_every_id(shipped_tok, enc) -> None:
    ids = range(shipped_tok.n_vocab)
    assert [shipped_tok.decode_single_token_bytes(i) for i in ids] == [
        enc.decode_single_token_bytes(i) for i in ids
    ]
    ids = shipped_tok.encode(SPECIAL_TEXTS[2], allowed_special="all")
    assert shipped_tok.decode_tokens_bytes(ids) == enc.decode_tokens_bytes(ids)
    assert b"".join(shipped_tok.decode_tokens_bytes(ids)) == SPECIAL_TEXTS[2].encode()


def test_decoding_an_unknown_id_names_the_range(shipped_tok) -> None:
    with pytest.raises(ValueError, match="out of range: valid ids are 0..32767"):
        shipped_tok.decode_single_token_bytes(shipped_tok.n_vocab)
    with pytest.raises(TypeError, match="must be int"):
        shipped_tok.decode_tokens_bytes([1, "2"])  # type: ignore[list-item]


# -------------------------------------------------------------- properties
def test_vocabulary_numbers_equal_tiktoken(shipped_tok, enc) -> None:
    assert shipped_tok.n_vocab == enc.n_vocab == 32768
    assert shipped_tok.max_token_value == enc.max_token_value == 32767
    assert shipped_tok.special_tokens_set == enc.special_tokens_set == set(SPECIAL_TOKENS)


def test_eot_token_is_the_eos_special(shipped_tok) -> None:
    assert shipped_tok.eot_token == shipped_tok.special_token_id("<|eos|>") == 32760
    assert shipped_tok.decode_single_token_bytes(shipped_tok.eot_token) == b"<|eos|>"


# ------------------------------------------------- sources with in_text specials
@pytest.fixture(scope="module")
def imported(small_tok: StackTokenizer) -> StackTokenizer:
    """``small_tok`` as a v2 import whose ``<|user|>`` is matched in ordinary text and no role is named."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return StackTokenizer.from_vocab(
            tokens=small_tok.id_bytes(),
            merges=small_tok.merges,
            specials=small_tok.special_to_id,
            patterns=small_tok.patterns,
            in_text={"<|user|>"},
            roles={},
        )


def test_in_text_specials_split_always_and_are_never_disallowed(imported) -> None:
    user = imported.special_token_id("<|user|>")
    text = "a<|user|>b<|eos|>"
    assert user in imported.encode(text) and user in imported.encode_ordinary(text)
    assert imported.special_token_id("<|eos|>") not in imported.encode(text)
    assert imported.encode("a<|user|>b", disallowed_special="all") == imported.encode("a<|user|>b")
    with pytest.raises(ValueError, match="'<\\|eos\\|>' at character 10"):
        imported.encode(text, disallowed_special="all")


def test_eot_token_without_an_eos_role_is_a_clear_attribute_error(imported) -> None:
    assert not hasattr(imported, "eot_token")
    with pytest.raises(AttributeError, match="names no end-of-text special.*special_token_id"):
        imported.eot_token  # noqa: B018
