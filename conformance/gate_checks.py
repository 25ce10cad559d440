"""The gate's static checks: provenance, checkpoint config, chat template files, GGUF metadata.

Each check reads files in the directory (never writes) and returns
:class:`Check` results with a one-line fix. Behaviour (ids, decode, chat
rendering) is checked by the conformance runner, not here; these checks find
the configuration faults that break serving even when ids are right:
double BOS (vLLM PR#16976), eos lists that do not stop at end of turn
(vllm#4180), pad == eos (TRL#1623), ``clean_up_tokenization_spaces``
(transformers PR#44914), 5.x-only configs (transformers#47553), templates
without ``{% generation %}`` (TRL PR#4201), ``llama-bpe`` pre-tokenizer side
effects, wrong GGUF token types.

Out of scope: model weights and architecture config beyond ``vocab_size``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stacktok_export import StackTokenizer
from stacktok_export.export.hf import DECODER_JSON, FINGERPRINT_KEY, hf_files, pre_tokenizer_json
from stacktok_export.export.tiktoken_fmt import tiktoken_text

from .layout import Exports

MIN_CONTEXT = 8192
GOOD_GGUF_PRE = ("smaug-bpe", "dbrx")  # the Llama-3 regex without ignore_merges / add-BOS
CLASSES_4X = ("PreTrainedTokenizerFast",)
TOKEN_TYPE_NORMAL, TOKEN_TYPE_CONTROL = 1, 3


@dataclass
class Check:
    check: str  # e.g. "config.double_bos"
    backend: str  # "files" for static checks, else a backend name
    status: str  # pass | fail | warn | missing | declared | skip
    message: str
    fix: str = ""


class _Ctx:
    """Everything a static check needs, read once."""

    def __init__(self, exports: Exports, ref: StackTokenizer) -> None:
        self.x = exports
        self.ref = ref
        self.ids = dict(ref.special_to_id)
        self.dir = exports.hf_dir
        self.files: dict[str, Any] = {}
        if self.dir is not None:
            for name in (
                "tokenizer.json",
                "tokenizer_config.json",
                "config.json",
                "generation_config.json",
                "special_tokens_map.json",
            ):
                self.files[name] = _read_json(self.dir / name)
            jinja = self.dir / "chat_template.jinja"
            self.files["chat_template.jinja"] = jinja.read_text(encoding="utf-8") if jinja.is_file() else None
        self.gguf = _read_gguf(exports.gguf) if exports.gguf else None

    def get(self, name: str) -> Any:
        return self.files.get(name)


def _read_json(path: Path) -> Any:
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        return {"__error__": f"{path.name} is not valid JSON ({exc})"}


def _read_gguf(path: Path) -> dict[str, tuple[Any, str]] | dict[str, str]:
    """``{key: (value, type name)}`` or ``{"__error__": why}``."""
    try:
        import gguf
    except ImportError:
        return {"__missing__": "gguf is not installed; pip install 'stacktok[gguf]'"}
    try:
        reader = gguf.GGUFReader(path)
    except Exception as exc:  # gguf-py raises bare ValueError/struct errors on bad files
        return {"__error__": f"{path.name} is not a readable GGUF ({exc})"}
    out: dict[str, Any] = {}
    for name, fld in reader.fields.items():
        kind = fld.types[0].name if fld.types else "?"
        if kind == "ARRAY" and len(fld.types) > 1:
            kind = f"ARRAY[{fld.types[1].name}]"
        out[name] = (fld.contents(), kind)
    return out


def _gguf_unreadable(g: dict[str, Any]) -> bool:
    return "__error__" in g or "__missing__" in g


def _c(check: str, ok: bool, message: str, fix: str, *, warn: bool = False) -> Check:
    status = "pass" if ok else ("warn" if warn else "fail")
    return Check(check, "files", status, "ok" if ok else message, "" if ok else fix)


# ------------------------------------------------------------------ provenance
def check_provenance(ctx: _Ctx) -> list[Check]:
    out = []
    cfg = ctx.get("tokenizer_config.json") or {}
    fp = cfg.get(FINGERPRINT_KEY) if isinstance(cfg, dict) else None
    if fp is None:
        out.append(
            _c(
                "provenance.fingerprint",
                False,
                "tokenizer_config.json has no stacktok_fingerprint; cannot tell which artifact it came from",
                "export with `stacktok export` (behavioural checks below still decide)",
                warn=True,
            )
        )
    else:
        out.append(
            _c(
                "provenance.fingerprint",
                fp == ctx.ref.fingerprint,
                f"fingerprint {fp[:12]}... is not the artifact's {ctx.ref.fingerprint[:12]}...",
                "this directory was exported from a different artifact: re-export from the frozen one",
            )
        )
    if ctx.gguf and not _gguf_unreadable(ctx.gguf):
        gfp = ctx.gguf.get("stacktok.fingerprint", (None, ""))[0]
        out.append(
            _c(
                "provenance.gguf_fingerprint",
                gfp == ctx.ref.fingerprint,
                f"GGUF stacktok.fingerprint is {gfp!r:.20}, not the artifact's",
                "rebuild the GGUF with `stacktok export`",
            )
        )
    out.append(_files_identical(ctx))
    return out


def _expected_files(ctx: _Ctx) -> dict[Path, bytes]:
    """What `stacktok export` writes for each export file present in the directory."""
    expected: dict[Path, bytes] = {}
    if ctx.dir is not None:
        for name, data in hf_files(ctx.ref).items():
            expected[ctx.dir / name] = data
    if ctx.x.tiktoken:
        expected[ctx.x.tiktoken] = tiktoken_text(ctx.ref).encode("ascii")
    if ctx.x.gguf:
        try:
            from stacktok_export.export.gguf_fmt import gguf_bytes

            expected[ctx.x.gguf] = gguf_bytes(ctx.ref)
        except ImportError:  # gguf not installed: the GGUF checks report it
            pass
    return expected


def _files_identical(ctx: _Ctx) -> Check:
    expected = _expected_files(ctx)
    differ = sorted(p.name for p, data in expected.items() if p.is_file() and p.read_bytes() != data)
    return _c(
        "provenance.files",
        not differ,
        f"not byte-identical to `stacktok export`: {', '.join(differ)} (falling back to behavioural checks)",
        "re-export, or rely on the behavioural checks if the edit was intended",
        warn=True,
    )


# ------------------------------------------------------------- checkpoint config
def _token_id(ctx: _Ctx, value: Any) -> int | None:
    if isinstance(value, dict):
        value = value.get("content")
    if isinstance(value, str):
        return ctx.ids.get(value, -1)
    return value if isinstance(value, int) else None


def check_config(ctx: _Ctx) -> list[Check]:
    if ctx.dir is None:
        return [Check("config", "files", "skip", "no tokenizer.json in the directory", "")]
    out: list[Check] = []
    for name in ("tokenizer.json", "tokenizer_config.json", "config.json", "generation_config.json"):
        data = ctx.get(name)
        if isinstance(data, dict) and "__error__" in data:
            out.append(_c(f"config.{name}", False, data["__error__"], f"fix the JSON syntax of {name}"))
    out += _vocab_checks(ctx) + _special_id_checks(ctx) + _bos_checks(ctx)
    out += _tokenizer_json_checks(ctx) + _tokenizer_config_checks(ctx)
    return out


def _ok_dict(data: Any) -> dict[str, Any]:
    return data if isinstance(data, dict) and "__error__" not in data else {}


def _vocab_checks(ctx: _Ctx) -> list[Check]:
    cfg = _ok_dict(ctx.get("config.json"))
    if not cfg:
        return []
    v = cfg.get("vocab_size")
    if v is None and isinstance(cfg.get("text_config"), dict):
        v = cfg["text_config"].get("vocab_size")
    return [
        _c(
            "config.vocab_size",
            v == ctx.ref.vocab_size,
            f"config.json vocab_size is {v}, the tokenizer has {ctx.ref.vocab_size} ids",
            f"set vocab_size to {ctx.ref.vocab_size} (the embedding must cover every id)",
        )
    ]


def _special_id_checks(ctx: _Ctx) -> list[Check]:
    bos, eos, pad, end = (ctx.ids[s] for s in ("<|bos|>", "<|eos|>", "<|pad|>", "<|end|>"))
    tcfg, cfg, gen = (
        _ok_dict(ctx.get(n)) for n in ("tokenizer_config.json", "config.json", "generation_config.json")
    )
    seen: dict[str, list[tuple[str, Any]]] = {"bos": [], "eos": [], "pad": []}
    for key in seen:
        if key + "_token" in tcfg:
            seen[key].append(("tokenizer_config.json", _token_id(ctx, tcfg[key + "_token"])))
        for name, data in (("config.json", cfg), ("generation_config.json", gen)):
            if key + "_token_id" in data:
                seen[key].append((name, data[key + "_token_id"]))
        if ctx.gguf and not _gguf_unreadable(ctx.gguf):
            gkey = "padding" if key == "pad" else key
            if f"tokenizer.ggml.{gkey}_token_id" in ctx.gguf:
                seen[key].append(("GGUF", ctx.gguf[f"tokenizer.ggml.{gkey}_token_id"][0]))
    want = {"bos": {bos}, "eos": {eos, end}, "pad": {pad}}
    out = []
    for key, places in seen.items():
        bad = [(n, v) for n, v in places if not _id_in(v, want[key])]
        out.append(
            _c(
                f"config.{key}_id",
                not bad,
                f"{key} id disagrees: " + ", ".join(f"{n}={v}" for n, v in bad),
                f"set every {key} id to {sorted(want[key])[0]} ({'<|' + key + '|>'})",
            )
        )
    gen_eos = gen.get("eos_token_id")
    if gen:
        ids = set(gen_eos if isinstance(gen_eos, list) else [gen_eos])
        out.append(
            _c(
                "config.eos_stops_turns",
                {eos, end} <= ids,
                f"generation_config eos_token_id is {gen_eos}; serving will not stop at <|end|>",
                f"set generation_config.json eos_token_id to [{eos}, {end}] (vllm#4180)",
            )
        )
    pads = {p for _, value in seen["pad"] for p in (value if isinstance(value, list) else [value])}
    out.append(
        _c(
            "config.pad_not_eos",
            not (pads & {eos}),
            "pad id equals eos id: TRL masks eos out of the loss (TRL#1623)",
            f"use <|pad|> ({pad}) as the pad token",
        )
    )
    return out


def _id_in(value: Any, allowed: set[int]) -> bool:
    values = value if isinstance(value, list) else [value]
    return bool(values) and all(v in allowed for v in values)


def _bos_checks(ctx: _Ctx) -> list[Check]:
    tcfg, tj = _ok_dict(ctx.get("tokenizer_config.json")), _ok_dict(ctx.get("tokenizer.json"))
    adders = []
    if tcfg.get("add_bos_token") or tcfg.get("add_eos_token"):
        adders.append("tokenizer_config add_bos_token/add_eos_token")
    post = tj.get("post_processor")
    if post and _post_adds_tokens(post):
        adders.append(f"tokenizer.json post_processor {post.get('type')}")
    if ctx.gguf and not _gguf_unreadable(ctx.gguf):
        if ctx.gguf.get("tokenizer.ggml.add_bos_token", (False,))[0]:
            adders.append("GGUF tokenizer.ggml.add_bos_token")
        if ctx.gguf.get("tokenizer.ggml.pre", ("",))[0] in ("llama-bpe", "llama3"):
            adders.append("GGUF pre llama-bpe (llama.cpp forces add-BOS)")
    return [
        _c(
            "config.no_double_bos",
            not adders,
            "BOS/EOS is added outside the chat template by: " + "; ".join(adders),
            "the template already adds <|bos|>: set add_bos_token false, "
            "drop the post-processor (vLLM PR#16976)",
        )
    ]


def _post_adds_tokens(post: dict[str, Any]) -> bool:
    kind = post.get("type")
    if kind == "Sequence":
        return any(_post_adds_tokens(p) for p in post.get("processors", []))
    if kind == "ByteLevel":
        return False
    return True  # TemplateProcessing, BertProcessing, RobertaProcessing all add tokens


def _tokenizer_json_checks(ctx: _Ctx) -> list[Check]:
    tj = _ok_dict(ctx.get("tokenizer.json"))
    if not tj:
        return []
    model = tj.get("model") or {}
    out = [
        _c(
            "config.pre_tokenizer",
            tj.get("pre_tokenizer") == pre_tokenizer_json(ctx.ref.pattern),
            "pre_tokenizer is not Sequence[Split(artifact pattern, Isolated), "
            "ByteLevel(no prefix space, no regex)]",
            "restore the exported pre_tokenizer",
        ),
        _c(
            "config.decoder",
            tj.get("decoder") == DECODER_JSON,
            f"decoder is {tj.get('decoder')}",
            "use the ByteLevel decoder",
        ),
        _c(
            "config.normalizer",
            tj.get("normalizer") is None,
            f"normalizer {tj.get('normalizer')} rewrites input",
            "set normalizer to null",
        ),
        _c(
            "config.post_processor",
            tj.get("post_processor") is None,
            f"post_processor {(tj.get('post_processor') or {}).get('type')} is set",
            "set post_processor to null",
        ),
        _c(
            "config.bpe_model",
            model.get("type") == "BPE"
            and not model.get("ignore_merges")
            and model.get("dropout") in (None, 0)
            and not model.get("byte_fallback"),
            "model must be BPE with ignore_merges false, no dropout, no byte_fallback",
            "restore the exported model section",
        ),
    ]
    bad = []
    for t in tj.get("added_tokens", []):
        if t.get("content") in ctx.ids and (
            not t.get("special") or t.get("normalized") or t.get("lstrip") or t.get("rstrip")
        ):
            bad.append(t.get("content"))
        if t.get("content") in ctx.ids and t.get("id") != ctx.ids[t["content"]]:
            bad.append(f"{t.get('content')}@{t.get('id')}")
    missing = set(ctx.ids) - {t.get("content") for t in tj.get("added_tokens", [])}
    out.append(
        _c(
            "config.special_flags",
            not bad and not missing,
            f"special tokens with wrong id/flags: {bad}; missing: {sorted(missing)}",
            "specials must be added tokens with special=true, normalized/lstrip/rstrip false, at their ids",
        )
    )
    return out


def _tokenizer_config_checks(ctx: _Ctx) -> list[Check]:
    tcfg = _ok_dict(ctx.get("tokenizer_config.json"))
    if not tcfg:
        return [
            _c(
                "config.tokenizer_config",
                False,
                "tokenizer_config.json is missing",
                "export the directory with `stacktok export`",
            )
        ]
    out = [
        _c(
            "config.clean_up_spaces",
            tcfg.get("clean_up_tokenization_spaces") is False,
            f"clean_up_tokenization_spaces is {tcfg.get('clean_up_tokenization_spaces')!r}: "
            "decode rewrites 'x != y'",
            "set clean_up_tokenization_spaces to false (transformers PR#44914)",
        ),
        _c(
            "config.model_max_length",
            (tcfg.get("model_max_length") or 0) >= MIN_CONTEXT,
            f"model_max_length {tcfg.get('model_max_length')} truncates below {MIN_CONTEXT}",
            f"set model_max_length to at least {MIN_CONTEXT}",
        ),
        _c(
            "config.loads_in_4x",
            tcfg.get("tokenizer_class") in CLASSES_4X
            and not isinstance(tcfg.get("extra_special_tokens"), list),
            f"tokenizer_class {tcfg.get('tokenizer_class')!r} / list extra_special_tokens "
            "only load in transformers 5.x",
            "use tokenizer_class PreTrainedTokenizerFast and additional_special_tokens (transformers#47553)",
        ),
    ]
    decoder = tcfg.get("added_tokens_decoder") or {}
    bad = [
        v.get("content")
        for v in decoder.values()
        if isinstance(v, dict)
        and v.get("content") in ctx.ids
        and (not v.get("special") or v.get("normalized") or v.get("lstrip") or v.get("rstrip"))
    ]
    out.append(
        _c(
            "config.special_flags_config",
            not bad,
            f"added_tokens_decoder flags wrong for {bad}",
            "special=true, normalized/lstrip/rstrip false for every special",
        )
    )
    return out


# ------------------------------------------------------------------------ chat
def check_chat_files(ctx: _Ctx) -> list[Check]:
    tcfg = _ok_dict(ctx.get("tokenizer_config.json"))
    inline, jinja = tcfg.get("chat_template"), ctx.get("chat_template.jinja")
    out = []
    if inline is None and jinja is None:
        return [_c("chat.template_present", False, "no chat template", "export with `stacktok export`")]
    if inline is not None and jinja is not None:
        out.append(
            _c(
                "chat.template_files_agree",
                inline == jinja,
                "tokenizer_config.json chat_template and chat_template.jinja differ",
                "make both the exported template (transformers prefers the .jinja file)",
            )
        )
    template = jinja if jinja is not None else inline
    has_gen = isinstance(template, str) and "{% generation %}" in template.replace("{%-", "{%").replace(
        "-%}", "%}"
    )
    out.append(
        _c(
            "chat.generation_markers",
            has_gen,
            "template has no {% generation %} markers: assistant-only loss trains on nothing (TRL PR#4201)",
            "wrap assistant content and <|end|> in {% generation %}...{% endgeneration %}",
        )
    )
    if ctx.gguf and not _gguf_unreadable(ctx.gguf):
        gt = ctx.gguf.get("tokenizer.chat_template", (None,))[0]
        out.append(
            _c(
                "gguf.chat_template",
                gt == template,
                "GGUF chat template differs from the HF one",
                "rebuild the GGUF with `stacktok export`",
            )
        )
    return out


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


def check_gguf(ctx: _Ctx) -> list[Check]:
    g = ctx.gguf
    if g is None:
        return []
    if "__missing__" in g:
        return [Check("gguf.readable", "files", "missing", g["__missing__"], "pip install 'stacktok[gguf]'")]
    if "__error__" in g:
        return [_c("gguf.readable", False, g["__error__"], "re-export the GGUF with `stacktok export`")]
    wrong = [
        f"{k}: {g[k][1] if k in g else 'missing'} (want {t})"
        for k, t in _GGUF_TYPES.items()
        if k not in g or g[k][1] != t
    ]
    ref, ids = ctx.ref, ctx.ids
    val = {k: v for k, (v, _) in g.items()}
    types = val.get("tokenizer.ggml.token_type") or []
    n_normal = len(ref.token_bytes())
    want_types = [TOKEN_TYPE_NORMAL] * n_normal + [TOKEN_TYPE_CONTROL] * len(ids)
    from stacktok_export.export.gguf_fmt import merge_strings

    return [
        _c("gguf.metadata_types", not wrong, "; ".join(wrong[:4]), "rebuild the GGUF with `stacktok export`"),
        _c(
            "gguf.model",
            val.get("general.architecture") == "llama" and val.get("tokenizer.ggml.model") == "gpt2",
            "architecture/tokenizer model must be llama/gpt2",
            "rebuild the GGUF",
        ),
        _c(
            "gguf.pre",
            val.get("tokenizer.ggml.pre") in GOOD_GGUF_PRE,
            f"tokenizer.ggml.pre is {val.get('tokenizer.ggml.pre')!r}: "
            + (
                "llama-bpe also turns on ignore_merges and add-BOS"
                if val.get("tokenizer.ggml.pre") in ("llama-bpe", "llama3")
                else "that name selects a different split regex"
            ),
            f"set tokenizer.ggml.pre to {GOOD_GGUF_PRE[0]!r}",
        ),
        _c(
            "gguf.vocab",
            len(val.get("tokenizer.ggml.tokens") or []) == ref.vocab_size,
            f"{len(val.get('tokenizer.ggml.tokens') or [])} tokens, want {ref.vocab_size}",
            "rebuild the GGUF",
        ),
        _c(
            "gguf.token_types",
            list(types) == want_types,
            "token types wrong: specials must be CONTROL (3), others NORMAL (1); "
            "USER_DEFINED is parsed in untrusted text",
            "rebuild the GGUF with `stacktok export`",
        ),
        _c(
            "gguf.merges",
            list(val.get("tokenizer.ggml.merges") or []) == merge_strings(ref),
            "merges differ from the artifact's (count or rank order)",
            "rebuild the GGUF",
        ),
        _c(
            "gguf.special_ids",
            (
                val.get("tokenizer.ggml.bos_token_id"),
                val.get("tokenizer.ggml.eos_token_id"),
                val.get("tokenizer.ggml.padding_token_id"),
                val.get("tokenizer.ggml.eot_token_id"),
            )
            == (ids["<|bos|>"], ids["<|eos|>"], ids["<|pad|>"], ids["<|end|>"]),
            "bos/eos/pad/eot ids differ from the artifact's",
            "rebuild the GGUF",
        ),
        _c(
            "gguf.add_bos",
            val.get("tokenizer.ggml.add_bos_token") is False
            and val.get("tokenizer.ggml.add_eos_token") is False,
            "GGUF adds BOS/EOS: the template already adds <|bos|>",
            "set add_bos_token/add_eos_token false",
        ),
    ]


def check_gguf_eog(exports: Exports, ref: StackTokenizer) -> list[Check]:
    """llama.cpp's own end-of-generation set must be exactly {<|eos|>, <|end|>}."""
    if exports.gguf is None:
        return []
    try:
        from stacktok_export.export.gguf_fmt import LlamaCppTokenizer

        lt = LlamaCppTokenizer(exports.gguf)
    except ImportError:
        return [
            Check(
                "gguf.eog",
                "llama.cpp",
                "missing",
                "llama-cpp-python is not installed",
                "pip install 'stacktok[llama]'",
            )
        ]
    except Exception as exc:  # llama.cpp refusing the file is a finding
        return [
            Check(
                "gguf.eog", "llama.cpp", "fail", f"llama.cpp cannot load the GGUF ({exc})", "rebuild the GGUF"
            )
        ]
    eog = {i for i in range(ref.vocab_size) if lt.is_eog(i)}
    want = {ref.special_to_id["<|eos|>"], ref.special_to_id["<|end|>"]}
    ok = eog == want
    return [
        Check(
            "gguf.eog",
            "llama.cpp",
            "pass" if ok else "fail",
            "ok" if ok else f"llama.cpp stops on {sorted(eog)}, want {sorted(want)}",
            "" if ok else "set eos=<|eos|>, eot=<|end|> and make no other special EOG",
        )
    ]


STATIC_CHECKS: tuple[Callable[[_Ctx], list[Check]], ...] = (
    check_provenance,
    check_config,
    check_chat_files,
    check_gguf,
)


def run_static(exports: Exports, ref: StackTokenizer) -> list[Check]:
    ctx = _Ctx(exports, ref)
    out: list[Check] = []
    for fn in STATIC_CHECKS:
        out += fn(ctx)
    out += check_gguf_eog(exports, ref)
    return out
