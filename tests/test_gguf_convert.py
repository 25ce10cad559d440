"""Route 2 to a model GGUF: llama.cpp's own ``convert_hf_to_gguf.py`` with our hash registered.

A tiny random-weight ``LlamaForCausalLM`` around the shipped tokenizer files
(:func:`conformance.served.build_tiny_model`) -> the stock converter refuses it (our chkhsh) ->
``python -m stacktok_export.gguf.llama_convert CONVERTER ...`` converts it -> llama-cpp-python loads
the weights, tokenizes every probe like the vocab-only GGUF, stops only at <|eos|>/<|end|> ->
``stacktok retokenize`` completes the metadata and the gate passes.

Needs torch, transformers, sentencepiece (the converter's requirements) and the converter of
the llama.cpp that llama-cpp-python vendors: ``STACKTOK_LLAMA_CONVERTER`` = its
``convert_hf_to_gguf.py`` (``nox -s convert`` unpacks it from the llama-cpp-python sdist).
"""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from stacktok_export import StackTokenizer
from stacktok_export.export.gguf_model import retokenize
from stacktok_export.gguf.llama_convert import CHKHSH, CHKTXT, PRE, chkhsh
from stacktok_export.gguf.reader import read_gguf, read_gguf_fields

from .conftest import SHIPPED, SHIPPED_HF, need
from .helpers import run_gate
from .test_gguf_model import (
    VOCAB_GGUF,
    assert_generation_stops_at_eos_and_end_only,
    assert_tokenizes_probes_like_the_vocab_only_gguf,
)

pytestmark = pytest.mark.convert
ENV = "STACKTOK_LLAMA_CONVERTER"


@pytest.fixture(scope="module")
def converter() -> Path:
    path = os.environ.get(ENV)
    if not path or not Path(path).is_file():
        pytest.fail(f"set {ENV} to llama.cpp's convert_hf_to_gguf.py (nox -s convert does)", pytrace=False)
    for module, how in (("torch", "nox -s convert"), ("sentencepiece", "nox -s convert"), ("gguf", "gguf")):
        need(module, how)
    need("llama_cpp", "llama")
    return Path(path)


@pytest.fixture(scope="module")
def hf_model(tmp_path_factory: pytest.TempPathFactory, converter: Path) -> Path:
    from conformance.served import build_tiny_model

    return build_tiny_model(SHIPPED_HF, tmp_path_factory.mktemp("hf") / "tiny")


def convert(converter: Path, model: Path, out: Path, *, wrapped: bool) -> subprocess.CompletedProcess[str]:
    front = [sys.executable, "-m", "stacktok_export.gguf.llama_convert"] if wrapped else [sys.executable]
    cmd = [*front, str(converter), str(model), "--outfile", str(out), "--outtype", "f32"]
    return subprocess.run(cmd, capture_output=True, text=True, check=False)


@pytest.fixture(scope="module")
def converted(tmp_path_factory: pytest.TempPathFactory, converter: Path, hf_model: Path) -> Path:
    out = tmp_path_factory.mktemp("conv") / "model.gguf"
    res = convert(converter, hf_model, out, wrapped=True)
    assert res.returncode == 0, res.stderr[-2000:]
    return out


def test_our_hash_is_the_converters_hash_of_the_shipped_tokenizer(converter: Path) -> None:
    from transformers import AutoTokenizer

    texts = []
    for source in [converter, *sorted((converter.parent / "conversion").glob("*.py"))]:
        for node in ast.walk(ast.parse(source.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", None) == "chktxt":
                texts.append(node.value.value)
    assert texts == [CHKTXT]
    assert chkhsh(AutoTokenizer.from_pretrained(SHIPPED_HF).encode(CHKTXT)) == CHKHSH


def test_the_stock_converter_refuses_our_tokenizer(converter: Path, hf_model: Path, tmp_path: Path) -> None:
    res = convert(converter, hf_model, tmp_path / "stock.gguf", wrapped=False)
    assert res.returncode != 0 and "BPE pre-tokenizer was not recognized" in res.stderr
    assert CHKHSH in res.stderr
    assert not (tmp_path / "stock.gguf").exists() or not read_gguf(tmp_path / "stock.gguf")[1]


def test_the_wrapped_converter_writes_our_vocabulary(converted: Path) -> None:
    got, tensors = read_gguf(converted)
    want = read_gguf_fields(VOCAB_GGUF)
    assert got["tokenizer.ggml.pre"][0] == PRE
    for key in (
        "tokenizer.ggml.model",
        "tokenizer.ggml.tokens",
        "tokenizer.ggml.token_type",
        "tokenizer.ggml.merges",
    ):
        assert got[key][0] == want[key][0], key
    assert tensors["token_embd.weight"][1] == 32768


def test_the_converted_model_loads_tokenizes_and_stops_like_ours(converted: Path) -> None:
    assert_tokenizes_probes_like_the_vocab_only_gguf(converted)
    assert_generation_stops_at_eos_and_end_only(converted)


def test_retokenized_converter_output_passes_the_gate(
    converted: Path, hf_model: Path, tmp_path: Path
) -> None:
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    for f in hf_model.iterdir():
        if f.suffix in (".json", ".jinja"):
            shutil.copyfile(f, ckpt / f.name)
    retokenize(converted, ckpt / "model.gguf", StackTokenizer.load(SHIPPED))
    assert read_gguf(ckpt / "model.gguf")[1] == read_gguf(converted)[1]  # same tensors
    backends = "reference,tokenizers,llama.cpp,llama.cpp-detokenize"
    res = run_gate(ckpt, backends=backends, process=True)
    assert res.code == 0, res.stdout[-3000:]
