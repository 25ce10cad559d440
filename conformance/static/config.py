"""Checkpoint config: vocab_size, the special ids' roles, stopping at end of turn, BOS, pad.

Reads ``config.json``, ``generation_config.json``, ``tokenizer_config.json``,
``special_tokens_map.json``, ``tokenizer.json``'s post-processor and the GGUF's ids. These
are the configuration faults that break serving even when ids are right: double BOS (vLLM
PR#16976), eos lists that do not stop at end of turn (vllm#4180), pad == eos (TRL#1623).
Ranges are ranges (``vocab_size >= 32768``: embeddings are padded); a post-processor that
adds no ids is not a double BOS. :func:`check_config` also runs the Hugging Face file checks
(``conformance.static.hf_files``), in the gate's row order.

An imported (v2) artifact is judged as its publisher ships it: every eos id a file names must be
a control token (lists are normal: an Instruct model stops at its end of turn and at end of
text), generation must stop at the source's eos *and* at the id the checkpoint's own template
ends an assistant turn with, and -- with a template -- BOS/EOS are judged on what each path feeds
the model (``conformance.static.turns``). A fix adds what is missing and never tells an Instruct
model to drop its end-of-turn id.

Out of scope: model weights and architecture config beyond ``vocab_size`` and the special
ids; the tokens' text and flags (``conformance.static.hf_files``, ``conformance.static.surface``).
"""

from __future__ import annotations

from typing import Any

from conformance.core.expect import control_ids, is_ours, role_id, role_token, stop_ids
from conformance.core.rows import FILES, Row, row, skip
from conformance.static.context import StaticContext
from conformance.static.hf_files import (
    post_added_tokens,
    remote_code_checks,
    tokenizer_config_checks,
    tokenizer_json_checks,
)
from conformance.static.turns import bos_row, turn_end_id


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


def _role_ids(ctx: StaticContext) -> tuple[dict[str, set[int]], dict[str, str], int | None, int | None]:
    """What each file's bos/eos/pad must be (v1: <|bos|>, {<|eos|>, <|end|>}, <|pad|>; v2: the
    artifact's roles, eos with its end of turn), each role's name, and the eos / end-of-turn ids."""
    ref = ctx.ref
    if is_ours(ref):
        bos, eos, pad, end = (ctx.ids[s] for s in ("<|bos|>", "<|eos|>", "<|pad|>", "<|end|>"))
        return {"bos": {bos}, "eos": {eos, end}, "pad": {pad}}, {}, eos, end
    want = {
        "bos": {i for i in [role_id(ref, "bos")] if i is not None},
        "eos": stop_ids(ref),
        "pad": {i for i in [role_id(ref, "pad")] if i is not None},
    }
    return want, {k: role_token(ref, k) for k in want}, role_id(ref, "eos"), role_id(ref, "eot")


def _special_id_checks(ctx: StaticContext) -> list[Row]:
    want, names, eos, end = _role_ids(ctx)
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
    out = []
    for key, places in seen.items():
        if not want[key]:
            out.append(_no_role_row(key, places))
            continue
        if key == "eos" and not is_ours(ctx.ref):
            out.append(_eos_ids(ctx, places))
            continue
        bad = [(n, v) for n, v in places if not _id_in(v, want[key])]
        # a model config's pad id only pads batched generation; the tokenizer's pad is what training uses
        soft = key == "pad" and all(n in ("config.json", "generation_config.json") for n, _ in bad)
        pad_name = names.get("pad", "<|pad|>")
        out.append(
            row(
                f"config.{key}_id",
                not bad,
                f"{key} id disagrees: "
                + ", ".join(f"{n}={v}" for n, v in bad)
                + (f" (pads batched generation only; the tokenizer's pad is {pad_name})" if soft else ""),
                f"set every {key} id to {sorted(want[key])[0]} ({names.get(key, '<|' + key + '|>')})",
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
    # an imported artifact whose source itself has no pad, or pads with eos: the files follow it (warn)
    source_pad = want["pad"]
    as_source = not is_ours(ctx.ref) and (not source_pad if no_pad else eos in source_pad)
    pad_fix = f"{want['pad'] and sorted(want['pad'])[0]}" if want["pad"] else "a pad id that is not eos"
    out.append(
        row(
            "config.pad_not_eos",
            not (pads & {eos}) and not no_pad,
            (
                "no pad token in tokenizer_config.json / special_tokens_map.json: TRL and collators then "
                "pad with eos and mask it out of the loss (TRL#1623)"
                if no_pad
                else "pad id equals eos id: TRL masks eos out of the loss (TRL#1623)"
            )
            + (" -- as in the source the artifact was imported from" if as_source else ""),
            f"use <|pad|> ({pad_fix}) as the pad token (pad_token in tokenizer_config.json)"
            if is_ours(ctx.ref)
            else f"set a pad token ({pad_fix}) in tokenizer_config.json for training",
            warn=as_source,
        )
    )
    return out


#: the key that names the eos in each file
_EOS_KEY = {
    "tokenizer_config.json": "eos_token",
    "special_tokens_map.json": "eos_token",
    "config.json": "eos_token_id",
    "generation_config.json": "eos_token_id",
    "GGUF": "tokenizer.ggml.eos_token_id",
}


def _eos_ids(ctx: StaticContext, places: list[tuple[str, Any]]) -> Row:
    """An imported artifact: every eos id a file names is a control token of the source -- a list
    is normal (an Instruct model stops at its end of turn and at end of text: Llama 3.1 ships
    ``[128001, 128008, 128009]``), and files may name different ones (``eos_token`` ``<|eot_id|>``
    beside the source's ``<|end_of_text|>``). Whether generation stops at the end of a turn is
    ``config.eos_stops_turns``; an id that is ordinary text or unknown fails here (GPT-2's and
    Qwen2's ``<|endoftext|>`` is bos and eos at once: a control token, so it passes)."""
    ref = ctx.ref
    stops = sorted(stop_ids(ref) | {i for i in [turn_end_id(ctx)] if i is not None})
    controls = control_ids(ref)
    named = ", ".join(f"{n}={v}" for n, v in places)
    bad = [(n, i) for n, v in places for i in (v if isinstance(v, list) else [v]) if i not in controls]
    if not bad:
        return Row(
            "config.eos_id", FILES, "pass", f"every eos id is a control token: {named or 'none named'}"
        )
    n, i = bad[0]
    what = "names no token of the artifact" if i in (None, -1) else f"is {i} ({_describe(ctx, i)})"
    listed = ", ".join(f"{_describe(ctx, s)} ({s})" for s in stops)
    return Row(
        "config.eos_id",
        FILES,
        "fail",
        f"{n} {_EOS_KEY[n]} {what}: generation would stop on it, or never -- eos ids: {named}",
        f"set {n} {_EOS_KEY[n]} to a token the model ends with: {listed}",
    )


def _describe(ctx: StaticContext, i: Any) -> str:
    if i in ctx.ref.id_to_special:
        return ctx.ref.id_to_special[i]
    if isinstance(i, int) and 0 <= i < ctx.ref.vocab_size:
        return "ordinary text"
    return "not an id of the artifact"


def _no_role_row(key: str, places: list[tuple[str, Any]]) -> Row:
    """An imported artifact without ``key``'s role: nothing to compare, unless a file names one."""
    if not places:
        return skip(f"config.{key}_id", f"the artifact records no {key} role and no file names one")
    return Row(
        f"config.{key}_id",
        FILES,
        "warn",
        f"{key} id named by "
        + ", ".join(f"{n}={v}" for n, v in places)
        + f", but the artifact's source has no {key} role: the reference cannot certify it",
        f"re-import from the files that define the {key} token, or drop it",
    )


def _eos_stops_turns(ctx: StaticContext, gen: dict[str, Any], eos: int | None, end: int | None) -> Row:
    ours = is_ours(ctx.ref)
    turn = None if ours else turn_end_id(ctx)  # v2: the id the checkpoint's template ends a turn with
    if turn is not None and turn not in (eos, end):
        return _stops_at_turn_end(ctx, gen, sorted(i for i in (eos, end, turn) if i is not None), turn)
    stops = sorted(i for i in (eos, end) if i is not None)
    if not stops:
        return skip("config.eos_stops_turns", "the artifact records no eos or end-of-turn role")
    named = "<|eos|>" if ours else role_token(ctx.ref, "eos")
    both = (
        "both <|eos|> and <|end|>"
        if ours
        else " and ".join(
            sorted({role_token(ctx.ref, r) for r in ("eos", "eot") if role_id(ctx.ref, r) is not None})
        )
    )
    listed = f"[{eos}, {end}]" if ours else str(stops)
    fix = f"set generation_config.json eos_token_id to {listed} (vllm#4180)"
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
            + (
                f"{named}, never at <|end|>, and the model talks past its turn"
                if ours
                else f"the tokenizer's eos, never at {both}"
            ),
            f"add generation_config.json with eos_token_id {listed} (`stacktok export` writes it; vllm#4180)",
        )
    gen_eos = gen.get("eos_token_id")
    ids = set(gen_eos if isinstance(gen_eos, list) else [gen_eos])
    return row(
        "config.eos_stops_turns",
        set(stops) <= ids,
        f"generation_config eos_token_id is {gen_eos}; serving will not stop at {both}",
        fix,
    )


def _stops_at_turn_end(ctx: StaticContext, gen: dict[str, Any], stops: list[int], turn: int) -> Row:
    """An imported artifact whose template ends an assistant turn with ``turn``: that id and the
    source's eos must all be in ``generation_config.json`` ``eos_token_id`` (vLLM and transformers
    stop there; a list is normal). The fix adds what is missing and keeps every id listed."""
    name = ctx.ref.id_to_special.get(turn, str(turn))
    if ctx.files.get("generation_config.json") is None:
        return Row(
            "config.eos_stops_turns",
            FILES,
            "fail",
            f"no generation_config.json: vLLM and transformers stop only at the tokenizer's eos, while "
            f"{ctx.template_source} ends an assistant turn with {turn} {name} (vllm#4180)",
            f"add generation_config.json with eos_token_id {stops}",
        )
    gen_eos = gen.get("eos_token_id")
    listed = gen_eos if isinstance(gen_eos, list) else [gen_eos] if gen_eos is not None else []
    missing = [i for i in stops if i not in listed]
    if not missing:
        return Row(
            "config.eos_stops_turns",
            FILES,
            "pass",
            f"generation_config.json eos_token_id {gen_eos} stops at the end of a turn ({turn} {name}, "
            f"the id {ctx.template_source} ends an assistant turn with) and at the source's eos",
        )
    names = ", ".join(f"{i} {ctx.ref.id_to_special.get(i, '')}".strip() for i in missing)
    return Row(
        "config.eos_stops_turns",
        FILES,
        "fail",
        f"generation_config.json eos_token_id is {gen_eos}, without {names}: {ctx.template_source} ends an "
        f"assistant turn with {turn} {name}, so generation runs past the end of the turn "
        "(llama.cpp#6772, vllm#4180)",
        f"add {', '.join(map(str, missing))} to generation_config.json eos_token_id: "
        f"{[*listed, *missing]} (keep every id it lists)",
    )


def _id_in(value: Any, allowed: set[int]) -> bool:
    values = value if isinstance(value, list) else [value]
    return bool(values) and all(v in allowed for v in values)


def _bos_checks(ctx: StaticContext) -> list[Row]:
    tcfg, tj = ctx.obj("tokenizer_config.json"), ctx.obj("tokenizer.json")
    if not is_ours(ctx.ref):  # with a template: judged on what each path feeds (static.turns)
        judged = bos_row(ctx) if ctx.template is not None else None
        return [judged or _bos_as_source(ctx, tcfg, tj)]
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


def _bos_as_source(ctx: StaticContext, tcfg: dict[str, Any], tj: dict[str, Any]) -> Row:
    """An imported artifact: every file adds BOS/EOS exactly as the source does (its add_bos/add_eos)."""
    ref = ctx.ref
    flags = {"add_bos_token": ref.add_bos, "add_eos_token": ref.add_eos}
    differ = [
        f"tokenizer_config {k} is {tcfg[k]!r}" for k, w in flags.items() if k in tcfg and bool(tcfg[k]) != w
    ]
    want = [role_token(ref, r) for r, on in (("bos", ref.add_bos), ("eos", ref.add_eos)) if on]
    post = tj.get("post_processor")
    added = post_added_tokens(post) if isinstance(post, dict) else []
    if sorted(added) != sorted(want):
        differ.append(f"tokenizer.json post_processor adds {added or 'nothing'}")
    for k, w in flags.items():
        got = ctx.gguf_value(f"tokenizer.ggml.{k}")
        if got is not None and bool(got) != w:
            differ.append(f"GGUF tokenizer.ggml.{k} is {got}")
    return row(
        "config.no_double_bos",
        not differ,
        f"BOS/EOS is not added as the source adds it ({want or 'nothing'}): " + "; ".join(differ),
        f"match the source: add_bos_token {str(ref.add_bos).lower()}, add_eos_token "
        f"{str(ref.add_eos).lower()}, a post-processor that adds {want or 'nothing'}",
    )
