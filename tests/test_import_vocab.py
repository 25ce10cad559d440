"""Acceptance of issue 21: llama.cpp's byte-level BPE vocabularies import and encode as HF does.

For every byte-level BPE ``ggml-vocab-NAME.gguf`` llama.cpp ships, ``import_tokenizer`` must
succeed and the reference must encode every ``.inp`` text to exactly the ids of its ``.out``
line. Those ids are ``AutoTokenizer.encode(text, add_special_tokens=False)``
(convert_hf_to_gguf_update.py; test-tokenizer-0.cpp checks llama.cpp with ``add_special =
false``, ``parse_special = false``): no BOS/EOS, specials not parsed, so ``tok.encode(text)``
with its defaults (user-defined tokens, ``in_text``, still split out, as HF does).

Reads llama-cpp-python's sdist (tests/helpers/llama_vocab.py); with none the tests FAIL
saying how to get it. Marked ``llama_vocab``. Out of scope: running llama.cpp itself.
"""

from __future__ import annotations

import time

import pytest

from stacktok_export.importers import import_tokenizer

from .helpers import llama_vocab

BYTE_LEVEL_BPE = (
    "command-r", "deepseek-coder", "deepseek-llm", "falcon", "gpt-2", "llama-bpe", "mpt", "qwen2",
    "qwen35", "refact", "starcoder",
)  # fmt: skip

pytestmark = pytest.mark.llama_vocab


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    return llama_vocab.models_or_fail(tmp_path_factory)


def _mismatches(tok, cases):
    bad = []
    for text, want in cases:
        got = tok.encode(text)
        if got != want:
            bad.append(f"{text[:40]!r}: expected {want[:12]} got {got[:12]}")
    return bad


@pytest.mark.parametrize("name", BYTE_LEVEL_BPE)
def test_vocab_encodes_as_hf(models, name):
    tok = import_tokenizer(models / f"ggml-vocab-{name}.gguf")
    cases = llama_vocab.cases(models, name)
    assert len(cases) >= 40
    bad = _mismatches(tok, cases)
    assert not bad, f"{name}: {len(bad)} of {len(cases)} texts differ:\n" + "\n".join(bad[:8])


def test_llama3_import_time(models):
    """Issue 21's budget: the 128,256-id Llama-3 GGUF imports in at most 10 s."""
    start = time.perf_counter()
    tok = import_tokenizer(models / "ggml-vocab-llama-bpe.gguf")
    seconds = time.perf_counter() - start
    assert tok.vocab_size == 128256 and tok.ignore_merges and tok.add_bos
    assert seconds <= 10, f"importing Llama-3's GGUF took {seconds:.1f} s (budget 10 s)"


def test_cases_framing(models):
    """The framing test-tokenizer-0.cpp reads: empty texts stay, the trailing separator ends it."""
    cases = llama_vocab.cases(models, "gpt-2")
    assert cases[2] == ("", []) and cases[3] == (" ", [220])
    assert llama_vocab.split_inp("a\n__ggml_vocab_test__\n\n__ggml_vocab_test__\n") == ["a", ""]


# qwen2's GGUF export is refused (its normal token "</s>" would become a control token in llama.cpp)
@pytest.mark.parametrize(("name", "fmt"), [("gpt-2", "hf"), ("gpt-2", "gguf"), ("qwen2", "hf")])
def test_export_of_import_reimports_to_same_fingerprint(models, tmp_path, name, fmt):
    """Issue 21's second round trip: import -> export (HF folder, GGUF) -> import is the identity."""
    from stacktok_export.export import render_format

    tok = import_tokenizer(models / f"ggml-vocab-{name}.gguf")
    for rel, data in render_format(tok, fmt, tmp_dir=tmp_path).items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_bytes(data)
    again = import_tokenizer(tmp_path / (f"{tok.name}-hf" if fmt == "hf" else f"{tok.name}.gguf"))
    assert again.format == "stacktok-bpe-v2" and again.fingerprint == tok.fingerprint
