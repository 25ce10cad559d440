"""Hugging Face export: ``tokenizer.json`` and a transformers tokenizer directory.

The files are written by hand (not by ``save_pretrained``) so the bytes are
deterministic and readable by every version people run:

- ``tokenizer.json``: BPE with ``"left right"`` merge strings (tokenizers
  0.19 through latest; ``[a, b]`` pairs need 0.20+, tokenizers#1297),
  ``ignore_merges`` false, no dropout/unk/byte-fallback; pre-tokenizer
  ``Sequence[Split(pattern, Isolated), ByteLevel(add_prefix_space=false,
  use_regex=false)]``; ``ByteLevel`` decoder; no normalizer; no
  post-processor (nothing adds BOS/EOS behind the template's back); the
  specials as added tokens pinned at their ids.
- ``tokenizer_config.json``: ``PreTrainedTokenizerFast`` (loads in
  transformers 4.57.x and 5.x; 5.x's own ``TokenizersBackend`` output does not
  load in 4.x, transformers#47553), the chat template inline, and the
  artifact's fingerprint under ``stacktok_fingerprint``.
- ``special_tokens_map.json`` and ``chat_template.jinja`` with the same data.
- ``generation_config.json``: ``eos_token_id = [<|eos|>, <|end|>]`` so that
  vLLM and transformers stop at the end of an assistant turn (vllm#4180);
  without it they stop only at ``<|eos|>``. Copy it into the model checkpoint.

Out of scope: slow (Python) tokenizer classes and ``tokenizer.model`` files.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from ..chat import CHAT_TEMPLATE
from .bytelevel import to_chars

if TYPE_CHECKING:
    import tokenizers
    import transformers

    from ..bpe import StackTokenizer

MODEL_MAX_LENGTH = 8192
_NAMED = {"<|bos|>": "bos_token", "<|eos|>": "eos_token", "<|pad|>": "pad_token"}
FINGERPRINT_KEY = "stacktok_fingerprint"


def _dump(obj: Any, *, sort_keys: bool = True) -> str:
    return json.dumps(obj, indent=2, ensure_ascii=False, sort_keys=sort_keys) + "\n"


def added_token(content: str, token_id: int | None = None) -> dict[str, Any]:
    entry: dict[str, Any] = {} if token_id is None else {"id": token_id}
    entry.update(
        content=content, single_word=False, lstrip=False, rstrip=False, normalized=False, special=True
    )
    return entry


def pre_tokenizer_json(pattern: str) -> dict[str, Any]:
    return {
        "type": "Sequence",
        "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": pattern}, "behavior": "Isolated", "invert": False},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False},
        ],
    }


DECODER_JSON: dict[str, Any] = {
    "type": "ByteLevel",
    "add_prefix_space": True,
    "trim_offsets": True,
    "use_regex": True,
}


def tokenizer_json(tok: StackTokenizer) -> dict[str, Any]:
    table = tok.token_bytes()
    strings = [to_chars(b) for b in table]
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [added_token(s, i) for s, i in tok.special_to_id.items()],
        "normalizer": None,
        "pre_tokenizer": pre_tokenizer_json(tok.pattern),
        "post_processor": None,
        "decoder": DECODER_JSON,
        "model": {
            "type": "BPE",
            "dropout": None,
            "unk_token": None,
            "continuing_subword_prefix": None,
            "end_of_word_suffix": None,
            "fuse_unk": False,
            "byte_fallback": False,
            "ignore_merges": False,
            "vocab": {s: i for i, s in enumerate(strings)},
            "merges": [f"{strings[a]} {strings[b]}" for a, b in tok.merges],
        },
    }


def tokenizer_config(tok: StackTokenizer) -> dict[str, Any]:
    named = {key: s for s, key in _NAMED.items()}
    return {
        "add_bos_token": False,
        "add_eos_token": False,
        "added_tokens_decoder": {str(i): added_token(s) for s, i in tok.special_to_id.items()},
        "additional_special_tokens": [s for s in tok.special_to_id if s not in _NAMED],
        **named,
        "chat_template": CHAT_TEMPLATE,
        "clean_up_tokenization_spaces": False,
        "model_max_length": MODEL_MAX_LENGTH,
        "padding_side": "right",
        "split_special_tokens": False,
        "stacktok_artifact": tok.name,
        FINGERPRINT_KEY: tok.fingerprint,
        "tokenizer_class": "PreTrainedTokenizerFast",
    }


def special_tokens_map(tok: StackTokenizer) -> dict[str, Any]:
    out: dict[str, Any] = {
        "additional_special_tokens": [added_token(s) for s in tok.special_to_id if s not in _NAMED]
    }
    for s, key in _NAMED.items():
        out[key] = added_token(s)
    return out


def generation_config(tok: StackTokenizer) -> dict[str, Any]:
    """End of generation at ``<|eos|>`` and at ``<|end|>`` (end of every turn)."""
    ids = tok.special_to_id
    return {
        "bos_token_id": ids["<|bos|>"],
        "eos_token_id": [ids["<|eos|>"], ids["<|end|>"]],
        "pad_token_id": ids["<|pad|>"],
    }


def hf_files(tok: StackTokenizer) -> dict[str, bytes]:
    """Every file of the transformers directory, by name, as exact bytes."""
    return {
        "generation_config.json": _dump(generation_config(tok)).encode("utf-8"),
        "tokenizer.json": _dump(tokenizer_json(tok), sort_keys=False).encode("utf-8"),
        "tokenizer_config.json": _dump(tokenizer_config(tok)).encode("utf-8"),
        "special_tokens_map.json": _dump(special_tokens_map(tok)).encode("utf-8"),
        "chat_template.jinja": CHAT_TEMPLATE.encode("utf-8"),
    }


def to_hf_tokenizer(tok: StackTokenizer) -> tokenizers.Tokenizer:
    """The in-memory ``tokenizers.Tokenizer`` (parsed from the exact exported JSON)."""
    from tokenizers import Tokenizer

    return Tokenizer.from_str(json.dumps(tokenizer_json(tok)))


def to_transformers(tok: StackTokenizer) -> transformers.PreTrainedTokenizerFast:
    """A ``PreTrainedTokenizerFast`` built in memory with the exported settings."""
    from transformers import PreTrainedTokenizerFast

    config = tokenizer_config(tok)
    kwargs = {k: config[k] for k in ("bos_token", "eos_token", "pad_token", "chat_template")}
    return PreTrainedTokenizerFast(
        tokenizer_object=to_hf_tokenizer(tok),
        additional_special_tokens=config["additional_special_tokens"],
        model_max_length=MODEL_MAX_LENGTH,
        clean_up_tokenization_spaces=False,
        **kwargs,
    )
