"""Hugging Face export: ``tokenizer.json`` and a transformers tokenizer directory.

The files are written by hand (not by ``save_pretrained``) so the bytes are
deterministic and readable by every version people run:

- ``tokenizer.json``: BPE with ``"left right"`` merge strings (tokenizers
  0.19 through latest; ``[a, b]`` pairs need 0.20+, tokenizers#1297),
  ``ignore_merges`` as the artifact says (v1: false), no dropout/unk/byte-fallback;
  pre-tokenizer ``Sequence[Split(pattern, Isolated) for each pattern, ByteLevel(
  add_prefix_space=false, use_regex=false)]``; ``ByteLevel`` decoder; no normalizer;
  the vocab holds the ordinary ids (and the specials under their own text when they are
  not all on the top ids: :func:`specials_in_vocab`), the specials are added tokens pinned
  at their ids (``special=false`` for those the source matches in ordinary text). Post-processor:
  none when the source adds nothing (v1: nothing adds BOS/EOS behind the template's
  back), else ``TemplateProcessing`` with BOS and/or EOS around each sequence (HF
  Llama-3's form).
- ``tokenizer_config.json``: ``PreTrainedTokenizerFast`` (loads in
  transformers 4.57.x and 5.x; 5.x's own ``TokenizersBackend`` output does not
  load in 4.x, transformers#47553), bos/eos/pad tokens from the artifact's roles,
  ``add_bos_token`` / ``add_eos_token``, the chat template inline (the artifact's
  own; v1: our ChatML; an imported artifact without one gets none), the
  artifact's fingerprint under ``stacktok_fingerprint`` and (imported artifacts) every role by
  id under ``stacktok_roles`` -- transformers has no end-of-turn field.
- ``special_tokens_map.json`` and ``chat_template.jinja`` with the same data.
- ``generation_config.json``: ``eos_token_id = [eos, end of turn]`` (v1: ``<|eos|>``,
  ``<|end|>``) so that vLLM and transformers stop at the end of an assistant turn
  (vllm#4180); without it they stop only at the eos. Copy it into the model checkpoint.

Refused (:class:`~stacktok_export.export.vocab.ExportRefused`): a special whose text is
also an ordinary token's byte-level string (tokenizers would give it that id), add_bos /
add_eos without the role's token, and -- when the specials must sit in the vocab -- a special
that the split leaves whole under ``ignore_merges`` (with ``split_special_tokens`` the model
would return the special's id for its text).

Out of scope: slow (Python) tokenizer classes and ``tokenizer.model`` files.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..split.pretokenize import compile_pattern, isolated_split
from .vocab import (
    ExportRefused,
    chat_template,
    duplicate_strings,
    is_v1,
    ordinary_ids,
    role_token,
    token_chars,
)

if TYPE_CHECKING:
    import tokenizers
    import transformers

    from ..models.bpe.bpe import StackTokenizer

MODEL_MAX_LENGTH = 8192
#: role -> the transformers attribute naming its token (``eot`` has none: it is an extra special)
_ROLE_KEYS = {"bos": "bos_token", "eos": "eos_token", "pad": "pad_token"}
FINGERPRINT_KEY = "stacktok_fingerprint"
#: v2 only: every role by id (HF has no end-of-turn field; generation_config's list loses eot == eos)
ROLES_KEY = "stacktok_roles"


def _dump(obj: Any, *, sort_keys: bool = True) -> str:
    return json.dumps(obj, indent=2, ensure_ascii=False, sort_keys=sort_keys) + "\n"


def added_token(content: str, token_id: int | None = None, *, special: bool = True) -> dict[str, Any]:
    entry: dict[str, Any] = {} if token_id is None else {"id": token_id}
    entry.update(
        content=content, single_word=False, lstrip=False, rstrip=False, normalized=False, special=special
    )
    return entry


def pre_tokenizer_json(patterns: str | Sequence[str]) -> dict[str, Any]:
    """One isolated ``Split`` per pattern, in order, then ``ByteLevel`` without its own regex."""
    splits = [
        {"type": "Split", "pattern": {"Regex": p}, "behavior": "Isolated", "invert": False}
        for p in ((patterns,) if isinstance(patterns, str) else patterns)
    ]
    return {
        "type": "Sequence",
        "pretokenizers": [
            *splits,
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False},
        ],
    }


DECODER_JSON: dict[str, Any] = {
    "type": "ByteLevel",
    "add_prefix_space": True,
    "trim_offsets": True,
    "use_regex": True,
}


def post_processor_json(tok: StackTokenizer) -> dict[str, Any] | None:
    """BOS/EOS around every sequence when the source adds them (HF Llama-3's form), else None."""
    if not (tok.add_bos or tok.add_eos):
        return None
    ends = [role_token(tok, "bos") if tok.add_bos else None, role_token(tok, "eos") if tok.add_eos else None]
    bos, eos = ends
    if (tok.add_bos and bos is None) or (tok.add_eos and eos is None):
        missing = "bos" if tok.add_bos and bos is None else "eos"
        raise ExportRefused("hf", tok, f"add_{missing} is set but no special has the {missing} role")

    def template(type_id: int, seq: str) -> list[dict[str, Any]]:
        wrap = [{"SpecialToken": {"id": s, "type_id": type_id}} for s in ends]
        middle = [{"Sequence": {"id": seq, "type_id": type_id}}]
        return [w for w in wrap[:1] if bos] + middle + [w for w in wrap[1:] if eos]

    named = [s for s in ends if s is not None]
    return {
        "type": "TemplateProcessing",
        "single": template(0, "A"),
        "pair": template(0, "A") + template(1, "B"),
        "special_tokens": {
            s: {"id": s, "ids": [tok.special_to_id[s]], "tokens": [s]} for s in dict.fromkeys(named)
        },
    }


def _specials_checked(tok: StackTokenizer, strings: list[str]) -> None:
    """tokenizers gives an added token the model's id when its text is also a vocab key: refuse."""
    vocab = set(strings)
    clash = sorted(s for s in tok.special_to_id if s in vocab)
    if clash:
        raise ExportRefused(
            "hf",
            tok,
            f"special {clash[0]!r} is also the byte-level string of an ordinary token; tokenizers "
            "would give it that token's id",
        )
    if len(vocab) != len(strings):
        raise ExportRefused("hf", tok, f"token strings occur twice: {duplicate_strings(strings)}")


def specials_in_vocab(tok: StackTokenizer) -> bool:
    """Whether the specials must sit in the BPE vocab to keep their ids.

    tokenizers numbers an added token that is not a vocab key from the vocab's size upwards, so
    specials on the top ids in id order (v1, Llama-3, Qwen2) stay out of the vocab; specials
    anywhere else go in it under their own text, as RoBERTa's ``<s>`` does.
    """
    n_ordinary = tok.vocab_size - len(tok.special_to_id)
    return list(tok.special_to_id.values()) != list(range(n_ordinary, tok.vocab_size))


def _whole_special(tok: StackTokenizer) -> str | None:
    """A special that the split leaves as one pre-token (``ignore_merges`` would find it)."""
    for s in tok.special_to_id:
        pieces = [s]
        for pattern in tok.patterns:
            split_re = compile_pattern(pattern)
            pieces = [p for piece in pieces for p in isolated_split(split_re, piece)]
        if pieces == [s]:
            return s
    return None


def tokenizer_json(tok: StackTokenizer) -> dict[str, Any]:
    chars = token_chars(tok)
    ordinary = ordinary_ids(tok)
    _specials_checked(tok, [chars[i] for i in ordinary])
    in_vocab = specials_in_vocab(tok)
    if in_vocab and tok.ignore_merges and (whole := _whole_special(tok)) is not None:
        raise ExportRefused(
            "hf",
            tok,
            f"special {whole!r} must sit in the vocab (specials are not on the top ids) and is one "
            "pre-token of the split, so ignore_merges would return it for its text with "
            "split_special_tokens",
        )
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [
            added_token(s, i, special=s not in tok.in_text) for s, i in tok.special_to_id.items()
        ],
        "normalizer": None,
        "pre_tokenizer": pre_tokenizer_json(tok.patterns),
        "post_processor": post_processor_json(tok),
        "decoder": DECODER_JSON,
        "model": {
            "type": "BPE",
            "dropout": None,
            "unk_token": None,
            "continuing_subword_prefix": None,
            "end_of_word_suffix": None,
            "fuse_unk": False,
            "byte_fallback": False,
            "ignore_merges": bool(tok.ignore_merges),
            "vocab": {chars[i]: i for i in (range(tok.vocab_size) if in_vocab else ordinary)},
            "merges": [f"{chars[a]} {chars[b]}" for a, b in tok.merges],
        },
    }


def _named(tok: StackTokenizer) -> dict[str, str]:
    """``{"bos_token": "<|bos|>", ...}`` for the roles the artifact has."""
    named = {key: role_token(tok, role) for role, key in _ROLE_KEYS.items()}
    return {key: s for key, s in named.items() if s is not None}


def _extra_specials(tok: StackTokenizer) -> list[str]:
    """Specials that are neither a named role nor matched in ordinary text, in id order."""
    named = set(_named(tok).values())
    return [s for s in tok.special_to_id if s not in named and s not in tok.in_text]


def tokenizer_config(tok: StackTokenizer) -> dict[str, Any]:
    template = chat_template(tok)
    return {
        "add_bos_token": bool(tok.add_bos),
        "add_eos_token": bool(tok.add_eos),
        "added_tokens_decoder": {
            str(i): added_token(s, special=s not in tok.in_text) for s, i in tok.special_to_id.items()
        },
        "additional_special_tokens": _extra_specials(tok),
        **_named(tok),
        **({} if template is None else {"chat_template": template}),
        "clean_up_tokenization_spaces": False,
        "model_max_length": MODEL_MAX_LENGTH,
        "padding_side": "right",
        "split_special_tokens": False,
        "stacktok_artifact": tok.name,
        FINGERPRINT_KEY: tok.fingerprint,
        **({} if is_v1(tok) else {ROLES_KEY: dict(tok.roles)}),
        "tokenizer_class": "PreTrainedTokenizerFast",
    }


def special_tokens_map(tok: StackTokenizer) -> dict[str, Any]:
    out: dict[str, Any] = {"additional_special_tokens": [added_token(s) for s in _extra_specials(tok)]}
    for key, s in _named(tok).items():
        out[key] = added_token(s)
    return out


def generation_config(tok: StackTokenizer) -> dict[str, Any]:
    """End of generation at the eos and at the end-of-turn token (v1: ``<|eos|>``, ``<|end|>``)."""
    roles = tok.roles
    out: dict[str, Any] = {f"{r}_token_id": roles[r] for r in ("bos", "pad") if r in roles}
    stops = list(dict.fromkeys(roles[r] for r in ("eos", "eot") if r in roles))
    if stops:
        out["eos_token_id"] = stops
    return out


def hf_files(tok: StackTokenizer) -> dict[str, bytes]:
    """Every file of the transformers directory, by name, as exact bytes (``ExportRefused``
    when tokenizers cannot express the artifact)."""
    template = chat_template(tok)
    files = {
        "generation_config.json": _dump(generation_config(tok)).encode("utf-8"),
        "tokenizer.json": _dump(tokenizer_json(tok), sort_keys=False).encode("utf-8"),
        "tokenizer_config.json": _dump(tokenizer_config(tok)).encode("utf-8"),
        "special_tokens_map.json": _dump(special_tokens_map(tok)).encode("utf-8"),
    }
    if template is not None:
        files["chat_template.jinja"] = template.encode("utf-8")
    return files


def to_hf_tokenizer(tok: StackTokenizer) -> tokenizers.Tokenizer:
    """The in-memory ``tokenizers.Tokenizer`` (parsed from the exact exported JSON)."""
    from tokenizers import Tokenizer

    return Tokenizer.from_str(json.dumps(tokenizer_json(tok)))


def to_transformers(tok: StackTokenizer) -> transformers.PreTrainedTokenizerFast:
    """A ``PreTrainedTokenizerFast`` built in memory with the exported settings."""
    from transformers import PreTrainedTokenizerFast

    config = tokenizer_config(tok)
    keys = ("bos_token", "eos_token", "pad_token", "chat_template")
    kwargs = {k: config[k] for k in keys if k in config}
    return PreTrainedTokenizerFast(
        tokenizer_object=to_hf_tokenizer(tok),
        additional_special_tokens=config["additional_special_tokens"],
        model_max_length=MODEL_MAX_LENGTH,
        clean_up_tokenization_spaces=False,
        **kwargs,
    )
