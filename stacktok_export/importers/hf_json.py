"""Read a Hugging Face ``tokenizer.json`` whose model is a byte-level BPE.

What is followed: ``model`` of type BPE (``vocab``, ``merges`` as ``"a b"`` strings or pairs,
``ignore_merges``); ``pre_tokenizer`` made of isolated ``Split`` regexes (a ``Sequence`` of
them), ``Digits``, and one ``ByteLevel`` last (``use_regex=True`` adds GPT-2's split there);
``added_tokens`` (``special=True`` -> specials, ``special=False`` -> specials matched in
ordinary text, ``in_text``); ``post_processor`` ``TemplateProcessing`` / ``RobertaProcessing``
/ ``BertProcessing`` for BOS/EOS. A ``tokenizer_config.json`` beside it, when present, gives
``add_bos_token`` / ``add_eos_token`` (over the post-processor), ``bos_token`` / ``eos_token``
/ ``pad_token`` (the roles) and ``chat_template`` (else ``chat_template.jinja``).

A vocabulary entry that is not a GPT-2 byte-level string can never come out of ByteLevel: it
is kept as a special no text reaches. Everything else is refused naming the component: a
non-BPE model, ``byte_fallback``, subword prefixes/suffixes, dropout, a normalizer, another
pre-tokenizer or split behaviour, ``add_prefix_space``, added tokens with
``lstrip``/``rstrip``/``single_word``.

Files are read bounded (``limits``: ``tokenizer.json`` and its config by their limits, the
template by the template's); the config and template beside ``tokenizer.json`` only when they are
the folder's own files (a link out of it, to a secret, is refused).

Out of scope: ``decoder`` (decoding follows the token bytes), truncation and padding.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..split.bytelevel import from_chars
from ..util.limits import current
from .common import (
    GPT2_PATTERN,
    WHOLE_TEXT,
    ImportRefused,
    check_entries,
    dense_table,
    folder_roots,
    load_json,
    merge_ids,
    read_file,
    role_ids,
    vocabulary,
)

_PROCESSORS_BOS_EOS = ("RobertaProcessing", "BertProcessing")


def _load(path: Path, *, limit: int, roots: Sequence[Path] = ()) -> dict[str, Any]:
    data = load_json(path, limit=limit, roots=roots)
    if not isinstance(data, dict):
        raise ImportRefused(path, "JSON", "not an object")
    return data


def _model(path: Path, model: Any) -> dict[str, Any]:
    if not isinstance(model, dict) or model.get("type", "BPE") != "BPE":
        kind = model.get("type") if isinstance(model, dict) else model
        raise ImportRefused(path, "model", f"type {kind!r}; only a byte-level BPE imports")
    if model.get("byte_fallback"):
        raise ImportRefused(path, "model.byte_fallback", "true (SentencePiece-style bytes, not byte-level)")
    for key in ("continuing_subword_prefix", "end_of_word_suffix"):
        if model.get(key):
            raise ImportRefused(path, f"model.{key}", f"{model[key]!r}; a byte-level BPE has none")
    if model.get("dropout"):
        raise ImportRefused(
            path, "model.dropout", f"{model['dropout']!r}; a frozen reference is deterministic"
        )
    return model


def _splits(path: Path, pre: Any, where: str = "pre_tokenizer") -> list[Any]:
    """The pre-tokenizer as a flat list: regex strings, then the string ``"ByteLevel"``."""
    if pre is None:
        return []
    kind = pre.get("type") if isinstance(pre, dict) else None
    if kind == "Sequence":
        return [
            s for i, p in enumerate(pre.get("pretokenizers", [])) for s in _splits(path, p, f"{where}[{i}]")
        ]
    if kind == "ByteLevel":
        if pre.get("add_prefix_space"):
            raise ImportRefused(
                path, f"{where}.add_prefix_space", "true changes the text (a space before it)"
            )
        return ([GPT2_PATTERN] if pre.get("use_regex", True) else []) + ["ByteLevel"]
    if kind == "Digits":
        return [r"\p{N}" if pre.get("individual_digits") else r"\p{N}+"]
    if kind == "Split":
        return [_split_regex(path, pre, where)]
    raise ImportRefused(path, where, f"pre-tokenizer {kind!r}; only regex splits and ByteLevel import")


def _split_regex(path: Path, pre: dict[str, Any], where: str) -> str:
    import regex

    if pre.get("behavior") != "Isolated" or pre.get("invert"):
        raise ImportRefused(
            path,
            where,
            f"Split behavior {pre.get('behavior')!r} invert={pre.get('invert')}; only Isolated imports",
        )
    pattern = pre.get("pattern") or {}
    if "Regex" in pattern:
        return str(pattern["Regex"])
    if "String" in pattern:
        return regex.escape(str(pattern["String"]))
    raise ImportRefused(path, f"{where}.pattern", f"{pattern!r} is neither Regex nor String")


def _patterns(path: Path, data: dict[str, Any]) -> list[str]:
    flat = _splits(path, data.get("pre_tokenizer"))
    if "ByteLevel" not in flat:
        raise ImportRefused(
            path, "pre_tokenizer", "no ByteLevel step: the model would not see GPT-2 byte characters"
        )
    if flat.count("ByteLevel") > 1 or flat[-1] != "ByteLevel":
        raise ImportRefused(
            path, "pre_tokenizer", "ByteLevel before a split: the split would see byte characters"
        )
    return flat[:-1] or [WHOLE_TEXT]


def _normalizer(path: Path, norm: Any) -> None:
    if norm is None or (
        isinstance(norm, dict) and norm.get("type") == "Sequence" and not norm.get("normalizers")
    ):
        return
    kind = norm.get("type") if isinstance(norm, dict) else norm
    raise ImportRefused(path, "normalizer", f"{kind!r} changes the text before the BPE; none imports")


def _tokens(path: Path, data: dict[str, Any], vocab: dict[str, int]):
    """(bytes per id, specials, in_text) from the model vocabulary and ``added_tokens``."""
    by_id: dict[int, bytes] = {}
    specials: dict[str, int] = {}
    for text, i in vocab.items():
        if type(i) is not int or i < 0:
            raise ImportRefused(path, "model.vocab", f"the id of {text[:40]!r} is {str(i)[:40]!r}, not an id")
        try:
            by_id[i] = from_chars(text)
        except KeyError:  # not a byte-level string: an id no text reaches
            by_id[i] = text.encode("utf-8", errors="surrogatepass")
            specials[text] = i
    in_text: set[str] = set()
    added_tokens = data.get("added_tokens") or []
    if not isinstance(added_tokens, list) or not all(isinstance(a, dict) for a in added_tokens):
        raise ImportRefused(path, "added_tokens", "is not a list of objects")
    check_entries(path, "added_tokens", len(added_tokens))
    for k, added in enumerate(added_tokens):
        content, i = added.get("content"), added.get("id")
        for flag in ("lstrip", "rstrip", "single_word"):
            if added.get(flag):
                raise ImportRefused(
                    path, f"added_tokens[{k}].{flag}", f"true for {content!r}; not representable"
                )
        if not isinstance(content, str) or type(i) is not int:
            raise ImportRefused(path, f"added_tokens[{k}]", "needs a string content and an integer id")
        specials.pop(next((s for s, j in specials.items() if j == i), None), None)
        by_id[i] = content.encode("utf-8")
        specials[content] = i
        if not added.get("special"):
            in_text.add(content)
    return dense_table(path, by_id), specials, in_text


def _processor_flags(path: Path, proc: Any, specials: dict[str, int]) -> tuple[bool, bool, int | None]:
    """(adds BOS, adds EOS, the BOS id) from ``post_processor``."""
    kind = proc.get("type") if isinstance(proc, dict) else None
    if proc is None or kind == "ByteLevel":
        return False, False, None
    if kind == "Sequence":
        flags = [_processor_flags(path, p, specials) for p in proc.get("processors", [])]
        bos = next((b for _, _, b in flags if b is not None), None)
        return any(f[0] for f in flags), any(f[1] for f in flags), bos
    if kind in _PROCESSORS_BOS_EOS:
        cls = proc.get("cls") or [None, None]
        return True, True, cls[1]
    if kind == "TemplateProcessing":
        single = proc.get("single") or []
        ends = [single[0], single[-1]] if single else [{}, {}]
        first, last = ("SpecialToken" in e for e in ends)
        bos = None
        if first:
            tid = ends[0]["SpecialToken"]["id"]
            ids = (proc.get("special_tokens") or {}).get(tid, {}).get("ids") or [specials.get(tid)]
            bos = ids[0]
        return first, last, bos
    raise ImportRefused(
        path, "post_processor", f"{kind!r}; only TemplateProcessing/Roberta/Bert/ByteLevel import"
    )


def _content(value: Any) -> str | None:
    if isinstance(value, dict):
        value = value.get("content")
    return value if isinstance(value, str) else None


def _config(path: Path) -> tuple[dict[str, Any], str | None]:
    """``tokenizer_config.json`` beside the file (``{}`` when absent) and its chat template."""
    roots, limits = folder_roots(path.parent), current()
    cfg_path = path.parent / "tokenizer_config.json"
    cfg = _load(cfg_path, limit=limits.config_json, roots=roots) if os.path.lexists(cfg_path) else {}
    template = cfg.get("chat_template")
    if isinstance(template, list):
        named = (t for t in template if isinstance(t, dict) and t.get("name") == "default")
        template = next((t.get("template") for t in named), None)
    jinja = path.parent / "chat_template.jinja"
    if template is None and os.path.lexists(jinja):
        raw = read_file(jinja, limit=limits.template, roots=roots)
        try:
            template = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ImportRefused(jinja, "template", f"is not UTF-8 (byte {exc.start})") from None
    return cfg, template if isinstance(template, str) else None


def read_hf(
    path: str | os.PathLike[str], *, pattern: str | None = None, name: str | None = None
) -> dict[str, Any]:
    """The ``from_vocab`` keywords of a byte-level BPE ``tokenizer.json`` (or its folder)."""
    path = Path(path)
    roots: tuple[Path, ...] = ()  # the file the user named is read wherever it is
    if path.is_dir():
        path, roots = path / "tokenizer.json", folder_roots(path)
    data = _load(path, limit=current().tokenizer_json, roots=roots)
    model = _model(path, data.get("model"))
    _normalizer(path, data.get("normalizer"))
    patterns = [pattern] if pattern is not None else _patterns(path, data)
    vocab = model.get("vocab") or {}
    if not isinstance(vocab, dict):
        raise ImportRefused(path, "model.vocab", f"is a JSON {type(vocab).__name__}, not an object")
    check_entries(path, "model.vocab", len(vocab))
    if not isinstance(model.get("merges") or [], list):
        raise ImportRefused(path, "model.merges", "is not a list")
    check_entries(path, "model.merges", len(model.get("merges") or []))
    table, specials, in_text = _tokens(path, data, vocab)
    add_bos, add_eos, bos_id = _processor_flags(path, data.get("post_processor"), specials)
    cfg, template = _config(path)
    add_bos = bool(cfg.get("add_bos_token", add_bos))
    add_eos = bool(cfg.get("add_eos_token", add_eos))
    roles = role_ids(specials, {r: _content(cfg.get(f"{r}_token")) for r in ("bos", "eos", "pad")})
    if bos_id is not None and "bos" not in roles:
        roles["bos"] = bos_id
    return vocabulary(
        tokens=table,
        merges=merge_ids(path, model.get("merges") or [], vocab),
        specials=specials,
        patterns=patterns,
        ignore_merges=bool(model.get("ignore_merges", False)),
        roles=roles,
        add_bos=add_bos,
        add_eos=add_eos,
        chat_template=template,
        in_text=in_text,
        name=name or (path.parent.name if path.name == "tokenizer.json" else path.stem),
    )
