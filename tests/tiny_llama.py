"""A tiny random-weight Llama written as a model GGUF with gguf-py's writer (tests only).

Two layers, 64 dims, 4 heads, 128 FFN, f32, 32,768 embedding rows by default (16 MB):
enough for llama.cpp to load the weights and generate. Its tokenizer keys are a
*foreign* tokenizer (``llama-bpe`` pre, add-BOS, placeholder tokens, scores), as a
stock converter would leave them for another model -- ``stacktok retokenize`` replaces them.

Out of scope: anything a real model needs to make sense (the weights are noise).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

N_EMBD, N_HEAD, N_FF, N_LAYER = 64, 4, 128, 2


def write_tiny_llama(
    path: Path, *, rows: int = 32768, seed: int = 0, foreign: bool = True, ours=None
) -> Path:
    """Write the model GGUF to ``path`` (``foreign``: with another tokenizer's keys; ``ours``: a
    StackTokenizer whose keys are written as they are, whatever ``rows`` -- for gate tests)."""
    import gguf

    from stacktok_export.export.gguf_fmt import add_tokenizer_metadata

    rng = np.random.default_rng(seed)
    w = gguf.GGUFWriter(path, "llama")
    w.add_name("tiny-random-llama")
    w.add_context_length(256)
    w.add_embedding_length(N_EMBD)
    w.add_block_count(N_LAYER)
    w.add_feed_forward_length(N_FF)
    w.add_head_count(N_HEAD)
    w.add_head_count_kv(N_HEAD)
    w.add_rope_dimension_count(N_EMBD // N_HEAD)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_file_type(gguf.LlamaFileType.ALL_F32)
    if ours is not None:
        add_tokenizer_metadata(w, ours)
    elif foreign:
        w.add_tokenizer_model("gpt2")
        w.add_tokenizer_pre("llama-bpe")
        w.add_token_list([f"t{i}" for i in range(rows)])
        w.add_token_types([1] * rows)
        w.add_token_scores([0.0] * rows)
        w.add_token_merges(["t 0"])
        w.add_bos_token_id(0)
        w.add_add_bos_token(True)

    def tensor(name: str, *shape: int) -> None:
        w.add_tensor(name, rng.standard_normal(shape, dtype=np.float32) * 0.02)

    tensor("token_embd.weight", rows, N_EMBD)
    w.add_tensor("output_norm.weight", np.ones(N_EMBD, dtype=np.float32))
    tensor("output.weight", rows, N_EMBD)
    for i in range(N_LAYER):
        w.add_tensor(f"blk.{i}.attn_norm.weight", np.ones(N_EMBD, dtype=np.float32))
        w.add_tensor(f"blk.{i}.ffn_norm.weight", np.ones(N_EMBD, dtype=np.float32))
        for part in ("q", "k", "v", "output"):
            tensor(f"blk.{i}.attn_{part}.weight", N_EMBD, N_EMBD)
        tensor(f"blk.{i}.ffn_gate.weight", N_FF, N_EMBD)
        tensor(f"blk.{i}.ffn_up.weight", N_FF, N_EMBD)
        tensor(f"blk.{i}.ffn_down.weight", N_EMBD, N_FF)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path
