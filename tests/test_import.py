"""``stacktok import`` (issue 21): each source reader, its refusals, and the round trips.

Round trips: importing our own exports (tokenizer.json folder, GGUF, ``.tiktoken`` with the
Llama-3 split and our 9 specials) gives the shipped artifact's fingerprint, and the CLI writes
a file byte-identical to it. Readers are checked against the real libraries where one exists
(``tokenizers`` for added tokens matched in text, ``tiktoken`` for derived merges, gguf-py's
``GGUFReader`` for the fast header reader). Refusals exit 2 with one line naming the component.

Out of scope: llama.cpp's vocabularies (tests/test_import_vocab.py), exports of an imported
artifact (the exporters' tests).
"""

from __future__ import annotations

import argparse
import base64
import json
import shutil

import numpy as np
import pytest

from conformance.report.entry import run_main
from stacktok_cli import importing
from stacktok_export import load_tokenizer
from stacktok_export.gguf.kv import read_kv
from stacktok_export.gguf.pretypes import PRE_TYPES
from stacktok_export.importers import ImportRefused, import_tokenizer, read_source
from stacktok_export.importers.common import GPT2_PATTERN
from stacktok_export.importers.tiktoken_src import derive_merges, final_pair
from stacktok_export.split.pretokenize import LLAMA3_PATTERN

from .helpers import llama_vocab
from .helpers.paths import GGUF, ROOT, SHIPPED, SHIPPED_HF, TIKTOKEN
from .helpers.strings import HARD_STRINGS

TOKENIZER = ROOT / "tokenizer"


@pytest.fixture(scope="module")
def shipped():
    return load_tokenizer(SHIPPED)


def _cli(argv, capsys):
    p = argparse.ArgumentParser(prog="stacktok import")
    importing.add_arguments(p)
    code = run_main(lambda: importing.main(p.parse_args(argv)), prog="stacktok")
    return code, capsys.readouterr()


def _specials(tok):
    return list(tok.special_to_id.items())


# ------------------------------------------------------------------ round trips
@pytest.mark.parametrize(
    "source", [SHIPPED_HF, SHIPPED_HF / "tokenizer.json", TOKENIZER / GGUF], ids=["hf-dir", "hf-json", "gguf"]
)
def test_own_export_imports_to_our_fingerprint(source, shipped):
    tok = import_tokenizer(source)
    assert tok.format == "stacktok-bpe-v1"
    assert tok.fingerprint == shipped.fingerprint


def test_own_tiktoken_imports_to_our_fingerprint(shipped):
    tok = import_tokenizer(TOKENIZER / TIKTOKEN, pattern=LLAMA3_PATTERN, specials=_specials(shipped))
    assert tok.fingerprint == shipped.fingerprint


def test_cli_writes_the_shipped_artifact(tmp_path, capsys):
    out = tmp_path / "a.json"
    code, cap = _cli([str(TOKENIZER / GGUF), "--out", str(out)], capsys)
    assert code == 0, cap.err
    assert out.read_bytes() == SHIPPED.read_bytes()
    assert "stacktok-bpe-v1, 32,768 ids" in cap.out


def test_cli_tiktoken_specials(tmp_path, capsys, shipped):
    out = tmp_path / "t.json"
    flags = [f"--special={s}={i}" for s, i in shipped.special_to_id.items()]
    code, cap = _cli(
        [str(TOKENIZER / TIKTOKEN), "--out", str(out), "--pattern", LLAMA3_PATTERN, *flags], capsys
    )
    assert code == 0, cap.err
    assert load_tokenizer(out).fingerprint == shipped.fingerprint


# ------------------------------------------------------------------ refusals
def _refused(capsys, argv, *words):
    code, cap = _cli(argv, capsys)
    assert code == 2, cap
    line = cap.err.strip()
    assert "\n" not in line and all(w in line for w in words), line
    return line


def _hf_copy(tmp_path, edit):
    path = tmp_path / "tokenizer.json"
    data = json.loads((SHIPPED_HF / "tokenizer.json").read_text(encoding="utf-8"))
    edit(data)
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("edit", "component"),
    [
        (lambda d: d.update(normalizer={"type": "NFC"}), "normalizer"),
        (lambda d: d["model"].update(type="Unigram"), "model"),
        (lambda d: d.update(pre_tokenizer={"type": "Whitespace"}), "pre_tokenizer"),
        (lambda d: d["pre_tokenizer"]["pretokenizers"][0].update(behavior="Removed"), "pre_tokenizer[0]"),
        (lambda d: d["pre_tokenizer"]["pretokenizers"].reverse(), "ByteLevel before a split"),
        (lambda d: d["pre_tokenizer"]["pretokenizers"][1].update(add_prefix_space=True), "add_prefix_space"),
        (lambda d: d["model"].update(byte_fallback=True), "byte_fallback"),
        (lambda d: d["added_tokens"][0].update(lstrip=True), "added_tokens[0].lstrip"),
    ],
    ids=[
        "normalizer",
        "unigram",
        "whitespace",
        "removed",
        "order",
        "prefix-space",
        "byte-fallback",
        "lstrip",
    ],
)
def test_hf_refusals_name_the_component(tmp_path, capsys, edit, component):
    path = _hf_copy(tmp_path, edit)
    _refused(capsys, [str(path), "--out", str(tmp_path / "a.json")], str(path), component)
    assert not (tmp_path / "a.json").exists()


def _write_gguf(path, *, model="gpt2", pre="gpt-2", merges=(), space_prefix=False):
    import gguf

    w = gguf.GGUFWriter(str(path), "llama")
    w.add_tokenizer_model(model)
    if space_prefix:
        w.add_add_space_prefix(True)
    w.add_tokenizer_pre(pre)
    from stacktok_export.split.bytelevel import to_chars

    tokens = [to_chars(bytes([b])) for b in range(256)] + [to_chars(b"ab"), "<|end|>"]
    w.add_token_list(tokens)
    w.add_token_types([1] * 257 + [3])
    w.add_token_merges(list(merges) or ["a b"])
    w.add_eos_token_id(257)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.close()
    return path


@pytest.mark.parametrize(
    ("model", "pre", "words"),
    [("llama", "default", ["'llama' (SentencePiece)"]), ("bert", "default", ["WordPiece"]),
     ("gpt2", "kimi-k2", ["'kimi-k2'", "--pattern"])],
    ids=["spm", "wordpiece", "unknown-pre"],
)  # fmt: skip
def test_gguf_refusals(tmp_path, capsys, model, pre, words):
    path = _write_gguf(tmp_path / "v.gguf", model=model, pre=pre)
    _refused(capsys, [str(path), "--out", str(tmp_path / "a.json")], str(path), *words)


def test_gguf_space_prefix_refused(tmp_path):
    with pytest.raises(ImportRefused, match="add_space_prefix: true"):
        import_tokenizer(_write_gguf(tmp_path / "v.gguf", space_prefix=True))


def test_gguf_unknown_pre_with_pattern(tmp_path):
    tok = import_tokenizer(_write_gguf(tmp_path / "v.gguf", pre="kimi-k2"), pattern=r"\S+|\s+")
    assert tok.patterns == (r"\S+|\s+",) and tok.encode("abab") == [256, 256]
    assert tok.roles == {"eos": 257} and tok.special_to_id == {"<|end|>": 257}


def test_special_flag_needs_tiktoken(tmp_path, capsys):
    _refused(capsys, [str(SHIPPED_HF), "--out", str(tmp_path / "a.json"), "--special", "<x>=5"], "--special")
    _refused(capsys, [str(TOKENIZER / TIKTOKEN), "--out", str(tmp_path / "a.json")], "--pattern")
    _refused(
        capsys,
        [str(TOKENIZER / TIKTOKEN), "--out", str(tmp_path / "a.json"), "--special", "nope"],
        "TOKEN=ID",
    )


# ------------------------------------------------------------------ readers vs the libraries
def test_gguf_header_reader_equals_gguf_py():
    from gguf import GGUFReader

    reader = GGUFReader(str(TOKENIZER / GGUF))
    kv = read_kv(TOKENIZER / GGUF)
    fields = {k: f for k, f in reader.fields.items() if not k.startswith("GGUF.")}  # gguf-py's own
    assert sorted(kv) == sorted(fields)
    for key, field in fields.items():
        ours, theirs = kv[key], field.contents()
        if isinstance(ours, bytes):
            ours = ours.decode("utf-8")
        elif isinstance(ours, list):
            ours = [x.decode("utf-8") for x in ours]
        elif isinstance(ours, np.ndarray):
            ours = ours.tolist()
        assert ours == theirs, key


def test_hf_in_text_and_bos_follow_tokenizers(tmp_path):
    from tokenizers import Tokenizer

    def edit(d):
        d["added_tokens"].append({"id": 32768, "content": " the", "special": False, "single_word": False,
                                  "lstrip": False, "rstrip": False, "normalized": False})  # fmt: skip
        d["post_processor"] = {
            "type": "TemplateProcessing",
            "single": [
                {"SpecialToken": {"id": "<|bos|>", "type_id": 0}},
                {"Sequence": {"id": "A", "type_id": 0}},
            ],
            "pair": [{"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}}],
            "special_tokens": {"<|bos|>": {"id": "<|bos|>", "ids": [32759], "tokens": ["<|bos|>"]}},
        }

    path = _hf_copy(tmp_path, edit)
    tok, hf = import_tokenizer(path), Tokenizer.from_file(str(path))
    assert tok.format == "stacktok-bpe-v2" and tok.in_text == {" the"}
    assert tok.add_bos and tok.roles["bos"] == 32759 and not tok.add_eos
    texts = [s for s in HARD_STRINGS if "<|" not in s]  # HF matches special=True tokens in any text
    for text in [*texts, "in the theatre, the end", "bathe them"]:
        assert tok.encode(text) == hf.encode(text, add_special_tokens=False).ids, text
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"add_bos_token": False}), encoding="utf-8")
    assert read_source(path)["add_bos"] is False


_BYTE_LEVEL = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
_DIGITS_SPLIT = {
    "type": "Split",
    "pattern": {"Regex": r"\p{N}{1,2}"},
    "behavior": "Isolated",
    "invert": False,
}


@pytest.mark.parametrize(
    "pre",
    [
        _BYTE_LEVEL,
        {
            "type": "Sequence",
            "pretokenizers": [_DIGITS_SPLIT, {"type": "Digits", "individual_digits": True}, _BYTE_LEVEL],
        },
        {"type": "Sequence", "pretokenizers": [{**_DIGITS_SPLIT, "pattern": {"String": "ab"}}, _BYTE_LEVEL]},
    ],
    ids=["bytelevel-regex", "split-digits-bytelevel", "string-split"],
)
def test_hf_pre_tokenizers_follow_tokenizers(tmp_path, pre):
    """Each accepted pre-tokenizer shape splits as the ``tokenizers`` library does."""
    from tokenizers import Tokenizer

    path = _hf_copy(tmp_path, lambda d: d.update(pre_tokenizer=pre))
    tok, hf = import_tokenizer(path), Tokenizer.from_file(str(path))
    assert tok.patterns[-1] == GPT2_PATTERN and len(tok.patterns) == len(pre.get("pretokenizers", [pre]))
    texts = [s for s in HARD_STRINGS if "<|" not in s]
    for text in [*texts, "x = 12345 + 6; ab abab cab", "  two  spaces\n\n"]:
        assert tok.encode(text) == hf.encode(text, add_special_tokens=False).ids, text


def _tiktoken_file(tmp_path, extra):
    ranks = {bytes([b]): b for b in range(256)}
    for t in extra:
        ranks[t] = len(ranks)
    path = tmp_path / "x.tiktoken"
    path.write_bytes(b"".join(base64.b64encode(t) + b" %d\n" % r for t, r in ranks.items()))
    return ranks, path


@pytest.mark.parametrize(
    ("extra", "every_split"),
    [((b"bc", b"ab", b"abc", b"cd", b"abcd", b" a"), False), ((b"bc", b"ab", b"abc", b"xyz", b" a"), True)],
    ids=["self-reachable", "unreachable-token"],
)
def test_tiktoken_merges_match_tiktoken(tmp_path, extra, every_split):
    """Derived merges encode as tiktoken does; every split is a merge once one token is unreachable."""
    import tiktoken

    ranks, path = _tiktoken_file(tmp_path, extra)
    assert final_pair(b"abc", ranks, ranks[b"abc"]) == (b"a", b"bc")
    merges = derive_merges(ranks)
    assert merges[-1] == (32, 97) and ((257, 99) in merges) == every_split  # ab+c besides a+bc
    tok = import_tokenizer(path, pattern=r" ?\S+|\s+", specials=[("<|eot|>", len(ranks))])
    enc = tiktoken.Encoding("x", pat_str=r" ?\S+|\s+", mergeable_ranks=ranks, special_tokens={})
    for text in ["abcd abc ab a bcd", "cdab abab", "xabcdx xyz xyzab", *HARD_STRINGS]:
        assert tok.encode(text) == enc.encode_ordinary(text), text
    assert tok.special_to_id == {"<|eot|>": len(ranks)}


# ------------------------------------------------------------------ minbpe, seed 004
def test_minbpe_model(tmp_path):
    gpt4 = (  # minbpe's GPT4_SPLIT_PATTERN
        r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]++[\r\n]*"""
        r"""|\s*[\r\n]|\s+(?!\S)|\s+"""
    )
    path = tmp_path / "toy.model"
    path.write_text(f"minbpe v1\n{gpt4}\n1\n<|endoftext|> 259\n97 97\n256 97\n98 257\n", encoding="utf-8")
    tok = import_tokenizer(path)
    assert tok.patterns == (gpt4,) and tok.vocab_size == 260
    assert tok.encode("aaab baaa") == [257, 98, 32, 258]
    assert tok.encode("<|endoftext|>", allowed_special="all") == [259]
    basic = tmp_path / "basic.model"
    basic.write_text("minbpe v1\n\n0\n97 32\n", encoding="utf-8")
    assert import_tokenizer(basic).encode("a a a") == [256, 256, 97]  # no split: merges cross spaces
    bad = tmp_path / "bad.model"
    bad.write_text("minbpe v1\n\n1\n<|x|> 300\n", encoding="utf-8")
    with pytest.raises(ImportRefused, match="id 256 has no token"):
        import_tokenizer(bad)


def test_seed004_layout(tmp_path):
    """The seed's own printed example: ``<s>`` is 1 and 从 is ``[236, 195, 150]`` (bytes at 8..263)."""
    specials = ["<pad>", "<s>", "</s>", "<unk>", "<|title|>", "<|author|>", "<|dynasty|>", "<|content|>"]
    path = tmp_path / "seed.json"
    path.write_text(
        json.dumps({"special_tokens": specials, "merges": [[8 + 104, 8 + 105, 264]]}), encoding="utf-8"
    )
    tok = import_tokenizer(path)
    assert tok.roles == {"bos": 1, "eos": 2, "pad": 0} and tok.byte_ids == list(range(8, 264))
    assert tok.encode("从") == [236, 195, 150] and tok.encode("hi") == [264]
    assert tok.encode("<|title|>", allowed_special="all") == [4]
    path.write_text(json.dumps({"special_tokens": specials, "merges": [[112, 113, 300]]}), encoding="utf-8")
    with pytest.raises(ImportRefused, match=r"merges\[0\]: new id 300, expected 264"):
        import_tokenizer(path)


# ------------------------------------------------------------------ tables and helpers
def test_pre_types_compile_and_match_llama3():
    import regex

    for pt in PRE_TYPES.values():
        for p in pt.patterns:
            regex.compile(p)
    assert PRE_TYPES["llama-bpe"].patterns == (LLAMA3_PATTERN,) and PRE_TYPES["llama-bpe"].ignore_merges
    assert PRE_TYPES["smaug-bpe"].patterns == (LLAMA3_PATTERN,) and not PRE_TYPES["smaug-bpe"].ignore_merges
    assert "\u212a" in PRE_TYPES["deepseek-llm"].patterns[1]  # KELVIN SIGN, as in llama.cpp (not "K")


def test_vocab_sdist_missing_is_reported(monkeypatch, tmp_path):
    monkeypatch.setenv("STACKTOK_LLAMA_SDIST", str(tmp_path / "none.tar.gz"))
    assert llama_vocab.sdist() is None
    assert "STACKTOK_LLAMA_SDIST" in llama_vocab.HOW


def test_folder_without_tokenizer_json(tmp_path):
    shutil.copy(SHIPPED_HF / "tokenizer_config.json", tmp_path)
    with pytest.raises(ImportRefused, match="without tokenizer.json"):
        import_tokenizer(tmp_path)
