"""The v2 reference (any byte-level BPE): the same vocabulary under other id layouts encodes
to the same tokens, v2 artifacts round-trip, and a v1-shaped vocabulary collapses to v1.

The expected ids come from the shipped v1 tokenizer (hand-checked by tests/test_bpe.py) mapped
through the permutation, never from the code under test on the same layout.
"""

from __future__ import annotations

import random

import pytest

from stacktok_export.artifact.artifact import ArtifactError
from stacktok_export.models.bpe.bpe import StackTokenizer, load_tokenizer
from stacktok_export.split.pretokenize import LLAMA3_PATTERN
from tests.helpers.strings import HARD_STRINGS as TRICKY

GPT2_PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""


@pytest.fixture(scope="module")
def v1() -> StackTokenizer:
    return load_tokenizer()


def _texts() -> list[str]:
    rng = random.Random(7)
    letters = "".join(rng.choice("abcdefghijklmnopqrstuvwxyzABCDEFGH") for _ in range(3000))
    mixed = "".join(rng.choice("aбγ中ü1 ,.\n\t") for _ in range(3000))
    return [*TRICKY, letters, mixed, "hello world " * 200, " ".join(TRICKY) * 3]


def _permuted(v1: StackTokenizer, order: list[int], **extra) -> StackTokenizer:
    """v1's vocabulary with old id ``order[new]`` at new id ``new``."""
    old_to_new = {old: new for new, old in enumerate(order)}
    table = v1.id_bytes()
    tokens = [table[old] for old in order]
    merges = [(old_to_new[a], old_to_new[b]) for a, b in v1.merges]
    specials = {s: old_to_new[i] for s, i in v1.special_to_id.items()}
    return StackTokenizer.from_vocab(
        tokens=tokens, merges=merges, specials=specials, patterns=[LLAMA3_PATTERN], **extra
    ), old_to_new


def test_specials_first_and_bytes_shuffled_encode_the_same_tokens(v1: StackTokenizer) -> None:
    n = v1.vocab_size
    specials = sorted(v1.id_to_special)
    rest = [i for i in range(n) if i not in v1.id_to_special]
    bytes_part = rest[:256]
    random.Random(1).shuffle(bytes_part)
    order = specials + bytes_part + rest[256:]  # merge results still grow with rank
    tok, old_to_new = _permuted(v1, order, name="shuffled")
    assert tok.format == "stacktok-bpe-v2"
    assert tok.byte_ids == [old_to_new[b] for b in range(256)]
    for text in _texts():
        assert tok.encode(text) == [old_to_new[i] for i in v1.encode(text)]
        assert tok.decode_bytes(tok.encode(text)) == text.encode("utf-8")
    assert tok.encode("<|bos|>x", allowed_special="all")[0] == old_to_new[v1.bos_id]


def test_merge_results_out_of_rank_order(v1: StackTokenizer) -> None:
    """Result ids that do not grow with the rank (packed rank values) still merge by rank."""
    n = v1.vocab_size
    order = list(range(n))
    top = order[256 : n - 9]
    top.reverse()  # the last merge gets id 256, the first the highest id
    order[256 : n - 9] = top
    tok, old_to_new = _permuted(v1, order)
    assert tok._packed
    for text in _texts():
        assert tok.encode(text) == [old_to_new[i] for i in v1.encode(text)]
    big = " ".join(_texts()) * 20  # past the numpy batch threshold
    assert tok.encode(big) == [old_to_new[i] for i in v1.encode(big)]


def test_v2_artifact_round_trips(v1: StackTokenizer, tmp_path) -> None:
    n = v1.vocab_size
    order = sorted(v1.id_to_special) + [i for i in range(n) if i not in v1.id_to_special]
    tok, _ = _permuted(v1, order, add_bos=True, roles={"bos": 0, "eos": 1}, chat_template="{{ x }}")
    path = tmp_path / "v2.json"
    tok.save(path)
    again = StackTokenizer.load(path)
    assert again.fingerprint == tok.fingerprint
    assert (again.add_bos, again.roles, again.chat_template) == (True, {"bos": 0, "eos": 1}, "{{ x }}")
    assert again.encode(" ".join(TRICKY)) == tok.encode(" ".join(TRICKY))
    tok.save(tmp_path / "v2b.json")
    assert (tmp_path / "v2b.json").read_bytes() == path.read_bytes()


def test_v1_shaped_vocabulary_is_v1(v1: StackTokenizer) -> None:
    tok, _ = _permuted(v1, list(range(v1.vocab_size)), ignore_merges=True)
    assert tok.format == "stacktok-bpe-v1"
    assert tok.fingerprint == v1.fingerprint


def test_ignore_merges_takes_whole_tokens() -> None:
    # bytes + "ab" (merge a b) + "abc" reachable only as a whole word ("bc" never merges)
    tokens = [bytes([i]) for i in range(256)] + [b"ab", b"abc", b"<s>"]
    merges = [(97, 98)]
    with pytest.raises(ArtifactError, match="not a token"):
        StackTokenizer.from_vocab(
            tokens=tokens, merges=[(98, 99)], specials={"<s>": 258}, patterns=["\\S+|\\s+"]
        )
    plain = StackTokenizer.from_vocab(
        tokens=tokens, merges=merges, specials={"<s>": 258}, patterns=["\\S+|\\s+"]
    )
    whole = StackTokenizer.from_vocab(
        tokens=tokens, merges=merges, specials={"<s>": 258}, patterns=["\\S+|\\s+"], ignore_merges=True
    )
    assert plain.encode("abc abcd") == [256, 99, 32, 256, 99, 100]
    assert whole.encode("abc abcd") == [257, 32, 256, 99, 100]


def test_two_isolated_splits_and_text_between_matches() -> None:
    tokens = [bytes([i]) for i in range(256)] + [b"<|e|>"]
    tok = StackTokenizer.from_vocab(
        tokens=tokens, merges=[], specials={"<|e|>": 256}, patterns=[r"\d+", r"[a-z]+"], in_text=["<|e|>"]
    )
    # "\d+" isolates digit runs (keeping the rest), then "[a-z]+" splits each piece again
    assert tok._split("ab12cd!x") == ["ab", "12", "cd", "!", "x"]
    assert tok.encode("a<|e|>b") == [97, 256, 98]  # in_text specials split out of plain text


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda kw: kw.update(tokens=[*kw["tokens"], b"a"]), "both"),
        (lambda kw: kw.update(specials={"<s>": 5}), "not its UTF-8"),
        (lambda kw: kw.update(roles={"boss": 0}), "unknown role"),
        (lambda kw: kw.update(patterns=[]), "patterns"),
        (lambda kw: kw.update(merges=[(97, 256)]), "special token id"),
        (lambda kw: kw.update(merges=[(97, 98)]), "not a token"),
        (lambda kw: kw.update(merges=[(97, 98, 99)]), r"merges\[0\] is \(97, 98, 99\), not a \[left"),
        (lambda kw: kw.update(merges=[None]), r"merges\[0\] is None"),
        (lambda kw: kw.update(merges=[[97, "b"]]), r"merges\[0\] is \[97, 'b'\]"),
        (lambda kw: kw.update(merges=[[97, 300]]), r"not a \[left, right\] pair of ids below 257"),
    ],
)
def test_bad_vocabularies_name_the_field(edit, message: str) -> None:
    kw = {
        "tokens": [bytes([i]) for i in range(256)] + [b"<s>"],
        "merges": [],
        "specials": {"<s>": 256},
        "patterns": ["\\S+|\\s+"],
    }
    edit(kw)
    with pytest.raises(ArtifactError, match=message):
        StackTokenizer.from_vocab(**kw)


def test_missing_bytes_are_dropped_as_hf_bpe_drops_them() -> None:
    """No token for bytes c3 and bf (DeepSeek/StarCoder/Falcon lack some bytes): HF's BPE without
    an unk token drops them and merges across the gap; the reference does the same."""
    import tokenizers

    from stacktok_export.split.bytelevel import to_chars

    tokens = [bytes([i]) for i in range(256) if i not in (0xC3, 0xBF)] + [b"ab", b"<s>"]
    a, b = tokens.index(b"a"), tokens.index(b"b")
    model = tokenizers.models.BPE(
        vocab={to_chars(t): i for i, t in enumerate(tokens[:-1])}, merges=[(to_chars(b"a"), to_chars(b"b"))]
    )
    hf = tokenizers.Tokenizer(model)
    hf.pre_tokenizer = tokenizers.pre_tokenizers.Sequence(
        [
            tokenizers.pre_tokenizers.Split(tokenizers.Regex(r"\S+|\s+"), behavior="isolated"),
            tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    ref = StackTokenizer.from_vocab(
        tokens=tokens, merges=[(a, b)], specials={"<s>": len(tokens) - 1}, patterns=[r"\S+|\s+"]
    )
    assert ref.missing_bytes == b"\xbf\xc3"
    for text in (
        "a\u00ffb xa\u00ff",
        "\u00ff" * 300,
        " ".join(f"a\u00ffb{i}x\u00ff" for i in range(1500)),
        "plain ascii",
        "a\u00ffb" * 40,  # one long pre-token: the hard cuts must not cut at a dropped byte
        "".join(f"a\u00ffb{i}" for i in range(3000)),  # long, with many distinct chunks (numpy batch)
    ):
        assert ref.encode(text) == hf.encode(text).ids
    assert ref.encode("a\u00ffb") == [len(tokens) - 2]
