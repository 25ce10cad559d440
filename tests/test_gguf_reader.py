"""stacktok_export.gguf.kv.read_fields against gguf-py's GGUFReader, file by file.

The gate reads every GGUF through ``read_fields``: a walk of the header that answers ordinary
files itself and hands odd ones to ``GGUFReader``. These tests hold it to the library's answer
(fields, type names, tensor shapes, digest) on the shipped GGUF, a model GGUF with tensors, every
vocabulary GGUF llama.cpp ships, and files the walk must hand over (nested arrays, a duplicate
key, big-endian, truncated) -- and check that ordinary files never reach the library.
"""

from __future__ import annotations

import hashlib
import struct
from pathlib import Path

import numpy as np
import pytest

from stacktok_export.gguf import kv as gguf_kv
from stacktok_export.gguf.kv import read_fields

from .helpers.llama_vocab import models_or_fail
from .helpers.paths import GGUF, SHIPPED_HF

gguf = pytest.importorskip("gguf")  # the gguf extra; tests(latest) installs it

SHIPPED = SHIPPED_HF.parent / GGUF
READER = gguf.GGUFReader  # the library's reader, before any test replaces it


def library(path: Path):
    reader = READER(str(path))
    fields = {}
    for name, field in reader.fields.items():
        kinds = [t.name for t in field.types]
        fields[name] = (field.contents(), kinds[0] + "".join(f"[{k}]" for k in kinds[1:]))
    tensors = {t.name: tuple(int(x) for x in t.shape) for t in reader.tensors}
    digest = None if tensors else hashlib.sha256(Path(path).read_bytes()).hexdigest()
    return fields, tensors, digest


@pytest.fixture
def walk_only(monkeypatch):
    """read_fields with the library unreachable: an ordinary file must not need it."""

    def refuse(*a, **k):
        raise AssertionError("GGUFReader was called for an ordinary file")

    monkeypatch.setattr(gguf, "GGUFReader", refuse)
    return read_fields


def _same(path: Path, ours) -> None:
    fields, tensors, digest = library(path)
    assert list(ours[0]) == list(fields)  # the same keys in the same order, pseudo-fields first
    for key, (value, kind) in fields.items():
        assert ours[0][key][1] == kind, key
        assert ours[0][key][0] == value and type(ours[0][key][0]) is type(value), key
    assert ours[1] == tensors
    assert ours[2] == digest


def test_shipped_gguf_equals_the_library_without_calling_it(walk_only) -> None:
    ours = walk_only(SHIPPED)
    assert ours[0]["tokenizer.ggml.model"] == ("gpt2", "STRING")
    assert ours[0]["GGUF.kv_count"][1] == "UINT64"
    _same(SHIPPED, ours)


def _model_gguf(path: Path, *, alignment: int | None = None) -> Path:
    w = gguf.GGUFWriter(str(path), "llama")
    if alignment:
        w.add_custom_alignment(alignment)
    w.add_uint32("llama.block_count", 1)
    w.add_float32("x.f32", 0.1)
    w.add_bool("x.flag", True)
    w.add_int64("x.i64", -5)
    w.add_array("x.empty", [])
    w.add_array("x.floats", [0.5, 1.5])
    w.add_array("x.strings", ["a", "ü", ""])
    w.add_tensor("token_embd.weight", np.zeros((7, 64), dtype=np.float32))
    w.add_tensor("out.weight", np.ones((3, 64), dtype=np.float16))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


@pytest.mark.parametrize("alignment", [None, 64])
def test_model_gguf_with_tensors_equals_the_library(tmp_path, walk_only, alignment) -> None:
    path = _model_gguf(tmp_path / "m.gguf", alignment=alignment)
    ours = walk_only(path)
    assert ours[1] == {"token_embd.weight": (64, 7), "out.weight": (64, 3)} and ours[2] is None
    _same(path, ours)


def test_odd_files_are_read_the_library_way(tmp_path) -> None:
    # a nested array: gguf-py flattens it; the walk leaves it to the library
    w = gguf.GGUFWriter(str(tmp_path / "n.gguf"), "llama")
    w.add_array("x.nested", [[1, 2], [3]])
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.close()
    _same(tmp_path / "n.gguf", read_fields(tmp_path / "n.gguf"))


def _raises_like_the_library(path: Path) -> None:
    with pytest.raises(Exception) as theirs:
        library(path)
    with pytest.raises(type(theirs.value)):
        read_fields(path)


def test_broken_files_raise_what_the_library_raises(tmp_path) -> None:
    raw = SHIPPED.read_bytes()
    (tmp_path / "cut.gguf").write_bytes(raw[: len(raw) // 2])  # strings run past the end
    _raises_like_the_library(tmp_path / "cut.gguf")
    key = b"tokenizer.ggml.model"
    at = raw.index(struct.pack("<Q", len(key)) + key)
    twice = raw[:16] + struct.pack("<Q", struct.unpack_from("<Q", raw, 16)[0] + 1) + raw[24:]
    entry_end = at + 8 + len(key) + 4 + 8 + len(b"gpt2")
    twice = twice[:entry_end] + raw[at:entry_end] + twice[entry_end:]  # the key again
    (tmp_path / "dup.gguf").write_bytes(twice)
    _raises_like_the_library(tmp_path / "dup.gguf")
    model = _model_gguf(tmp_path / "m.gguf").read_bytes()
    (tmp_path / "short.gguf").write_bytes(model[:-100])  # tensor data past the end
    _raises_like_the_library(tmp_path / "short.gguf")
    (tmp_path / "v1.gguf").write_bytes(raw[:4] + struct.pack("<I", 1) + raw[8:])
    _raises_like_the_library(tmp_path / "v1.gguf")


def test_the_walk_hands_over_what_it_does_not_know(tmp_path, monkeypatch) -> None:
    calls = []
    real = gguf.GGUFReader
    monkeypatch.setattr(gguf, "GGUFReader", lambda p: calls.append(p) or real(p))
    w = gguf.GGUFWriter(str(tmp_path / "n.gguf"), "llama")
    w.add_array("x.nested", [[1], [2]])
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.close()
    read_fields(tmp_path / "n.gguf")
    assert calls == [tmp_path / "n.gguf"]
    assert gguf_kv._TYPE_NAMES == {t.value: t.name for t in gguf.GGUFValueType}  # the names are gguf-py's


@pytest.mark.llama_vocab
def test_every_llama_cpp_vocab_gguf_equals_the_library(tmp_path_factory) -> None:
    models = models_or_fail(tmp_path_factory)
    # the ones under 2 MB (10 of 19: BPE, SentencePiece with scores, WordPiece); the 128k-256k
    # ones have the same field kinds and cost GGUFReader 10-30 s each
    files = sorted(p for p in models.glob("ggml-vocab-*.gguf") if p.stat().st_size < 2_000_000)
    assert len(files) >= 8
    walked = 0
    for path in files:
        ours = read_fields(path)
        _same(path, ours)
        walked += 1
    assert walked == len(files)
