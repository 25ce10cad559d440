"""The gate's static checks: provenance, checkpoint config, chat template, GGUF metadata.

Each check reads files in the directory (never writes, never imports code
from it) and returns :class:`~conformance.core.rows.Row` values with a one-line
fix; every check yields a row on every run (``skip`` with the reason when its
file is absent). Files were schema-checked by ``conformance.validate`` before
this runs. These checks find the configuration faults that break serving even
when ids are right: double BOS (vLLM PR#16976), eos lists that do not stop at
end of turn (vllm#4180), pad == eos (TRL#1623), ``clean_up_tokenization_spaces``
(transformers PR#44914), 5.x-only configs (transformers#47553), templates
without ``{% generation %}`` (TRL PR#4201), custom code (``auto_map``), chat
templates that reach for Python internals, ``llama-bpe`` side effects.

Behaviour over syntax: a ``tokenizer.json`` section that differs from the
export is a *warning* with the difference; :func:`behaviour_proof` then
turns it into a failure only if the backends that read that file diverge, or
if none of them ran to show that it behaves the same. Ranges are ranges
(``vocab_size >= 32768``: embeddings are padded); a post-processor that adds
no ids is not a double BOS.

Out of scope: model weights and architecture config beyond ``vocab_size`` and
the special ids; the vocabulary id by id (``conformance.static.surface``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from stacktok_export import StackTokenizer
from stacktok_export.chat import render_text
from stacktok_export.export.gguf_fmt import merge_strings
from stacktok_export.export.gguf_model import check_rows
from stacktok_export.export.hf import DECODER_JSON, FINGERPRINT_KEY, hf_files, pre_tokenizer_json
from stacktok_export.export.tiktoken_fmt import tiktoken_text

from conformance.backends import readers_of
from conformance.core.layout import Exports, gguf_fields, gguf_tensors
from conformance.core.protocol import BackendMissing
from conformance.core.rows import FILES, Row, row, skip
from conformance.static.surface import gguf_fix

MIN_CONTEXT = 8192
GOOD_GGUF_PRE = ("smaug-bpe", "dbrx")  # the Llama-3 regex without ignore_merges / add-BOS
CLASSES_4X = ("PreTrainedTokenizerFast",)
CLASSES_BUILTIN = ("PreTrainedTokenizerFast", "TokenizersBackend")
TOKEN_TYPE_NORMAL, TOKEN_TYPE_CONTROL = 1, 3
JSON_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "config.json",
    "generation_config.json",
    "special_tokens_map.json",
)
#: syntax rows judged by behaviour: check -> the conformance checks that prove it on the readers
#: of tokenizer.json (``conformance.backends.readers_of``)
BEHAVIOUR_JUDGED: dict[str, tuple[str, ...]] = {
    "config.pre_tokenizer": ("encode", "trusted"),
    "config.normalizer": ("encode", "trusted"),
    "config.bpe_model": ("encode", "trusted"),
    "config.decoder": ("decode", "single_tokens", "stream"),
    "config.special_flags": ("trusted", "injection"),
    "config.post_processor": ("encode", "default"),
}
FIX_RESAVE = (
    "copy the exported tokenizer files back (tokenizer_config.json, tokenizer.json, "
    "special_tokens_map.json, chat_template.jinja from `stacktok export`) after save_pretrained"
)


class _Ctx:
    """Everything a static check needs, read once."""

    def __init__(self, exports: Exports, ref: StackTokenizer) -> None:
        self.x = exports
        self.ref = ref
        self.ids = dict(ref.special_to_id)
        self.dir = exports.hf_dir
        self.files: dict[str, Any] = {}
        self.template_source = ""
        self.template: str | None = None
        if self.dir is not None:
            for name in JSON_FILES:
                path = self.dir / name
                self.files[name] = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None
            jinja = self.dir / "chat_template.jinja"
            self.files["chat_template.jinja"] = jinja.read_text(encoding="utf-8") if jinja.is_file() else None
            self.template, self.template_source = chat_template(
                self.obj("tokenizer_config.json"), self.files["chat_template.jinja"]
            )
        self.gguf = _read_gguf(exports.gguf) if exports.gguf else None
        #: tensor shapes of a model GGUF (empty for the vocab-only export)
        self.gguf_tensors = gguf_tensors(exports.gguf) if self.gguf_ok() and exports.gguf else {}

    @property
    def gguf_fix(self) -> str:
        """How to repair the GGUF's tokenizer metadata: re-export it, or retokenize a model GGUF."""
        return gguf_fix(self.x.gguf, model=bool(self.gguf_tensors))

    def obj(self, name: str) -> dict[str, Any]:
        data = self.files.get(name)
        return data if isinstance(data, dict) else {}

    def gguf_ok(self) -> bool:
        return bool(self.gguf) and "__error__" not in self.gguf and "__missing__" not in self.gguf

    def gguf_value(self, key: str, default: Any = None) -> Any:
        return self.gguf.get(key, (default, ""))[0] if self.gguf_ok() else default


def chat_template(tcfg: dict[str, Any], jinja: str | None) -> tuple[str | None, str]:
    """The template transformers uses, and where it came from: ``chat_template.jinja`` first,
    then ``tokenizer_config.json`` ``chat_template`` (a string, or the ``default`` of a named list)."""
    if jinja is not None:
        return jinja, "chat_template.jinja"
    inline = tcfg.get("chat_template")
    if isinstance(inline, str):
        return inline, "tokenizer_config.json chat_template"
    if isinstance(inline, list):
        named = {t.get("name"): t.get("template") for t in inline if isinstance(t, dict)}
        if isinstance(named.get("default"), str):
            return named["default"], "tokenizer_config.json chat_template['default']"
    return None, ""


def _read_gguf(path: Path) -> dict[str, Any]:
    """``{key: (value, type name)}``, or ``{"__missing__": why}`` / ``{"__error__": why}``."""
    try:
        return gguf_fields(path)
    except ImportError:
        return {"__missing__": "gguf is not installed; pip install 'stacktok[gguf]'"}
    except Exception as exc:  # noqa: BLE001 -- validate.py reports unreadable files first
        return {"__error__": f"{path.name} is not a readable GGUF ({exc})"}


# ------------------------------------------------------------------ provenance
def check_provenance(ctx: _Ctx) -> list[Row]:
    """Labels and bytes: a stored fingerprint is a label, so a mismatch warns; content decides."""
    out = []
    fp = ctx.obj("tokenizer_config.json").get(FINGERPRINT_KEY)
    if ctx.dir is None:
        out.append(skip("provenance.fingerprint", "no Hugging Face files (tokenizer.json) in the directory"))
    elif fp is None:
        out.append(
            row(
                "provenance.fingerprint",
                False,
                "tokenizer_config.json has no stacktok_fingerprint label (save_pretrained drops it); "
                "the content checks below decide",
                "keep the exported tokenizer_config.json to keep the label",
                warn=True,
            )
        )
    else:
        out.append(
            row(
                "provenance.fingerprint",
                fp == ctx.ref.fingerprint,
                f"label stacktok_fingerprint {str(fp)[:12]}... is not the artifact's "
                f"{ctx.ref.fingerprint[:12]}...; "
                "a label proves nothing either way -- the content checks below decide",
                "re-export from the frozen artifact so the label tells the truth",
                warn=True,
            )
        )
    if ctx.gguf_ok():
        gfp = ctx.gguf_value("stacktok.fingerprint")
        out.append(
            row(
                "provenance.gguf_fingerprint",
                gfp == ctx.ref.fingerprint,
                f"GGUF stacktok.fingerprint label is {str(gfp)[:16]!r}, not the artifact's; content decides",
                ctx.gguf_fix,
                warn=True,
            )
        )
    else:
        out.append(skip("provenance.gguf_fingerprint", _no_gguf(ctx)))
    out.append(_files_identical(ctx))
    return out


def _no_gguf(ctx: _Ctx) -> str:
    if ctx.gguf is None:
        return "no .gguf file"
    return ctx.gguf.get("__missing__") or ctx.gguf.get("__error__", "")


def _expected_files(ctx: _Ctx) -> dict[Path, bytes]:
    """What `stacktok export` writes for each export file present in the directory."""
    expected: dict[Path, bytes] = {}
    if ctx.dir is not None:
        for name, data in hf_files(ctx.ref).items():
            expected[ctx.dir / name] = data
    if ctx.x.tiktoken:
        expected[ctx.x.tiktoken] = tiktoken_text(ctx.ref).encode("ascii")
    if ctx.x.gguf and not ctx.gguf_tensors:  # a model GGUF holds weights: its tokenizer rows decide
        try:
            from stacktok_export.export.gguf_fmt import gguf_bytes

            expected[ctx.x.gguf] = gguf_bytes(ctx.ref)
        except ImportError:  # gguf not installed: the GGUF checks report it
            pass
    return expected


def _files_identical(ctx: _Ctx) -> Row:
    expected = _expected_files(ctx)
    differ = sorted(p.name for p, data in expected.items() if p.is_file() and p.read_bytes() != data)
    return row(
        "provenance.files",
        not differ,
        f"not byte-identical to `stacktok export`: {', '.join(differ)} "
        "(behaviour decides: see the rows below)",
        "re-export, or keep the edit if every behavioural row passes",
        warn=True,
    )


# ------------------------------------------------------------- checkpoint config
def _token_id(ctx: _Ctx, value: Any) -> int | None:
    if isinstance(value, dict):
        value = value.get("content")
    if isinstance(value, str):
        return ctx.ids.get(value, -1)
    return value if isinstance(value, int) else None


def check_config(ctx: _Ctx) -> list[Row]:
    if ctx.dir is None:
        return [skip("config", "no tokenizer.json in the directory (GGUF / .tiktoken only)")]
    out = _vocab_checks(ctx) + _special_id_checks(ctx) + _bos_checks(ctx)
    out += _tokenizer_json_checks(ctx) + _tokenizer_config_checks(ctx) + _remote_code_checks(ctx)
    return out


def _vocab_checks(ctx: _Ctx) -> list[Row]:
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


def _special_id_checks(ctx: _Ctx) -> list[Row]:
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


def _eos_stops_turns(ctx: _Ctx, gen: dict[str, Any], eos: int, end: int) -> Row:
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


def _bos_checks(ctx: _Ctx) -> list[Row]:
    tcfg, tj = ctx.obj("tokenizer_config.json"), ctx.obj("tokenizer.json")
    adders = []
    if tcfg.get("add_bos_token") or tcfg.get("add_eos_token"):
        adders.append("tokenizer_config add_bos_token/add_eos_token")
    post = tj.get("post_processor")
    if isinstance(post, dict) and (added := _post_added_tokens(post)):
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


def _post_added_tokens(post: dict[str, Any]) -> list[str]:
    """The tokens a post-processor adds to a single sequence ([] for a no-op one)."""
    kind = post.get("type")
    if kind == "Sequence":
        return [t for p in post.get("processors", []) if isinstance(p, dict) for t in _post_added_tokens(p)]
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


def _tokenizer_json_checks(ctx: _Ctx) -> list[Row]:
    tj = ctx.obj("tokenizer.json")
    if not tj:
        return [skip("config.tokenizer_json", "no tokenizer.json")]
    model = tj.get("model") or {}
    want_model = {"type": "BPE", "ignore_merges": False, "dropout": None, "byte_fallback": False}
    got_model = {k: model.get(k) for k in want_model}
    got_model["dropout"] = got_model["dropout"] or None
    got_model["ignore_merges"] = bool(got_model["ignore_merges"])
    got_model["byte_fallback"] = bool(got_model["byte_fallback"])
    post = tj.get("post_processor")
    post_adds = _post_added_tokens(post) if isinstance(post, dict) else []
    out = [
        _section_row(
            "config.pre_tokenizer",
            tj.get("pre_tokenizer"),
            pre_tokenizer_json(ctx.ref.pattern),
            "pre_tokenizer",
        ),
        _section_row("config.decoder", tj.get("decoder"), DECODER_JSON, "decoder"),
        _section_row("config.normalizer", tj.get("normalizer"), None, "normalizer"),
        _section_row("config.bpe_model", got_model, want_model, "model settings"),
        _section_row("config.post_processor", post if post_adds else None, None, "post_processor"),
    ]
    out.append(_special_flags(ctx, tj))
    return out


def _special_flags(ctx: _Ctx, tj: dict[str, Any]) -> Row:
    bad, soft = [], []
    for t in tj.get("added_tokens", []):
        content = t.get("content")
        if content not in ctx.ids:
            continue  # extra or renamed tokens: conformance.static.surface
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


def _tokenizer_config_checks(ctx: _Ctx) -> list[Row]:
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
        row(
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
            f"model_max_length {max_len} truncates below {MIN_CONTEXT}",
            f"set model_max_length to at least {MIN_CONTEXT}",
        ),
        _loads_in_4x(tcfg),
    ]
    decoder = tcfg.get("added_tokens_decoder") or {}
    bad = [
        v.get("content")
        for v in decoder.values()
        if isinstance(v, dict)
        and v.get("content") in ctx.ids
        and (not v.get("special") or v.get("lstrip") or v.get("rstrip"))
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


def _loads_in_4x(tcfg: dict[str, Any]) -> Row:
    cls = tcfg.get("tokenizer_class")
    listed = isinstance(tcfg.get("extra_special_tokens"), list)
    if cls in CLASSES_4X and not listed:
        return Row("config.loads_in_4x", FILES, "pass", "ok")
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


def _remote_code_checks(ctx: _Ctx) -> list[Row]:
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


# ------------------------------------------------------------------------ chat
def check_chat_files(ctx: _Ctx) -> list[Row]:
    if ctx.dir is None:
        return [skip("chat", "no tokenizer directory")]
    tcfg = ctx.obj("tokenizer_config.json")
    inline, jinja = chat_template(tcfg, None)[0], ctx.files.get("chat_template.jinja")
    if ctx.template is None:
        return [
            Row(
                "chat.template_present",
                FILES,
                "warn",
                "no chat template: a base model (instruct checkpoints need one)",
                "export with `stacktok export` to ship the ChatML template",
            )
        ]
    out = [Row("chat.template_present", FILES, "pass", f"from {ctx.template_source}")]
    if inline is not None and jinja is not None:
        out.append(
            _same_template(
                "chat.template_files_agree",
                inline,
                jinja,
                "tokenizer_config.json chat_template and chat_template.jinja",
                "make both the exported template (transformers uses the .jinja file, tools that read "
                "tokenizer_config.json the other)",
            )
        )
    else:
        out.append(skip("chat.template_files_agree", f"one template only ({ctx.template_source})"))
    out.append(_template_sandboxed(ctx.template))
    out.append(
        row(
            "chat.generation_markers",
            _has_generation(ctx.template),
            "template has no {% generation %} markers: assistant-only loss trains on nothing (TRL PR#4201)",
            "wrap assistant content and <|end|> in {% generation %}...{% endgeneration %}",
        )
    )
    if ctx.gguf_ok():
        out.append(
            _same_template(
                "gguf.chat_template",
                ctx.gguf_value("tokenizer.chat_template"),
                ctx.template,
                f"the GGUF's tokenizer.chat_template and the HF one ({ctx.template_source})",
                ctx.gguf_fix,
            )
        )
    else:
        out.append(skip("gguf.chat_template", _no_gguf(ctx)))
    return out


SAMPLE_CHATS = (
    ((("system", "Be brief."), ("user", "2+2?"), ("assistant", "4")), False),
    ((("user", "weather?"), ("tool_call", '{"city": "Oslo"}'), ("tool_result", '{"c": -3}')), True),
    ((("user", "  spaced\r\n  "),), True),
)


def _same_template(check: str, a: Any, b: Any, what: str, fix: str) -> Row:
    """Identical text passes; different text that renders every sample chat identically warns."""
    if a == b:
        return Row(check, FILES, "pass", "ok")
    if not isinstance(a, str) or not isinstance(b, str):
        return Row(check, FILES, "fail", f"{what}: one of them is missing", fix)
    from conformance.core.template import render_template

    chats = [([{"role": r, "content": c} for r, c in chat], gen) for chat, gen in SAMPLE_CHATS]
    try:
        same = all(
            render_template(a, msgs, add_generation_prompt=gen)
            == render_template(b, msgs, add_generation_prompt=gen)
            for msgs, gen in chats
        )
    except Exception:  # noqa: BLE001 -- a template that cannot render differs (see chat.template_sandboxed)
        same = False
    if same:
        return Row(
            check, FILES, "warn", f"{what} differ in text but render the sample chats identically", fix
        )
    return Row(check, FILES, "fail", f"{what} differ and render chats differently", fix)


def _has_generation(template: str) -> bool:
    return "{% generation %}" in template.replace("{%-", "{%").replace("-%}", "%}")


SAMPLE_CHAT = (
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "2+2?"},
    {"role": "assistant", "content": "4"},
)


def _template_sandboxed(template: str) -> Row:
    """Render the template the way transformers does (immutable sandbox) on a plain conversation."""
    from conformance.core.template import render_template

    try:
        text = render_template(template, list(SAMPLE_CHAT), add_generation_prompt=False)
    except Exception as exc:  # noqa: BLE001 -- a template failing to render is the finding
        kind = type(exc).__name__
        why = "tries to reach Python internals" if kind == "SecurityError" else "fails to render"
        return Row(
            "chat.template_sandboxed",
            FILES,
            "fail",
            f"the chat template {why} in transformers' sandbox ({kind}: {str(exc)[:160]})",
            "use the exported chat template; a template must only render messages",
        )
    expect = render_text(list(SAMPLE_CHAT), add_generation_prompt=False)
    if text == expect:
        return Row("chat.template_sandboxed", FILES, "pass", "renders in the sandbox; plain chat as trained")
    return Row(
        "chat.template_sandboxed",
        FILES,
        "warn",
        f"renders a plain system/user/assistant chat as {text[:120]!r}, not the trained format "
        f"{expect[:80]!r}; conformance.chat decides per backend",
        "use the exported chat template",
    )


# ------------------------------------------------------------------------ gguf
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


def check_gguf(ctx: _Ctx) -> list[Row]:
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
        *([_gguf_rows(ctx, val)] if model else []),
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


def _gguf_rows(ctx: _Ctx, val: dict[str, Any]) -> Row:
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


def check_gguf_eog(exports: Exports, ref: StackTokenizer) -> list[Row]:
    """llama.cpp's own end-of-generation set must be exactly {<|eos|>, <|end|>}."""
    if exports.gguf is None:
        return [skip("gguf.eog", "no .gguf file", backend="llama.cpp")]
    try:
        from conformance.backends.llama_backend import LlamaCppTokenizer

        lt = LlamaCppTokenizer(exports.gguf)
    except (ImportError, BackendMissing):
        return [
            Row(
                "gguf.eog",
                "llama.cpp",
                "missing",
                "llama-cpp-python is not installed",
                "pip install 'stacktok[llama]'",
            )
        ]
    except Exception as exc:  # noqa: BLE001 -- llama.cpp refusing the file is a finding
        return [
            Row(
                "gguf.eog",
                "llama.cpp",
                "error",
                f"llama.cpp cannot load the GGUF ({exc})",
                "rebuild the GGUF",
            )
        ]
    eog = {i for i in range(lt.n_vocab) if lt.is_eog(i)}
    want = {ref.special_to_id["<|eos|>"], ref.special_to_id["<|end|>"]}
    return [
        row(
            "gguf.eog",
            eog == want,
            f"llama.cpp stops on {sorted(eog)}, want {sorted(want)}",
            "set eos=<|eos|>, eot=<|end|> and make no other special EOG",
            backend="llama.cpp",
        )
    ]


STATIC_CHECKS: tuple[Callable[[_Ctx], list[Row]], ...] = (
    check_provenance,
    check_config,
    check_chat_files,
    check_gguf,
)


def run_static(exports: Exports, ref: StackTokenizer) -> list[Row]:
    ctx = _Ctx(exports, ref)
    out: list[Row] = []
    for fn in STATIC_CHECKS:
        out += fn(ctx)
    out += check_gguf_eog(exports, ref)
    return out


# ------------------------------------------------------------ behaviour decides
def behaviour_proof(static: Sequence[Row], suite: Sequence[Row]) -> list[Row]:
    """Syntax warnings (:data:`BEHAVIOUR_JUDGED`) judged by the conformance rows of the backends
    that read the file: all pass -> stays a warning; any fails -> fail naming it; none ran -> fail."""
    out = []
    for r in static:
        judged = BEHAVIOUR_JUDGED.get(r.check)
        if r.status != "warn" or judged is None:
            out.append(r)
            continue
        readers, checks = readers_of("tokenizer.json"), judged
        proof = [s for s in suite if s.backend in readers and s.check in {f"conformance.{c}" for c in checks}]
        bad = [f"{s.check}[{s.backend}]" for s in proof if s.status in ("fail", "error")]
        ran = [s for s in proof if s.status == "pass"]
        if bad:
            out.append(
                Row(r.check, r.backend, "fail", f"{r.message}; behaviour differs: {', '.join(bad)}", r.fix)
            )
        elif not ran:
            out.append(
                Row(
                    r.check,
                    r.backend,
                    "fail",
                    f"{r.message}; no backend that reads it ({', '.join(readers)}) ran to show "
                    "it behaves the same",
                    "install tokenizers/transformers (pip install 'stacktok[hf]') and rerun, "
                    "or restore the section",
                )
            )
        else:
            who = sorted({s.backend for s in ran})
            out.append(
                Row(
                    r.check, r.backend, "warn", f"{r.message}; identical behaviour on {', '.join(who)}", r.fix
                )
            )
    return out
