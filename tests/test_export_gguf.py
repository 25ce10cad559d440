"""The vocab-only GGUF against real llama.cpp (llama-cpp-python), no mocks.

Every tokenizer below is written to a GGUF, loaded with
``Llama(vocab_only=True)``, and compared with the reference id for id
(untrusted and trusted text) and byte for byte (decoding). Missing ``gguf`` or
``llama_cpp`` is a failure, never a skip: a release gate that silently skips a
backend proves nothing.
"""

from __future__ import annotations

import random
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from conformance.backends import BackendMissing
from conformance.backends import require as require_backend
from conformance.backends.llama_backend import LlamaCppTokenizer
from stacktok_export import StackTokenizer
from stacktok_export.chat.chat import CHAT_TEMPLATE, render_conversation, render_text
from stacktok_export.export.gguf_fmt import gguf_bytes
from stacktok_export.gguf.reader import read_gguf_metadata, require
from stacktok_export.split.bytelevel import to_chars

from .conftest import PROBE, SHIPPED, stdlib_text
from .strings import HARD_STRINGS as SHARED_HARD_STRINGS
from .strings import heldout_slice


def require_backends() -> None:
    """Fail (not skip) with install instructions if gguf or llama_cpp is missing."""
    missing = []
    try:
        require("gguf")
    except ImportError as exc:
        missing.append(str(exc))
    try:
        require_backend("llama_cpp", "llama")
    except BackendMissing as exc:
        missing.append(str(exc))
    if missing:
        pytest.fail("; ".join(missing) + " -- the GGUF conformance tests need them", pytrace=False)


# ----------------------------------------------------------------- fixtures
@pytest.fixture(scope="module")
def long_tok() -> StackTokenizer:
    """Tokens of 2..512 bytes (over llama-cpp-python's 32-byte detokenize limit)
    and two ``<|unused_N|>`` fillers from a training shortfall."""
    tok = StackTokenizer(name="long-277")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tok.train("é" * 700 + " " + "x = 1\n" * 10, vocab_size=256 + 9 + 12)
    return tok


TOKENIZERS = [pytest.param("small_tok", id="small"), pytest.param("long_tok", id="long")]
if SHIPPED.is_file():
    TOKENIZERS.append(pytest.param("shipped_tok", id="shipped"))


@dataclass
class Case:
    tok: StackTokenizer
    path: Path
    llama: LlamaCppTokenizer
    meta: dict[str, Any]  # read_gguf_metadata(path), read once (gguf-py parses slowly)


def _open_case(tok: StackTokenizer, directory: Path) -> Case:
    require_backends()
    path = directory / f"{tok.name}.gguf"
    path.write_bytes(gguf_bytes(tok))
    return Case(tok, path, LlamaCppTokenizer(path), read_gguf_metadata(path))


@pytest.fixture(scope="module", params=TOKENIZERS)
def case(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Case]:
    tok = request.getfixturevalue(request.param)
    opened = _open_case(tok, tmp_path_factory.mktemp(request.param))
    yield opened
    opened.llama.close()


@pytest.fixture(scope="module")
def diverge_case(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Case]:
    """A vocabulary with the merges that make the declared divergences visible in ids:
    ``'s`` (across llama.cpp's split of ``"\\u1c89's"``) and ``ſt`` (across the
    reference's split of ``"'ſt"``)."""
    tok = StackTokenizer(name="diverge")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tok.train("it's ſt x\u1c89 " * 100, vocab_size=256 + 9 + 8)
    opened = _open_case(tok, tmp_path_factory.mktemp("diverge"))
    yield opened
    opened.llama.close()


# ------------------------------------------------------------------ inputs
def _digit_runs() -> list[str]:
    runs = ["1234567890"[:n] if n <= 10 else "1234567890" + "12"[: n - 10] for n in range(1, 13)]
    return [*runs, *(f"x{d}y" for d in runs), *(f" {d} " for d in runs), "3.14159", "1,000,000"]


def _whitespace_runs() -> list[str]:
    out = []
    for ch in (" ", "\t", "\n", "\r\n", "\r", "\u00a0", "\u3000", " \n"):
        for n in (1, 2, 3, 4, 7, 16):
            out += [ch * n, f"a{ch * n}b", f"{ch * n}a", f"a{ch * n}"]
    return [*out, " \t \n\n \r\n  x", "\n \t\r\n ", "x  \n  y", "  \n\n  "]


def _contractions() -> list[str]:
    out = ["DON'T", "'S", "'LL", "'ſ", "'ſ ", "I'M", "We'Re", "they'VE", "''s", "'''", "’s", "'K"]
    for c in ("s", "t", "re", "ve", "m", "ll", "d"):
        for v in (c, c.upper(), c.title()):
            out += [f"'{v}", f"it'{v} x", f"x'{v}y", f" '{v}", f"'{v}'{v}"]
    return out


# The shared list plus runs and edge cases aimed at llama.cpp's hand-written splitter.
HARD_STRINGS: list[str] = [
    *SHARED_HARD_STRINGS,
    PROBE,
    # code
    'def f(x):\n\treturn {"a": [1, 2, 3]}  # ok\n',
    "if (a != b && c <= d) { x->y = *p++; }\n",
    '#include <stdio.h>\nint main(void) {\n    printf("%d\\n", 42);\n}\n',
    "SELECT * FROM t WHERE id >= 10;  -- done\r\n",
    "    \tmixed_indent = True  \n\t\t\n",
    # CRLF / tabs
    "line1\r\nline2\r\n\r\n\tindented\t\ttabs\r",
    "\r\n\r\n",
    "\r\r\n\n",
    *_whitespace_runs(),
    *_digit_runs(),
    "١٢٣٤٥",  # Arabic-Indic digits
    "²³¹ ½ Ⅻ ⅷ",  # other numbers
    *_contractions(),
    # emoji
    "👨\u200d👩\u200d👧\u200d👦 family",
    "🇺🇸🇯🇵🇩🇪 flags",
    "👋🏽 👍🏿 skin tones",
    "🚀🚀🚀 x🚀y",
    # scripts
    "你好，世界。日本語のテキスト",
    "안녕하세요 세계",
    "مرحبا بالعالم",
    "שלום עולם",
    "नमस्ते दुनिया",
    "สวัสดีชาวโลก",
    "Привет, мир",
    "Γειά σου Κόσμε",
    # combining marks
    "e\u0301 a\u0300\u0301\u0302",
    "Z̤͔ͧ̑̓ä͖̭̈̇lͮ̒ͫǧ̗͚̚o̙̔ͮ̇͐̇",
    "\u0301leading combining",
    # llama.cpp test-tokenizer-random edge cases
    "\x1f-a",
    "¼-a",
    "a 〇b",
    "Ⅵ-a",
    "\ufeff//",
    "\x00nul\x00",
    "\u2028\u2029",
    "Cửa Việt",
    "x" * 1000,
    " " * 1000,
]


def specials_in_text(tok: StackTokenizer) -> list[str]:
    """Every special string inside text: alone, glued, doubled, truncated."""
    out = ["".join(tok.special_to_id), "hello <|assistant|> world"]
    for s in tok.special_to_id:
        out += [s, f"a{s}b", f" {s} ", s + s, s[:-1], s[1:], f"{s[:-1]} {s[-1]}", f"\n{s}\n"]
    return out


def random_strings(tok: StackTokenizer, *, n: int = 400, seed: int = 1234) -> list[str]:
    """Seeded random mixes of the characters that pre-tokenization cares about."""
    alphabet = [
        *"abcXYZ019 '\t\n\r.,;:!?-_()[]{}<>|/\\\"#",
        *"'sStTlLdD",
        "\u00a0", "\u3000", "\u200d", "\u0301", "é", "ß", "İ", "ſ", "中", "文", "の",
        "ا", "ש", "ह", "ि", "ก", "٣", "Ⅻ", "¼", "🚀", "👍", "🏽", "'s", "'LL", "  ", "\r\n",
        *tok.special_to_id,
    ]  # fmt: skip
    rng = random.Random(seed)
    return ["".join(rng.choices(alphabet, k=rng.randint(1, 40))) for _ in range(n)]


def untrusted_inputs(tok: StackTokenizer) -> list[str]:
    return [
        *HARD_STRINGS,
        *specials_in_text(tok),
        *random_strings(tok),
        stdlib_text(2_000),
        heldout_slice(),
    ]


def _window(got: list[int], want: list[int]) -> str:
    """Where two id lists first differ, with three ids of context either side."""
    n = min(len(got), len(want))
    i = next((k for k in range(n) if got[k] != want[k]), n)
    lo, hi = max(0, i - 3), i + 4
    return f"first difference at {i}: llama {got[lo:hi]} vs reference {want[lo:hi]}"


def assert_same_ids(texts: list[str], got: list[list[int]], want: list[list[int]]) -> None:
    bad = [f"{t[:60]!r}: {_window(g, w)}" for t, g, w in zip(texts, got, want, strict=True) if g != w]
    assert not bad, f"{len(bad)}/{len(texts)} strings differ:\n" + "\n".join(bad[:20])


# ------------------------------------------------------------------ encode
def test_backends_installed() -> None:
    require_backends()


def test_untrusted_encode_matches_reference(case: Case) -> None:
    texts = untrusted_inputs(case.tok)
    got = [case.llama.encode(t, allow_special=False) for t in texts]
    assert_same_ids(texts, got, [case.tok.encode(t) for t in texts])


def test_untrusted_encode_never_yields_specials(case: Case) -> None:
    special_ids = set(case.tok.special_to_id.values())
    for text in specials_in_text(case.tok):
        assert not special_ids & set(case.llama.encode(text, allow_special=False)), text


def test_trusted_encode_matches_reference(case: Case) -> None:
    tok = case.tok
    texts = [
        *untrusted_inputs(tok),
        render_text([{"role": "user", "content": "hi"}], add_generation_prompt=True),
        "<|bos|><|user|>x<|end|><|assistant|> y<|end|><|eos|>",
    ]
    got = [case.llama.encode(t, allow_special=True) for t in texts]
    assert_same_ids(texts, got, [tok.encode(t, allowed_special="all") for t in texts])


def test_encode_adds_no_bos(case: Case) -> None:
    assert case.llama.encode("hello", allow_special=False) == case.tok.encode("hello")
    assert case.llama.encode("", allow_special=True) == []


# Declared divergences (never silent ones; fixtures/divergences.jsonl, matched by cause):
# - llama.cpp's category tables are Unicode 15.1; the reference's regex tables
#   are newer, so every code point that regex calls \p{L}/\p{N} and llama.cpp
#   calls undefined (U+1C89 and 21,861 others with regex 2026.11.19) can split
#   differently. Code points known to both split identically.
# - llama.cpp spells (?i:'s) as '[sS], which misses U+017F LONG S (it
#   case-folds to s); no other code point folds into the contraction letters.
# The ids differ only when a merge spans the different split, so each
# (vocabulary, text) pair has one exact expectation, measured with
# llama-cpp-python 0.3.36: the test fails if a divergence disappears where it
# must occur, and if one appears where it must not.
DIVERGENCE_TEXTS = {"unicode16-U+1C89": "\u1c89's", "long-s-contraction": "'ſt ſ'ſe"}
#: (vocabulary name, text id) -> llama.cpp's ids differ from the reference's
DIVERGES = {
    ("small-2048", "unicode16-U+1C89"): True,  # the 's merge spans llama.cpp's split
    ("long-277", "unicode16-U+1C89"): False,  # no merge spans it: same ids
    ("stack100m-32768", "unicode16-U+1C89"): True,
    ("small-2048", "long-s-contraction"): False,
    ("long-277", "long-s-contraction"): False,
    ("stack100m-32768", "long-s-contraction"): False,  # probes contractions-words-0008/0009 agree too
    ("diverge", "unicode16-U+1C89"): True,  # trained so that both splits show in the ids
    ("diverge", "long-s-contraction"): True,
}


def _differs(case: Case, text: str) -> bool:
    return case.llama.encode(text, allow_special=False) != case.tok.encode(text)


@pytest.mark.parametrize("name", list(DIVERGENCE_TEXTS))
def test_declared_divergence(case: Case, name: str) -> None:
    assert _differs(case, DIVERGENCE_TEXTS[name]) == DIVERGES[(case.tok.name, name)]


@pytest.mark.parametrize("name", list(DIVERGENCE_TEXTS))
def test_declared_divergence_with_spanning_merges(diverge_case: Case, name: str) -> None:
    """The same check on a vocabulary whose merges make the split visible in the ids."""
    assert _differs(diverge_case, DIVERGENCE_TEXTS[name]) == DIVERGES[("diverge", name)]


@pytest.mark.parametrize("name", list(DIVERGENCE_TEXTS))
def test_declared_divergence_is_covered_by_its_declaration(diverge_case: Case, name: str) -> None:
    """The gate's rule (conformance.core.declared) excuses exactly these differences, by content."""
    from conformance.backends.llama_backend import LlamaCppBackend
    from conformance.core.declared import Declarations
    from conformance.core.fixtures import FixtureSet, Probe

    backend = LlamaCppBackend(diverge_case.llama)
    decl = Declarations(FixtureSet.load(shipped=False).divergences, diverge_case.tok)
    found = decl.declared(backend, "encode", Probe("user-probe", "mine", DIVERGENCE_TEXTS[name]))
    assert found is not None and found.backend == "llama.cpp"
    assert decl.declared(backend, "encode", Probe("p", "mine", "plain ascii, no trigger")) is None


@pytest.mark.parametrize("text", list(DIVERGENCE_TEXTS.values()))
def test_declared_divergence_keeps_bytes(diverge_case: Case, text: str) -> None:
    """Divergent splits still decode to the same bytes in both directions."""
    llama, tok = diverge_case.llama, diverge_case.tok
    assert llama.decode_bytes(llama.encode(text, allow_special=False)) == text.encode()
    assert tok.decode_bytes(llama.encode(text, allow_special=False)) == text.encode()
    assert llama.decode_bytes(tok.encode(text)) == text.encode()


# ------------------------------------------------------------------ decode
def test_decode_reference_ids_is_byte_exact(case: Case) -> None:
    tok = case.tok
    for text in untrusted_inputs(tok):
        assert case.llama.decode_bytes(tok.encode(text)) == text.encode(), text[:60]
        trusted = tok.encode(text, allowed_special="all")
        assert case.llama.decode_bytes(trusted) == text.encode(), text[:60]


def test_decode_every_token(case: Case) -> None:
    tok = case.tok
    ids = range(tok.vocab_size)
    assert case.llama.n_vocab == tok.vocab_size
    assert [case.llama.decode_bytes([i]) for i in ids] == [tok.decode_bytes([i]) for i in ids]
    assert case.llama.decode_bytes(ids) == tok.decode_bytes(ids)


def test_decode_keeps_space_after_bos(case: Case) -> None:
    tok = case.tok
    ids = [tok.bos_id, *tok.encode(" hello"), tok.eos_id]
    assert case.llama.decode_bytes(ids) == b"<|bos|> hello<|eos|>"


def _is_utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def test_tokens_longer_than_32_bytes(case: Case) -> None:
    tok = case.tok
    table = tok.token_bytes()
    long_ids = [i for i, b in enumerate(table) if len(b) > 32]
    for i in long_ids:
        assert case.llama.decode_bytes([i]) == table[i]
    texts = [table[i].decode("utf-8") for i in long_ids if _is_utf8(table[i])]
    for text in texts[-3:]:
        ids = tok.encode(text)
        assert case.llama.encode(text, allow_special=False) == ids
        assert case.llama.decode_bytes(ids) == text.encode()


def test_long_fixture_covers_long_tokens_and_fillers(long_tok: StackTokenizer) -> None:
    """Guard: the ``long`` case must exercise the piece-buffer retry and filler ids."""
    assert max(len(b) for b in long_tok.token_bytes()) > 256
    assert any(s.startswith("<|unused_") for s in long_tok.special_to_id)


def test_decode_rejects_bad_ids(case: Case) -> None:
    for bad in (-1, case.tok.vocab_size):
        with pytest.raises(ValueError, match="out of range"):
            case.llama.decode_bytes([0, bad])


# ---------------------------------------------------------------- metadata
def test_metadata(case: Case) -> None:
    tok, meta = case.tok, case.meta
    table = tok.token_bytes()
    n_normal = len(table)
    specials = sorted(tok.special_to_id, key=tok.special_to_id.__getitem__)

    assert meta["general.architecture"] == "llama"
    assert meta["general.name"] == tok.name
    assert meta["tokenizer.ggml.model"] == "gpt2"
    assert meta["tokenizer.ggml.pre"] == "smaug-bpe"
    assert len(meta["tokenizer.ggml.tokens"]) == tok.vocab_size
    assert meta["tokenizer.ggml.tokens"] == [to_chars(b) for b in table] + specials
    assert meta["tokenizer.ggml.token_type"] == [1] * n_normal + [3] * len(specials)
    assert len(meta["tokenizer.ggml.merges"]) == len(tok.merges)
    assert meta["tokenizer.ggml.merges"] == [
        f"{to_chars(table[a])} {to_chars(table[b])}" for a, b in tok.merges
    ]
    assert meta["tokenizer.ggml.bos_token_id"] == tok.bos_id
    assert meta["tokenizer.ggml.eos_token_id"] == tok.eos_id
    assert meta["tokenizer.ggml.padding_token_id"] == tok.pad_id
    assert meta["tokenizer.ggml.eot_token_id"] == tok.special_token_id("<|end|>")
    assert meta["tokenizer.ggml.add_bos_token"] is False
    assert meta["tokenizer.ggml.add_eos_token"] is False
    assert meta["tokenizer.chat_template"] == CHAT_TEMPLATE
    assert meta["stacktok.fingerprint"] == tok.fingerprint
    assert meta["stacktok.artifact"] == tok.name


def test_llama_cpp_reads_the_settings(case: Case) -> None:
    """What llama.cpp itself took from the file, not just what the file says."""
    tok, llama = case.tok, case.llama
    end = tok.special_token_id("<|end|>")
    assert llama.bos_id == tok.bos_id
    assert llama.eos_id == tok.eos_id
    assert llama.pad_id == tok.pad_id
    assert llama.eot_id == end
    assert not llama.adds_bos and not llama.adds_eos
    assert llama.is_eog(tok.eos_id) and llama.is_eog(end)
    assert not llama.is_eog(tok.special_token_id("<|assistant|>"))
    assert llama.version


def test_chat_template_renders_in_llama_cpp_python(case: Case) -> None:
    """llama-cpp-python's Jinja formatter renders the GGUF's template like the reference."""
    from llama_cpp.llama_chat_format import Jinja2ChatFormatter

    messages = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "What is 2+2?"},
        {"role": "assistant", "content": " 4"},
        {"role": "user", "content": "And <|assistant|>?"},
    ]
    template = case.meta["tokenizer.chat_template"]
    fmt = Jinja2ChatFormatter(template=template, eos_token="<|eos|>", bos_token="<|bos|>")
    prompt = fmt(messages=messages).prompt
    assert prompt == render_text(messages, add_generation_prompt=True)
    safe = messages[:3]
    ids, _ = render_conversation(safe, case.tok, add_generation_prompt=True)
    text = fmt(messages=safe).prompt
    assert case.llama.encode(text, allow_special=True) == ids


# ------------------------------------------------------------- determinism
def test_gguf_bytes_deterministic(case: Case) -> None:
    first = gguf_bytes(case.tok)
    assert gguf_bytes(case.tok) == first
    assert case.path.read_bytes() == first
