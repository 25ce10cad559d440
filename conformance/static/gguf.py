"""The GGUF's tokenizer metadata: key types, model and pre type, merges, special ids, add-BOS,
and a model GGUF's embedding rows.

``tokenizer.ggml.pre`` must select the Llama-3 split regex without ``llama-bpe``'s side
effects (ignore_merges, add-BOS); merges and special ids must be the artifact's. A model
GGUF (one holding weights) keeps its own architecture, and its ``token_embd.weight`` must
have one row per token.

Out of scope: the token list id by id and unknown keys (``conformance.static.surface``);
llama.cpp's own end-of-generation set (``conformance.static.gguf_eog``); the fingerprint
label (``conformance.static.provenance``); the chat template (``conformance.static.chat``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from conformance.core.rows import FILES, Row, row, skip
from conformance.static.context import StaticContext
from stacktok_export.export.gguf_fmt import merge_strings
from stacktok_export.export.gguf_model import check_rows

GOOD_GGUF_PRE = ("smaug-bpe", "dbrx")  # the Llama-3 regex without ignore_merges / add-BOS

_GGUF_TYPES = {
    "general.architecture": "STRING",
    "tokenizer.ggml.model": "STRING",
    "tokenizer.ggml.pre": "STRING",
    "tokenizer.ggml.tokens": "ARRAY[STRING]",
    "tokenizer.ggml.token_type": "ARRAY[INT32]",
    "tokenizer.ggml.merges": "ARRAY[STRING]",
    "tokenizer.ggml.bos_token_id": "UINT32",
    "tokenizer.ggml.eos_token_id": "UINT32",
    "tokenizer.ggml.padding_token_id": "UINT32",
    "tokenizer.ggml.eot_token_id": "UINT32",
    "tokenizer.ggml.add_bos_token": "BOOL",
    "tokenizer.ggml.add_eos_token": "BOOL",
    "tokenizer.chat_template": "STRING",
}


def check_gguf(ctx: StaticContext) -> list[Row]:
    g = ctx.gguf
    if g is None:
        return [skip("gguf", "no .gguf file in or beside the directory")]
    if "__missing__" in g:
        return [Row("gguf", FILES, "missing", g["__missing__"], "pip install 'stacktok[gguf]'")]
    if "__error__" in g:
        return [
            Row("gguf.readable", FILES, "fail", g["__error__"], "re-export the GGUF with `stacktok export`")
        ]
    wrong = [
        f"{k}: {g[k][1] if k in g else 'missing'} (want {t})"
        for k, t in _GGUF_TYPES.items()
        if k not in g or g[k][1] != t
    ]
    ref, ids, fix = ctx.ref, ctx.ids, ctx.gguf_fix
    val = {k: v for k, (v, _) in g.items()}
    pre = val.get("tokenizer.ggml.pre")
    model = bool(ctx.gguf_tensors)  # a model GGUF keeps its own architecture
    return [
        row("gguf.metadata_types", not wrong, "; ".join(wrong[:4]), fix),
        row(
            "gguf.model",
            (model or val.get("general.architecture") == "llama")
            and val.get("tokenizer.ggml.model") == "gpt2",
            "tokenizer model must be gpt2" + ("" if model else " and architecture llama"),
            fix,
        ),
        *([_embedding_rows(ctx, val)] if model else []),
        row(
            "gguf.pre",
            pre in GOOD_GGUF_PRE,
            f"tokenizer.ggml.pre is {pre!r}: "
            + (
                "llama-bpe also turns on ignore_merges and add-BOS"
                if pre in ("llama-bpe", "llama3")
                else "that name selects a different split regex"
            ),
            f"set tokenizer.ggml.pre to {GOOD_GGUF_PRE[0]!r}",
        ),
        row(
            "gguf.merges",
            list(val.get("tokenizer.ggml.merges") or []) == merge_strings(ref),
            "merges differ from the artifact's (count or rank order)",
            fix,
        ),
        row(
            "gguf.special_ids",
            (
                val.get("tokenizer.ggml.bos_token_id"),
                val.get("tokenizer.ggml.eos_token_id"),
                val.get("tokenizer.ggml.padding_token_id"),
                val.get("tokenizer.ggml.eot_token_id"),
            )
            == (ids["<|bos|>"], ids["<|eos|>"], ids["<|pad|>"], ids["<|end|>"]),
            "bos/eos/pad/eot ids differ from the artifact's",
            fix,
        ),
        row(
            "gguf.add_bos",
            val.get("tokenizer.ggml.add_bos_token") is False
            and val.get("tokenizer.ggml.add_eos_token") is False,
            "GGUF adds BOS/EOS (or leaves it to the pre type's default): the template already adds <|bos|>",
            "set add_bos_token/add_eos_token false",
        ),
    ]


def _embedding_rows(ctx: StaticContext, val: dict[str, Any]) -> Row:
    """A model GGUF's embeddings cover every id, one token per row (llama.cpp sizes them so)."""
    n_ids = len(ctx.ref.token_bytes()) + len(ctx.ids)
    n_tokens = len(val.get("tokenizer.ggml.tokens") or [])
    fix = f"resize the model's embeddings to at least {n_ids:,} rows, convert again, then retokenize"
    try:
        rows = check_rows(Path(ctx.x.gguf or ""), ctx.gguf_tensors, n_ids)
    except ValueError as exc:
        return row("gguf.embedding_rows", False, str(exc).split("; ")[0], fix)
    return row(
        "gguf.embedding_rows",
        rows == n_tokens,
        f"token_embd.weight has {rows:,} rows, the token list {n_tokens:,} entries: llama.cpp refuses it",
        ctx.gguf_fix,
    )
