"""The tiny model the server runs: a random-weight Llama around copies of a tokenizer directory.

A ``LlamaForCausalLM`` of :data:`MODEL_SHAPE` (hidden 64, 2 layers, 4 heads
of 32, intermediate 128, 8,192 positions), vocab 32,768 (or one past the
largest added-token id), ``torch.manual_seed(0)``, ~17 MB of safetensors, so
two builds are byte-identical. ``head_dim`` is 32, not 64 / 4 = 16: vLLM's CPU
attention kernel supports head sizes 32..512 only, and a 16 model starts but
kills the engine on its first forward pass (``Unsupported CPU attention
configuration: head_dim=16``).

Out of scope: running it (:mod:`conformance.served.server`), sampling quality
(the weights are random).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

#: Files copied from the tokenizer directory into the model directory (when present).
TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "chat_template.jinja",
    "special_tokens_map.json",
)
#: The tiny model (see the module docstring for head_dim).
MODEL_SHAPE = {
    "hidden_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 4,
    "head_dim": 32,
    "intermediate_size": 128,
    "max_position_embeddings": 8192,
}
VOCAB = 32768


def _special_ids(tokenizer_dir: Path) -> dict[str, int]:
    """``{content: id}`` of the added tokens: tokenizer.json's, then tokenizer_config.json's on top."""
    ids: dict[str, int] = {}
    tj = json.loads((tokenizer_dir / "tokenizer.json").read_text(encoding="utf-8"))
    for tok in tj.get("added_tokens", []):
        ids[tok["content"]] = int(tok["id"])
    cfg_path = tokenizer_dir / "tokenizer_config.json"
    cfg = json.loads(cfg_path.read_text(encoding="utf-8")) if cfg_path.is_file() else {}
    for k, v in cfg.get("added_tokens_decoder", {}).items():
        ids[v["content"]] = int(k)
    return ids


def _token_id(cfg: Mapping[str, Any], key: str, ids: Mapping[str, int], default: str) -> int | None:
    tok = cfg.get(key, default)
    if isinstance(tok, Mapping):
        tok = tok.get("content")
    return ids.get(tok) if isinstance(tok, str) else None


def build_tiny_model(tokenizer_dir: Path, out: Path) -> Path:
    """Save a random-weight tiny Llama around copies of ``tokenizer_dir``'s files into ``out``.

    bos/eos/pad ids come from the tokenizer (``tokenizer_config.json``'s
    ``bos_token`` / ``eos_token`` / ``pad_token``). ``generation_config.json`` is
    the directory's own when it has one (so the served eos set is what would
    ship), else eos ``[<|eos|>, <|end|>]``. Never writes into ``tokenizer_dir``.
    Returns ``out``.
    """
    tokenizer_dir, out = Path(tokenizer_dir), Path(out)
    src, dst = tokenizer_dir.resolve(), out.resolve()
    if dst == src or src in dst.parents:
        raise ValueError(f"{out} is inside {tokenizer_dir}: the tokenizer directory is never written")
    if not (tokenizer_dir / "tokenizer.json").is_file():
        raise FileNotFoundError(f"{tokenizer_dir} has no tokenizer.json")
    import torch
    from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM

    ids = _special_ids(tokenizer_dir)
    cfg_path = tokenizer_dir / "tokenizer_config.json"
    tcfg = json.loads(cfg_path.read_text(encoding="utf-8")) if cfg_path.is_file() else {}
    bos = _token_id(tcfg, "bos_token", ids, "<|bos|>")
    eos = _token_id(tcfg, "eos_token", ids, "<|eos|>")
    pad = _token_id(tcfg, "pad_token", ids, "<|pad|>")
    end = ids.get("<|end|>")
    vocab = max([VOCAB, *(i + 1 for i in ids.values())])  # an id past 32,767 still gets an embedding row

    out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    config = LlamaConfig(
        **MODEL_SHAPE,
        vocab_size=vocab,
        bos_token_id=bos,
        eos_token_id=eos,
        pad_token_id=pad,
        tie_word_embeddings=False,
    )
    model = LlamaForCausalLM(config).to(torch.float32)
    model.generation_config = GenerationConfig(
        bos_token_id=bos, eos_token_id=[i for i in (eos, end) if i is not None], pad_token_id=pad
    )
    model.save_pretrained(out)
    if not (out / "model.safetensors").is_file():
        raise RuntimeError(f"transformers did not write {out / 'model.safetensors'}")
    for name in TOKENIZER_FILES:
        if (tokenizer_dir / name).is_file():
            shutil.copyfile(tokenizer_dir / name, out / name)
    if (tokenizer_dir / "generation_config.json").is_file():
        shutil.copyfile(tokenizer_dir / "generation_config.json", out / "generation_config.json")
    return out
