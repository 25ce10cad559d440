"""The GGUF's vocabulary surface: ``tokenizer.ggml.tokens`` / ``token_type`` id by id, and every
``tokenizer.ggml.*`` key one ``stacktok export`` writes, id-valued keys pointing at artifact ids.

A model GGUF (one holding weights) may pad its token list to its embedding rows with
``[PAD{i}]`` (UNUSED); its fix is ``stacktok retokenize`` (:func:`gguf_fix`). ``missing``
rows when the ``gguf`` package is not installed.

Out of scope: merges, pre type and the special ids' roles (``conformance.static.gguf``); GGUF
keys outside ``tokenizer.ggml.*``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any

from conformance.core.layout import gguf_fields, gguf_tensors
from conformance.core.rows import FILES, Row, skip
from conformance.static.surface.common import (
    Diff,
    Expected,
    T,
    guarded,
    is_int,
    shorten,
    show_chars,
    verdict,
)
from stacktok_export.export.gguf_fmt import padding_tokens
from stacktok_export.export.gguf_model import embedding_rows

GGUF_INSTALL = "pip install 'stacktok[gguf]'"
GGUF_PREFIX = "tokenizer.ggml."
TOKEN_TYPE_NAMES = {1: "NORMAL", 2: "UNKNOWN", 3: "CONTROL", 4: "USER_DEFINED", 5: "UNUSED", 6: "BYTE"}
EXPORTED_GGUF_KEYS = frozenset(
    GGUF_PREFIX + k
    for k in (
        "model",
        "pre",
        "tokens",
        "token_type",
        "merges",
        "bos_token_id",
        "eos_token_id",
        "padding_token_id",
        "eot_token_id",
        "add_bos_token",
        "add_eos_token",
    )
)

_EOG = "llama.cpp adds that id to its end-of-generation set: generation stops there"
# What the llama.cpp vendored by llama-cpp-python 0.3.36 does with keys we never write (src/llama-vocab.cpp).
GGUF_KEY_EFFECTS = {
    "eom_token_id": _EOG,
    "fim_pad_token_id": _EOG,
    "fim_rep_token_id": _EOG,
    "fim_sep_token_id": _EOG,
    "fim_pre_token_id": "llama.cpp uses that id for fill-in-the-middle prompts",
    "fim_suf_token_id": "llama.cpp uses that id for fill-in-the-middle prompts",
    "fim_mid_token_id": "llama.cpp uses that id for fill-in-the-middle prompts",
    "prefix_token_id": "llama.cpp uses that id for fill-in-the-middle prompts",
    "suffix_token_id": "llama.cpp uses that id for fill-in-the-middle prompts",
    "middle_token_id": "llama.cpp uses that id for fill-in-the-middle prompts",
    "unknown_token_id": "llama.cpp substitutes that id for pieces missing from the vocabulary",
    "seperator_token_id": "llama.cpp appends that id to every input when add_sep_token is on",
    "sep_token_id": "not a key llama.cpp reads (it spells the separator key seperator_token_id)",
    "cls_token_id": "llama.cpp treats that id as BERT's classification token",
    "mask_token_id": "llama.cpp treats that id as the masked-LM token",
    "add_sep_token": "llama.cpp appends the separator token to every input tokenized with add_special",
    "add_space_prefix": "llama.cpp's detokenizer drops the first token's leading space, "
    "and SentencePiece-type vocabularies prepend a space to every input",
    "remove_extra_whitespaces": "llama.cpp collapses whitespace runs in SentencePiece-type inputs",
    "precompiled_charsmap": "llama.cpp normalizes every input through that map (UGM vocabularies)",
    "normalizer.lowercase": "llama.cpp lowercases every input (WordPiece vocabularies)",
    "normalizer.strip_accents": "llama.cpp strips accents from every input (WordPiece vocabularies)",
    "scores": "llama.cpp reads per-token scores (SentencePiece merge priorities)",
    "token_type_count": "llama.cpp reads a BERT-style segment type count",
    "suppress_tokens": "llama.cpp never samples those ids",
}


def _read_gguf(path: Path) -> dict[str, Any] | str:
    """``{key: value}`` of every GGUF field (the gate's shared read), or why it cannot be read."""
    try:
        return {name: value for name, (value, _) in gguf_fields(path).items()}
    except ImportError:
        raise  # the caller's "missing"
    except Exception as exc:  # gguf-py raises bare ValueError/struct/numpy errors on bad files
        return f"{path.name} is not a readable GGUF ({type(exc).__name__}: {exc})"


def _list_diffs_by_id(
    key: str, got: Any, want: list[T], kind: type, *, show: Callable[[int, T], str], exp: Expected
) -> list[Diff]:
    if not isinstance(got, list) or not all(isinstance(v, kind) and not isinstance(v, bool) for v in got):
        return [Diff(f"{key} is {shorten(got)}, not a list of {kind.__name__}")]
    if got == want:
        return []
    out = []
    if len(got) != len(want):
        out.append(Diff(f"{key} count: file has {len(got)}, artifact has {len(want)}"))
    for token_id in range(max(len(got), len(want))):
        mine = got[token_id] if token_id < len(got) else None
        theirs = want[token_id] if token_id < len(want) else None
        if mine != theirs:
            found = "nothing" if mine is None else show(token_id, mine)
            target = exp.describe(token_id) if theirs is None else show(token_id, theirs)
            out.append(Diff(f"{key} id {token_id}: file has {found}, artifact has {target}"))
    return out


def _gguf_token_diffs(fields: dict[str, Any], exp: Expected, *, rows: int = 0) -> list[Diff]:
    """Id by id; a model GGUF's ids past the artifact's (``rows``) must be ``[PAD{i}]`` (UNUSED)."""
    ordinary = exp.chars_by_id
    pad, pad_types = padding_tokens(len(exp.gguf_tokens), rows)

    def show_token(token_id: int, text: str) -> str:
        return show_chars(text) if token_id in ordinary else repr(text)

    def show_type(_: int, value: int) -> str:
        return f"{value} ({TOKEN_TYPE_NAMES.get(value, 'unknown type')})"

    tokens = fields.get(GGUF_PREFIX + "tokens")
    types = fields.get(GGUF_PREFIX + "token_type")
    want, want_types = exp.gguf_tokens + pad, exp.gguf_types + pad_types
    out = _list_diffs_by_id(GGUF_PREFIX + "tokens", tokens, want, str, show=show_token, exp=exp)
    out += _list_diffs_by_id(GGUF_PREFIX + "token_type", types, want_types, int, show=show_type, exp=exp)
    return out


def _id_values(short: str, value: Any) -> list[Any] | None:
    """The ids an id-valued key holds, or ``None`` when the key is not id-valued."""
    if not (short.endswith(("_id", "_ids")) or short == "suppress_tokens"):
        return None
    return value if isinstance(value, list) else [value]


#: keys whose value here is llama.cpp's own default for a gpt2 (BPE) vocabulary: behaviour-identical
GGUF_BENIGN = {"add_space_prefix": False, "add_sep_token": False, "remove_extra_whitespaces": False}


def _gguf_key_diffs(fields: dict[str, Any], exp: Expected) -> list[Diff]:
    out: list[Diff] = []
    for key, value in fields.items():
        if not isinstance(key, str) or not key.startswith(GGUF_PREFIX):
            continue
        if key[len(GGUF_PREFIX) :] in GGUF_BENIGN and value is GGUF_BENIGN[key[len(GGUF_PREFIX) :]]:
            continue  # written by convert_hf_to_gguf with the default value: nothing changes
        short = key[len(GGUF_PREFIX) :]
        ids = _id_values(short, value)
        bad = [v for v in ids or [] if not (is_int(v) and 0 <= v < exp.vocab_size)]
        target = f" ({exp.describe(value)})" if ids is not None and is_int(value) and not bad else ""
        if key not in EXPORTED_GGUF_KEYS:
            effect = GGUF_KEY_EFFECTS.get(short, "not a key this llama.cpp reads")
            text = f"{key} = {shorten(value)}{target}: {effect}; `stacktok export` never writes this key"
            out.append(Diff(text, remove=key))
        if bad:
            text = (
                f"{key} = {shorten(value)}: {shorten(bad[0])} is not an id the artifact defines "
                f"(0..{exp.vocab_size - 1}); llama.cpp ignores it with a warning"
            )
            out.append(Diff(text, remove=key, instead="point it at an artifact id"))
    return out


def gguf_fix(path: Path | None, *, model: bool) -> str:
    """The fix for a GGUF whose tokenizer metadata is wrong: ``stacktok export`` for the
    vocab-only export, ``stacktok retokenize`` for a model GGUF (it holds weights)."""
    name = path.name if path is not None else "the GGUF"
    if model:
        return (
            f"put the artifact's tokenizer into the model: `stacktok retokenize {name} --out NEW.gguf` "
            "(docs/exports.md: Shipping a GGUF)"
        )
    return f"rebuild {name} with `stacktok export`"


def gguf_rows(path: Path | None, exp: Expected) -> list[Row]:
    checks = ("surface.gguf_tokens", "surface.gguf_keys")
    if path is None:
        return [skip(c, "no .gguf file in or beside the directory") for c in checks]
    try:
        fields = _read_gguf(path)
    except ImportError:
        why = f"gguf is not installed, so {path.name} cannot be read"
        return [Row(c, FILES, "missing", why, GGUF_INSTALL) for c in checks]
    if isinstance(fields, str):
        return [Row(c, FILES, "fail", fields, f"rebuild {path.name} with `stacktok export`") for c in checks]
    rows = embedding_rows(gguf_tensors(path))  # a model GGUF: padded rows, and retokenize is the fix
    fix = gguf_fix(path, model=rows is not None)
    token_diffs = functools.partial(_gguf_token_diffs, rows=rows or 0)
    return [
        verdict(checks[0], path.name, guarded(path.name, token_diffs, fields, exp), fix=fix),
        verdict(checks[1], path.name, guarded(path.name, _gguf_key_diffs, fields, exp), fix=fix),
    ]
