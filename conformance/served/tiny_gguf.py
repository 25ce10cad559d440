"""A tiny random-weight llama model GGUF around a tokenizer-only GGUF, for ``llama-server``.

``llama-server`` loads a model, not a vocabulary: :func:`write_model_gguf` reads a
tokenizer-only GGUF (what ``stacktok export`` writes, or llama.cpp's
``models/ggml-vocab-*.gguf``) with gguf-py's ``GGUFReader`` and writes a new GGUF with

- every ``tokenizer.*`` key copied as stored (strings as their raw bytes, arrays with their
  element type), a ``chat_template`` argument replacing ``tokenizer.chat_template``;
- ``general.architecture = llama`` and a two-layer llama: 64 dims, 4 heads, FFN 128
  (the shape of ``tests/tiny_llama.py``), ``token_embd`` with one row per vocabulary entry and
  no ``output.weight`` (llama.cpp ties it to the embedding), 2-D weights f16 and norms f32,
  drawn from ``numpy.random.default_rng(seed)``: the same file for the same input
  (a 128,256-entry vocabulary gives ~16 MB of weights).

The file is written beside ``out`` under a temporary name and renamed into place.

Out of scope: weights that mean anything (the model's outputs are noise; only its tokenizer and
template are under test), architectures other than llama, the ``{arch}.*`` keys of the source
(its hyper-parameters describe another model and are not copied), nested metadata arrays.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

N_EMBD, N_HEAD, N_FF, N_LAYER = 64, 4, 128, 2
CONTEXT = 4096


class TinyModelError(ValueError):
    """The tokenizer GGUF cannot be turned into a model GGUF; the message says why."""


def _field_value(field: Any, gguf: Any) -> tuple[Any, Any, Any]:
    """``(value, type, sub_type)`` of a ``GGUFReader`` field, strings as raw bytes."""
    vtype = gguf.GGUFValueType(field.types[0])
    parts = field.parts
    if vtype == gguf.GGUFValueType.STRING:
        return bytes(parts[field.data[0]]), vtype, None
    if vtype != gguf.GGUFValueType.ARRAY:
        return parts[field.data[0]][0].item(), vtype, None
    sub = gguf.GGUFValueType(field.types[1]) if len(field.types) > 1 else None
    if sub is None or len(field.types) > 2 or sub == gguf.GGUFValueType.ARRAY:
        raise TinyModelError(f"{field.name}: nested arrays are not copied")
    if sub == gguf.GGUFValueType.STRING:
        return [bytes(parts[i]) for i in field.data], vtype, sub
    return [parts[i][0].item() for i in field.data], vtype, sub


def read_tokenizer_keys(tokenizer_gguf: Path) -> dict[str, tuple[Any, Any, Any]]:
    """Every ``tokenizer.*`` key of a GGUF: ``{key: (value, type, sub_type)}`` -- read by
    ``stacktok_export.gguf.kv.read_fields`` (one walk over the file, ~20x faster than
    ``GGUFReader`` on a 128k vocabulary), or by ``GGUFReader`` with strings as raw bytes when a
    value is not UTF-8 text."""
    import gguf

    from stacktok_export.gguf.kv import read_fields

    try:
        fields, _tensors, _digest = read_fields(tokenizer_gguf)
        keys = {}
        for name, (value, kind) in fields.items():
            if name.startswith("tokenizer."):
                main, _, sub = kind.partition("[")
                subtype = gguf.GGUFValueType[sub.rstrip("]")] if sub else None
                keys[name] = (value, gguf.GGUFValueType[main], subtype)
    except (UnicodeDecodeError, KeyError):  # a value that is not text: the raw bytes below
        keys = _raw_tokenizer_keys(tokenizer_gguf)
    except (OSError, ValueError) as exc:
        raise TinyModelError(f"cannot read {tokenizer_gguf} as GGUF: {exc}") from None
    if "tokenizer.ggml.tokens" not in keys:
        raise TinyModelError(f"{tokenizer_gguf} has no tokenizer.ggml.tokens: not a tokenizer GGUF")
    return keys


def _raw_tokenizer_keys(tokenizer_gguf: Path) -> dict[str, tuple[Any, Any, Any]]:
    import gguf

    try:
        reader = gguf.GGUFReader(str(tokenizer_gguf))
    except (OSError, ValueError) as exc:
        raise TinyModelError(f"cannot read {tokenizer_gguf} as GGUF: {exc}") from None
    return {name: _field_value(f, gguf) for name, f in reader.fields.items() if name.startswith("tokenizer.")}


def write_model_gguf(
    tokenizer_gguf: Path, out: Path, *, chat_template: str | None = None, seed: int = 0
) -> Path:
    """Write the tiny model GGUF for ``tokenizer_gguf``'s tokenizer to ``out``; return ``out``.

    ``chat_template`` (when given) becomes ``tokenizer.chat_template``. Raises
    :class:`TinyModelError` when the input is not a tokenizer GGUF.
    """
    import gguf
    import numpy as np

    keys = read_tokenizer_keys(Path(tokenizer_gguf))
    if chat_template is not None:
        keys["tokenizer.chat_template"] = (chat_template.encode("utf-8"), gguf.GGUFValueType.STRING, None)
    rows = len(keys["tokenizer.ggml.tokens"][0])
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    rng = np.random.default_rng(seed)
    w = gguf.GGUFWriter(str(partial), "llama")
    try:
        w.add_name(f"stacktok-tiny-random ({Path(tokenizer_gguf).name})")
        w.add_context_length(CONTEXT)
        w.add_embedding_length(N_EMBD)
        w.add_block_count(N_LAYER)
        w.add_feed_forward_length(N_FF)
        w.add_head_count(N_HEAD)
        w.add_head_count_kv(N_HEAD)
        w.add_rope_dimension_count(N_EMBD // N_HEAD)
        w.add_layer_norm_rms_eps(1e-5)
        w.add_uint32("llama.vocab_size", rows)
        w.add_file_type(gguf.LlamaFileType.MOSTLY_F16)
        for key, (value, vtype, sub) in keys.items():
            w.add_key_value(key, value, vtype, sub)

        def matrix(name: str, *shape: int) -> None:
            w.add_tensor(name, (rng.standard_normal(shape, dtype=np.float32) * 0.02).astype(np.float16))

        def ones(name: str) -> None:
            w.add_tensor(name, np.ones(N_EMBD, dtype=np.float32))

        matrix("token_embd.weight", rows, N_EMBD)
        ones("output_norm.weight")
        for i in range(N_LAYER):
            ones(f"blk.{i}.attn_norm.weight")
            ones(f"blk.{i}.ffn_norm.weight")
            for part in ("q", "k", "v", "output"):
                matrix(f"blk.{i}.attn_{part}.weight", N_EMBD, N_EMBD)
            matrix(f"blk.{i}.ffn_gate.weight", N_FF, N_EMBD)
            matrix(f"blk.{i}.ffn_up.weight", N_FF, N_EMBD)
            matrix(f"blk.{i}.ffn_down.weight", N_EMBD, N_FF)
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()
        os.replace(partial, out)
    finally:
        w.close()
        partial.unlink(missing_ok=True)
    return out
