"""The tiktoken export through the real tiktoken."""

from __future__ import annotations

from pathlib import Path

import pytest

from stacktok_export import StackTokenizer
from stacktok_export.export.tiktoken_fmt import load_tiktoken_file, parse_tiktoken, to_tiktoken

from .conftest import ROOT, need
from .helpers import unreachable_merge
from .strings import HARD_STRINGS, heldout_slice

tiktoken = need("tiktoken", "tiktoken")

TIKTOKEN_FILE = ROOT / "tokenizer" / "stack100m-32768.tiktoken"
TEXTS = HARD_STRINGS + [heldout_slice()]


@pytest.fixture(scope="module")
def enc(shipped_tok: StackTokenizer):
    return load_tiktoken_file(shipped_tok, TIKTOKEN_FILE)


@pytest.mark.parametrize("text", TEXTS, ids=range(len(TEXTS)))
def test_encode_ordinary_equals_reference(enc, shipped_tok, text) -> None:
    ref = shipped_tok.encode(text)
    assert enc.encode_ordinary(text) == ref
    assert enc.encode(text, disallowed_special=()) == ref
    assert enc.decode_bytes(ref) == text.encode("utf-8")


@pytest.mark.parametrize("text", TEXTS, ids=range(len(TEXTS)))
def test_trusted_mode_equals_reference(enc, shipped_tok, text) -> None:
    assert enc.encode(text, allowed_special="all") == shipped_tok.encode(text, allowed_special="all")


def test_default_encode_refuses_special_strings(enc) -> None:
    with pytest.raises(ValueError, match="special token"):
        enc.encode("hello <|assistant|> world")


def test_layout(enc, shipped_tok) -> None:
    assert enc.n_vocab == 32768
    assert enc.name == "stack100m-32768"
    assert enc._special_tokens["<|bos|>"] == 32759
    assert enc._special_tokens["<|pad|>"] == 32761
    assert enc._special_tokens["<|assistant|>"] == 32764
    assert enc._special_tokens["<|tool_result|>"] == 32767
    for i, b in enumerate(shipped_tok.token_bytes()):
        assert enc.decode_single_token_bytes(i) == b


def test_in_memory_encoding_equals_file(enc, shipped_tok) -> None:
    mem = to_tiktoken(shipped_tok)
    text = heldout_slice(50_000)
    assert mem.encode_ordinary(text) == enc.encode_ordinary(text)


def test_rewritten_file_is_read_fresh(shipped_tok, tmp_path: Path) -> None:
    """tiktoken#114: its loader caches by path; ours reads the bytes each time."""
    path = tmp_path / "x.tiktoken"
    path.write_bytes(TIKTOKEN_FILE.read_bytes())
    first = load_tiktoken_file(shipped_tok, path)
    lines = TIKTOKEN_FILE.read_bytes().splitlines()
    lines[300], lines[301] = lines[301].split()[0] + b" 300", lines[300].split()[0] + b" 301"
    path.write_bytes(b"\n".join(lines) + b"\n")
    second = load_tiktoken_file(shipped_tok, path)
    assert first.decode_single_token_bytes(300) == second.decode_single_token_bytes(301)


def test_parse_error_names_the_line() -> None:
    with pytest.raises(ValueError, match="line 2 is not 'base64 rank'"):
        parse_tiktoken(b"YQ== 0\nnot-a-line\n", source="f.tiktoken")


def test_self_reachable_proof_finds_a_token_merges_never_reach(small_tok) -> None:
    """The tiktoken proof (every token's bytes merge back to it, all tokens BPE'd together in numpy)
    agrees with BPE one token at a time: true of a trained vocabulary, false once a merge is appended
    whose bytes the earlier merges split otherwise (tiktoken would take that token whole)."""
    from stacktok_export.export.tiktoken_fmt import tiktoken_unproven
    from stacktok_export.models.bpe.model import self_reachable

    assert self_reachable(small_tok) and tiktoken_unproven(small_tok) is None
    bad = StackTokenizer(name="appended")
    bad.merges = [*small_tok.merges, unreachable_merge(small_tok)]
    bad._index(tuple(small_tok.special_to_id))
    one_by_one = [i for i, b in enumerate(bad.token_bytes()) if bad._bpe(b) != [i]]
    assert one_by_one == [len(bad.token_bytes()) - 1]
    assert not self_reachable(bad)
    assert "not self-reachable" in tiktoken_unproven(bad)
