"""Checkpoint config: vocab_size, the special ids' roles, stopping at end of turn, BOS, pad.

Reads ``config.json``, ``generation_config.json``, ``tokenizer_config.json``,
``special_tokens_map.json``, ``tokenizer.json``'s post-processor and the GGUF's ids. These
are the configuration faults that break serving even when ids are right: double BOS (vLLM
PR#16976), eos lists that do not stop at end of turn (vllm#4180), pad == eos (TRL#1623).
Ranges are ranges (``vocab_size >= 32768``: embeddings are padded); a post-processor that
adds no ids is not a double BOS. :func:`check_config` also runs the Hugging Face file checks
(``conformance.static.hf_files``), in the gate's row order.

Out of scope: model weights and architecture config beyond ``vocab_size`` and the special
ids; the tokens' text and flags (``conformance.static.hf_files``, ``conformance.static.surface``).
"""

from __future__ import annotations

from typing import Any

from conformance.core.rows import FILES, Row, row, skip
from conformance.static.context import StaticContext
from conformance.static.hf_files import (
    post_added_tokens,
    remote_code_checks,
    tokenizer_config_checks,
    tokenizer_json_checks,
)


def _token_id(ctx: StaticContext, value: Any) -> int | None:
    if isinstance(value, dict):
        value = value.get("content")
    if isinstance(value, str):
        return ctx.ids.get(value, -1)
    return value if isinstance(value, int) else None


def check_config(ctx: StaticContext) -> list[Row]:
    if ctx.dir is None:
        return [skip("config", "no tokenizer.json in the directory (GGUF / .tiktoken only)")]
    out = _vocab_checks(ctx) + _special_id_checks(ctx) + _bos_checks(ctx)
    out += tokenizer_json_checks(ctx) + tokenizer_config_checks(ctx) + remote_code_checks(ctx)
    return out


def _vocab_checks(ctx: StaticContext) -> list[Row]:
    cfg = ctx.obj("config.json")
    if not cfg:
        return [skip("config.vocab_size", "no config.json (a tokenizer-only directory)")]
    v = cfg.get("vocab_size")
    if v is None and isinstance(cfg.get("text_config"), dict):
        v = cfg["text_config"].get("vocab_size")
    if v is None:
        return [skip("config.vocab_size", "config.json has no vocab_size")]
    n = ctx.ref.vocab_size
    if isinstance(v, int) and v > n:
        return [
            Row(
                "config.vocab_size",
                FILES,
                "pass",
                f"embedding has {v} rows for {n} ids (padded; ids {n}-{v - 1} never occur)",
            )
        ]
    return [
        row(
            "config.vocab_size",
            v == n,
            f"config.json vocab_size is {v}, the tokenizer has {n} ids: ids >= {v} have no embedding row",
            f"set vocab_size to at least {n} (the embedding must cover every id)",
        )
    ]


def _special_id_checks(ctx: StaticContext) -> list[Row]:
    bos, eos, pad, end = (ctx.ids[s] for s in ("<|bos|>", "<|eos|>", "<|pad|>", "<|end|>"))
    tcfg, cfg, gen = (ctx.obj(n) for n in ("tokenizer_config.json", "config.json", "generation_config.json"))
    smap = ctx.obj("special_tokens_map.json")
    seen: dict[str, list[tuple[str, Any]]] = {"bos": [], "eos": [], "pad": []}
    for key in seen:
        for name, data in (("tokenizer_config.json", tcfg), ("special_tokens_map.json", smap)):
            if data.get(key + "_token") is not None:
                seen[key].append((name, _token_id(ctx, data[key + "_token"])))
        for name, data in (("config.json", cfg), ("generation_config.json", gen)):
            if data.get(key + "_token_id") is not None:
                seen[key].append((name, data[key + "_token_id"]))
        gkey = "padding" if key == "pad" else key
        if ctx.gguf_value(f"tokenizer.ggml.{gkey}_token_id") is not None:
            seen[key].append(("GGUF", ctx.gguf_value(f"tokenizer.ggml.{gkey}_token_id")))
    want = {"bos": {bos}, "eos": {eos, end}, "pad": {pad}}
    out = []
    for key, places in seen.items():
        bad = [(n, v) for n, v in places if not _id_in(v, want[key])]
        # a model config's pad id only pads batched generation; the tokenizer's pad is what training uses
        soft = key == "pad" and all(n in ("config.json", "generation_config.json") for n, _ in bad)
        out.append(
            row(
                f"config.{key}_id",
                not bad,
                f"{key} id disagrees: "
                + ", ".join(f"{n}={v}" for n, v in bad)
                + (" (pads batched generation only; the tokenizer's pad is <|pad|>)" if soft else ""),
                f"set every {key} id to {sorted(want[key])[0]} ({'<|' + key + '|>'})",
                warn=soft,
            )
        )
    out.append(_eos_stops_turns(ctx, gen, eos, end))
    tokenizer_files = ("tokenizer_config.json", "special_tokens_map.json", "GGUF")
    pads = {
        p
        for name, value in seen["pad"]
        if name in tokenizer_files
        for p in (value if isinstance(value, list) else [value])
    }
    # transformers takes tokenizer_config.json's pad_token (an explicit null wins), else special_tokens_map's
    pad_source = tcfg if "pad_token" in tcfg else smap
    no_pad = bool(tcfg) and pad_source.get("pad_token") is None
    out.append(
        row(
            "config.pad_not_eos",
            not (pads & {eos}) and not no_pad,
            "no pad token in tokenizer_config.json / special_tokens_map.json: TRL and collators then "
            "pad with eos and mask it out of the loss (TRL#1623)"
            if no_pad
            else "pad id equals eos id: TRL masks eos out of the loss (TRL#1623)",
            f"use <|pad|> ({pad}) as the pad token (pad_token in tokenizer_config.json)",
        )
    )
    return out


def _eos_stops_turns(ctx: StaticContext, gen: dict[str, Any], eos: int, end: int) -> Row:
    fix = f"set generation_config.json eos_token_id to [{eos}, {end}] (vllm#4180)"
    if ctx.files.get("generation_config.json") is None:
        if ctx.template is None:
            return skip(
                "config.eos_stops_turns", "no chat template and no generation_config.json (a base model)"
            )
        return Row(
            "config.eos_stops_turns",
            FILES,
            "fail",
            "a chat template but no generation_config.json: vLLM and transformers then stop only at "
            "<|eos|>, never at <|end|>, and the model talks past its turn",
            f"add generation_config.json with eos_token_id [{eos}, {end}] (`stacktok export` writes it; "
            "vllm#4180)",
        )
    gen_eos = gen.get("eos_token_id")
    ids = set(gen_eos if isinstance(gen_eos, list) else [gen_eos])
    return row(
        "config.eos_stops_turns",
        {eos, end} <= ids,
        f"generation_config eos_token_id is {gen_eos}; serving will not stop at both <|eos|> and <|end|>",
        fix,
    )


def _id_in(value: Any, allowed: set[int]) -> bool:
    values = value if isinstance(value, list) else [value]
    return bool(values) and all(v in allowed for v in values)


def _bos_checks(ctx: StaticContext) -> list[Row]:
    tcfg, tj = ctx.obj("tokenizer_config.json"), ctx.obj("tokenizer.json")
    adders = []
    if tcfg.get("add_bos_token") or tcfg.get("add_eos_token"):
        adders.append("tokenizer_config add_bos_token/add_eos_token")
    post = tj.get("post_processor")
    if isinstance(post, dict) and (added := post_added_tokens(post)):
        adders.append(f"tokenizer.json post_processor {post.get('type')} adds {added}")
    if ctx.gguf_value("tokenizer.ggml.add_bos_token"):
        adders.append("GGUF tokenizer.ggml.add_bos_token")
    if ctx.gguf_value("tokenizer.ggml.pre") in ("llama-bpe", "llama3"):
        adders.append("GGUF pre llama-bpe (llama.cpp forces add-BOS)")
    return [
        row(
            "config.no_double_bos",
            not adders,
            "BOS/EOS is added outside the chat template by: " + "; ".join(adders),
            "the template already adds <|bos|>: set add_bos_token false, "
            "drop the post-processor's special tokens (vLLM PR#16976)",
        )
    ]
