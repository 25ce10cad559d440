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

from conformance.core.expect import is_ours, role_id
from conformance.core.rows import FILES, Row, row, skip
from conformance.static.context import StaticContext
from stacktok_export import StackTokenizer
from stacktok_export.export.gguf_fmt import merge_strings
from stacktok_export.export.gguf_model import check_rows

GOOD_GGUF_PRE = ("smaug-bpe", "dbrx")  # the Llama-3 regex without ignore_merges / add-BOS
#: keys an imported artifact's GGUF must have (the others are type-checked when present)
_GGUF_REQUIRED = frozenset(f"tokenizer.ggml.{k}" for k in ("model", "pre", "tokens", "token_type", "merges"))
#: role -> the GGUF key naming its id (``tokenizer.ggml.<key>_token_id``)
_ROLE_KEYS = {"bos": "bos", "eos": "eos", "pad": "padding", "eot": "eot"}

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
    ours = is_ours(ctx.ref)
    wrong = [
        f"{k}: {g[k][1] if k in g else 'missing'} (want {t})"
        for k, t in _GGUF_TYPES.items()
        if (k not in g and (ours or k in _GGUF_REQUIRED)) or (k in g and g[k][1] != t)
    ]
    if not ours:
        return [
            row("gguf.metadata_types", not wrong, "; ".join(wrong[:4]), ctx.gguf_fix),
            *_imported_rows(ctx),
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
        _merges_row(val, ref, fix),
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


def _merges_row(val: dict[str, Any], ref: StackTokenizer, fix: str) -> Row:
    return row(
        "gguf.merges",
        list(val.get("tokenizer.ggml.merges") or []) == merge_strings(ref),
        "merges differ from the artifact's (count or rank order)",
        fix,
    )


def _imported_rows(ctx: StaticContext) -> list[Row]:
    """An imported artifact's GGUF: tokenizer model gpt2, a pre type that splits as the source, its
    merges, its role ids and its add-BOS/EOS keys (the architecture is the model's own)."""
    ref, fix = ctx.ref, ctx.gguf_fix
    val = {k: v for k, (v, _) in (ctx.gguf or {}).items()}
    pre = val.get("tokenizer.ggml.pre")
    fits = fitting_pre_types(ref)
    roles = {r: val.get(f"tokenizer.ggml.{k}_token_id") for r, k in _ROLE_KEYS.items()}
    want_roles = {r: role_id(ref, r) for r in _ROLE_KEYS}
    role_diff = [
        f"{r} {roles[r]} (artifact: {want_roles[r]})" for r in _ROLE_KEYS if roles[r] != want_roles[r]
    ]
    flags = {"add_bos_token": ref.add_bos, "add_eos_token": ref.add_eos}
    flag_diff = [
        f"{k} {val[k_]}"
        for k, w in flags.items()
        if (k_ := f"tokenizer.ggml.{k}") in val and bool(val[k_]) != w
    ]
    model = bool(ctx.gguf_tensors)
    out = [
        row(
            "gguf.model",
            val.get("tokenizer.ggml.model") == "gpt2",
            f"tokenizer model is {val.get('tokenizer.ggml.model')!r}, not gpt2 (byte-level BPE)",
            fix,
        ),
        *([_embedding_rows(ctx, val)] if model else []),
    ]
    if isinstance(fits, str):
        out.append(skip("gguf.pre", fits))
    else:
        out.append(
            row(
                "gguf.pre",
                pre in fits,
                f"tokenizer.ggml.pre is {pre!r}: llama.cpp then splits"
                + (" or merges" if fits else "")
                + " differently from the source"
                + (f" (pre types that match: {', '.join(fits[:4])})" if fits else ""),
                f"set tokenizer.ggml.pre to {fits[0]!r}" if fits else fix,
            )
        )
    out += [
        _merges_row(val, ref, fix),
        row(
            "gguf.special_ids",
            not role_diff,
            "role ids differ from the artifact's: " + ", ".join(role_diff),
            fix,
        ),
        row(
            "gguf.add_bos",
            not flag_diff,
            f"GGUF {', '.join(flag_diff)}: the source adds BOS={ref.add_bos}, EOS={ref.add_eos}",
            f"set add_bos_token {str(ref.add_bos).lower()}, add_eos_token {str(ref.add_eos).lower()}",
        ),
    ]
    return out


def fitting_pre_types(tok: StackTokenizer) -> list[str] | str:
    """Every llama.cpp pre type that splits with the artifact's patterns and merges by its
    ``ignore_merges`` rule (the table in ``stacktok_export.gguf.pretypes``), or why none
    can be named."""
    try:
        from stacktok_export.gguf.pretypes import PRE_TYPES
    except ImportError as exc:
        return f"the llama.cpp pre type table is not available ({exc})"
    want = (tuple(tok.patterns), bool(tok.ignore_merges))
    return sorted(name for name, pt in PRE_TYPES.items() if (tuple(pt.patterns), pt.ignore_merges) == want)


def _embedding_rows(ctx: StaticContext, val: dict[str, Any]) -> Row:
    """A model GGUF's embeddings cover every id, one token per row (llama.cpp sizes them so)."""
    n_ids = ctx.ref.vocab_size
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
