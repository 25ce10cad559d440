"""The Hugging Face files as transformers reads them: tokenizer.json sections, special flags,
tokenizer_config.json settings, loading in transformers 4.x, code from the checkpoint.

Behaviour over syntax: a ``tokenizer.json`` section that differs from the export is a
*warning* with the difference (``conformance.gate.behaviour`` then judges it by the backends
that read the file). Hard faults fail: specials without ``special=true`` or with
lstrip/rstrip, ``clean_up_tokenization_spaces`` (transformers PR#44914), 5.x-only configs
(transformers#47553), custom code (``auto_map``).

A checkpoint built on another tokenizer (an imported artifact) is judged as its publisher ships
it, by who is affected: ``clean_up_tokenization_spaces: true`` fails only when it changes the
decode of a probe *and* the installed transformers applies it (4.x; 5.x skips it for BPE), else it
warns naming transformers 4.x users; a 5.x-only ``tokenizer_class`` (``TokenizersBackend``, what
5.x's ``save_pretrained`` writes) fails only when the installed transformers is below 5, else it
warns naming the users below 5.0.

Out of scope: the tokens' ids and text (``conformance.static.surface``); the special ids'
roles (``conformance.static.config``); the chat template (``conformance.static.chat``).
"""

from __future__ import annotations

import json
from typing import Any

from conformance.core.clean_spaces import hf_clean_up
from conformance.core.environment import installed
from conformance.core.expect import is_ours
from conformance.core.rows import FILES, Row, row, skip
from conformance.static.context import StaticContext
from stacktok_export.export.hf import DECODER_JSON, post_processor_json, pre_tokenizer_json

MIN_CONTEXT = 8192
CLASSES_4X = ("PreTrainedTokenizerFast",)
CLASSES_BUILTIN = ("PreTrainedTokenizerFast", "TokenizersBackend")
#: classes only transformers 5.x has (4.57: "Tokenizer class TokenizersBackend does not exist")
CLASSES_5X_ONLY = ("TokenizersBackend",)
#: the tokenizer classes of transformers 4.57 that a byte-level BPE source names (an imported
#: artifact's tokenizer_config.json keeps its own class; these load in 4.x and 5.x)
CLASSES_4X_BPE = (
    "GPT2Tokenizer",
    "GPT2TokenizerFast",
    "Qwen2Tokenizer",
    "Qwen2TokenizerFast",
    "LlamaTokenizerFast",
    "CodeGenTokenizerFast",
    "GPTNeoXTokenizerFast",
    "CohereTokenizerFast",
)
FIX_RESAVE = (
    "copy the exported tokenizer files back (tokenizer_config.json, tokenizer.json, "
    "special_tokens_map.json, chat_template.jinja from `stacktok export`) after save_pretrained"
)


def post_added_tokens(post: dict[str, Any]) -> list[str]:
    """The tokens a post-processor adds to a single sequence ([] for a no-op one)."""
    kind = post.get("type")
    if kind == "Sequence":
        return [t for p in post.get("processors", []) if isinstance(p, dict) for t in post_added_tokens(p)]
    if kind == "ByteLevel":
        return []
    if kind == "TemplateProcessing":
        single = post.get("single") or []
        return [
            str(piece["SpecialToken"].get("id"))
            for piece in single
            if isinstance(piece, dict) and isinstance(piece.get("SpecialToken"), dict)
        ]
    return [f"<{kind} specials>"]  # BertProcessing, RobertaProcessing: always cls/sep


def _section_row(check: str, got: Any, want: Any, what: str) -> Row:
    if got == want:
        return Row(check, FILES, "pass", "ok")
    return Row(
        check,
        FILES,
        "warn",
        f"{what} differs from the export: {json.dumps(got, sort_keys=True)[:200]} "
        f"(export: {json.dumps(want, sort_keys=True)[:120]}); behaviour decides",
        "restore the exported section, or keep it if every behavioural row passes",
    )


def tokenizer_json_checks(ctx: StaticContext) -> list[Row]:
    tj = ctx.obj("tokenizer.json")
    if not tj:
        return [skip("config.tokenizer_json", "no tokenizer.json")]
    model = tj.get("model") or {}
    ours = is_ours(ctx.ref)
    want_model = {"type": "BPE", "ignore_merges": False, "dropout": None, "byte_fallback": False}
    if not ours:  # the source's own rule (Llama-3 sets ignore_merges)
        want_model["ignore_merges"] = bool(ctx.ref.ignore_merges)
    got_model = {k: model.get(k) for k in want_model}
    got_model["dropout"] = got_model["dropout"] or None
    got_model["ignore_merges"] = bool(got_model["ignore_merges"])
    got_model["byte_fallback"] = bool(got_model["byte_fallback"])
    post = tj.get("post_processor")
    post_adds = post_added_tokens(post) if isinstance(post, dict) else []
    # v1: no post-processor adds anything; v2: the one the export writes for the source's add_bos/eos
    want_post = None if ours else post_processor_json(ctx.ref)
    out = [
        _section_row(
            "config.pre_tokenizer",
            tj.get("pre_tokenizer"),
            pre_tokenizer_json(ctx.ref.pattern if ours else ctx.ref.patterns),
            "pre_tokenizer",
        ),
        _section_row("config.decoder", tj.get("decoder"), DECODER_JSON, "decoder"),
        _section_row("config.normalizer", tj.get("normalizer"), None, "normalizer"),
        _section_row("config.bpe_model", got_model, want_model, "model settings"),
        _section_row("config.post_processor", post if post_adds else None, want_post, "post_processor"),
    ]
    out.append(_special_flags(ctx, tj))
    return out


def _special_flags(ctx: StaticContext, tj: dict[str, Any]) -> Row:
    bad, soft = [], []
    for t in tj.get("added_tokens", []):
        content = t.get("content")
        if content not in ctx.ids:
            continue  # extra or renamed tokens: conformance.static.surface
        if content in ctx.ref.in_text:  # the source matches it in ordinary text: special=false is right
            if t.get("lstrip") or t.get("rstrip") or t.get("single_word"):
                bad.append(content)
            continue
        if not t.get("special") or t.get("lstrip") or t.get("rstrip") or t.get("single_word"):
            bad.append(content)
        elif t.get("normalized"):
            soft.append(content)
    if bad:
        return Row(
            "config.special_flags",
            FILES,
            "fail",
            f"special tokens with wrong flags (special/lstrip/rstrip/single_word): {bad}",
            "specials must be added tokens with special=true and lstrip/rstrip/single_word false",
        )
    if soft and tj.get("normalizer") is None:
        return Row(
            "config.special_flags",
            FILES,
            "warn",
            f"normalized=true on {soft} (no normalizer, so no effect today); behaviour decides",
            "set normalized=false: a normalizer added later would rewrite them",
        )
    return row(
        "config.special_flags",
        not soft,
        f"normalized=true on {soft} with a normalizer: specials are matched after normalization",
        "set normalized=false on every special",
    )


def tokenizer_config_checks(ctx: StaticContext) -> list[Row]:
    tcfg = ctx.obj("tokenizer_config.json")
    if not tcfg:
        return [
            Row(
                "config.tokenizer_config",
                FILES,
                "fail",
                "tokenizer_config.json is missing: transformers loads no chat template, no specials' names",
                "export the directory with `stacktok export`",
            )
        ]
    clean = tcfg.get("clean_up_tokenization_spaces")
    max_len = tcfg.get("model_max_length")
    out = [
        _clean_up_as_published(ctx)
        if clean is True and not is_ours(ctx.ref)
        else row(
            "config.clean_up_spaces",
            clean is False,
            f"clean_up_tokenization_spaces is {clean!r}: decode may rewrite 'x != y' to 'x!= y'"
            + (" (absent: the library's default decides)" if clean is None else ""),
            "set clean_up_tokenization_spaces to false (transformers PR#44914)",
            warn=clean is None,
        ),
        row(
            "config.model_max_length",
            max_len is None or max_len >= MIN_CONTEXT,
            f"model_max_length {max_len} truncates below {MIN_CONTEXT}"
            + ("" if is_ours(ctx.ref) else " (our models' context; the imported artifact records none)"),
            f"set model_max_length to at least {MIN_CONTEXT}",
            warn=not is_ours(ctx.ref),
        ),
        _loads_in_4x(tcfg, ours=is_ours(ctx.ref)),
    ]
    decoder = tcfg.get("added_tokens_decoder") or {}
    bad = [
        v.get("content")
        for v in decoder.values()
        if isinstance(v, dict)
        and v.get("content") in ctx.ids
        and (
            (not v.get("special") and v.get("content") not in ctx.ref.in_text)
            or v.get("lstrip")
            or v.get("rstrip")
        )
    ]
    out.append(
        row(
            "config.special_flags_config",
            not bad,
            f"added_tokens_decoder flags wrong for {bad}",
            "special=true, lstrip/rstrip false for every special",
        )
    )
    return out


def _transformers_major() -> tuple[str | None, int | None]:
    """The installed transformers' version and major (``None, None`` when it is not installed)."""
    found = installed("transformers")
    head = (found or "").split(".")[0]
    return found, int(head) if head.isdigit() else None


def _clean_up_as_published(ctx: StaticContext) -> Row:
    """``clean_up_tokenization_spaces: true`` on an imported artifact (Meta's Llama 3.x ships it):
    the probes whose decode it changes decide, and who applies it (module docstring)."""
    check = "config.clean_up_spaces"
    changed = next((p for p in ctx.probes if hf_clean_up(p.text) != p.text), None)
    if changed is None:
        return Row(
            check,
            FILES,
            "pass",
            f"clean_up_tokenization_spaces is true; no probe's decode changes ({len(ctx.probes)} probes)",
        )
    text = changed.text
    at = next(i for i, (a, b) in enumerate(zip(text, hf_clean_up(text))) if a != b) if text else 0
    snippet = text[max(0, at - 20) : at + 20]
    version, major = _transformers_major()
    what = (
        f"tokenizer_config.json clean_up_tokenization_spaces is true: transformers 4.x decode rewrites "
        f"probe {changed.id} ({snippet!r} -> {hf_clean_up(snippet)!r})"
    )
    fix = "set clean_up_tokenization_spaces to false in tokenizer_config.json (transformers PR#44914)"
    if major is not None and major < 5:
        return Row(check, FILES, "fail", f"{what}, and transformers {version} is installed here", fix)
    here = (
        f"transformers {version} here skips it for BPE" if version else "transformers is not installed here"
    )
    return Row(check, FILES, "warn", f"{what} -- affects users below transformers 5.0 ({here})", fix)


def _loads_only_in_5x(cls: Any, listed: bool) -> Row:
    """An imported artifact's 5.x-only tokenizer_class (5.x's ``save_pretrained`` writes
    ``TokenizersBackend``): a warning naming users below 5.0, a failure where 4.x is installed."""
    what = f"tokenizer_class {cls!r}" + (" and list-valued extra_special_tokens" if listed else "")
    version, major = _transformers_major()
    message = f"transformers 4.57 cannot load {what} (transformers#47553): users below 5.0 cannot load it"
    fix = (
        "to support transformers < 5, set tokenizer_class to PreTrainedTokenizerFast in tokenizer_config.json"
        + (" and rename the list extra_special_tokens to additional_special_tokens" if listed else "")
    )
    if major is not None and major < 5:
        return Row(
            "config.loads_in_4x", FILES, "fail", f"{message}; transformers {version} is installed here", fix
        )
    here = f"transformers {version} here loads it" if version else "transformers is not installed here"
    return Row("config.loads_in_4x", FILES, "warn", f"{message} ({here})", fix)


def _loads_in_4x(tcfg: dict[str, Any], *, ours: bool = True) -> Row:
    cls = tcfg.get("tokenizer_class")
    listed = isinstance(tcfg.get("extra_special_tokens"), list)
    if cls in CLASSES_4X and not listed:
        return Row("config.loads_in_4x", FILES, "pass", "ok")
    if not ours and (cls in CLASSES_5X_ONLY or (listed and isinstance(cls, str))):
        return _loads_only_in_5x(cls, listed)
    if not ours and isinstance(cls, str) and cls not in CLASSES_5X_ONLY and not listed and _in_4x(cls):
        return Row("config.loads_in_4x", FILES, "pass", f"{cls} is a transformers 4.x class")
    if cls is None:
        why = (
            "no tokenizer_class: transformers 4.57 then picks the class from config.json's model_type "
            "(llama -> LlamaTokenizerFast: prepends <|bos|>, adds <unk> as id 32768)"
        )
    else:
        why = (
            f"tokenizer_class {cls!r}"
            + (" and list-valued extra_special_tokens" if listed else "")
            + " only load in transformers 5.x (4.57: 'Tokenizer class TokenizersBackend does not exist' / "
            "\"'list' object has no attribute 'keys'\", transformers#47553)"
        )
    return Row(
        "config.loads_in_4x",
        FILES,
        "fail",
        why,
        FIX_RESAVE + "; or set tokenizer_class to PreTrainedTokenizerFast and rename the list "
        "extra_special_tokens to additional_special_tokens",
    )


def _in_4x(name: str) -> bool:
    """Whether transformers 4.57 ships tokenizer class ``name`` (for an imported artifact's own class)."""
    return name in CLASSES_4X_BPE


def _known_tokenizer_class(name: str) -> bool:
    if name in CLASSES_BUILTIN:
        return True
    try:
        import transformers
    except ImportError:
        return name.endswith(("Tokenizer", "TokenizerFast"))
    try:
        return hasattr(transformers, name)
    except Exception:  # noqa: BLE001 -- a lazy-module import error means "not shipped here"
        return False


def remote_code_checks(ctx: StaticContext) -> list[Row]:
    found = []
    for name in ("tokenizer_config.json", "config.json"):
        auto = ctx.obj(name).get("auto_map")
        if auto:
            found.append(f"{name} auto_map {json.dumps(auto, sort_keys=True)[:120]}")
    cls = ctx.obj("tokenizer_config.json").get("tokenizer_class")
    if isinstance(cls, str) and not _known_tokenizer_class(cls):
        found.append(f"tokenizer_config.json tokenizer_class {cls!r} is not a class transformers ships")
    return [
        row(
            "config.no_remote_code",
            not found,
            "the directory asks for code from the checkpoint: "
            + "; ".join(found)
            + " -- loaders would need trust_remote_code=True, and that code decides tokenization",
            "drop auto_map and use tokenizer_class PreTrainedTokenizerFast "
            "(the gate never runs checkpoint code)",
        )
    ]
