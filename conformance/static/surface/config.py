"""``tokenizer_config.json``, ``special_tokens_map.json`` and ``added_tokens.json``: every token
they name is an artifact special, at the artifact's id where they give one.

``added_tokens_decoder`` (when present; transformers 5.x re-saves drop it) lists specials at
their ids; named ``*_token`` values and ``additional_special_tokens`` /
``extra_special_tokens`` (a list, or the name -> token object transformers 5.x writes) name
specials; ``added_tokens.json`` (``{content: id}``) adds only specials at their ids.

Out of scope: the special ids' roles (bos/eos/pad: ``conformance.static.config``) and the
flags (``conformance.static.hf_files``).
"""

from __future__ import annotations

from typing import Any

from conformance.static.surface.common import Diff, Expected, compare_ids, is_int, shorten

_NOT_A_TOKEN = object()


def _token_text(value: Any) -> Any:
    """A token's text from ``"<x>"`` or ``{"content": "<x>", ...}``; ``_NOT_A_TOKEN`` otherwise."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        return value.get("content")  # a dict without str content is a malformed token (None or odd)
    return _NOT_A_TOKEN


def _check_token(where: str, value: Any, exp: Expected, *, hint: str = "") -> list[Diff]:
    text = _token_text(value)
    if isinstance(text, str) and text in exp.specials:
        return []
    if not isinstance(text, str):
        return [Diff(f"{where} is {shorten(value)}, not a token string or {{content}}")]
    want = hint or f"no such special (its specials: {exp.special_list()})"
    instead = f"set it to {hint}" if hint else "use an artifact special"
    return [
        Diff(
            f"{where}: file has {text!r}, artifact has {want}", remove=f"{where} = {text!r}", instead=instead
        )
    ]


def _named_hint(key: str, exp: Expected) -> str:
    """``eos_token`` -> ``special '<|eos|>' (id 32760)`` when the artifact has that special."""
    guess = f"<|{key[: -len('_token')]}|>"
    return f"special {guess!r} (id {exp.specials[guess]})" if guess in exp.specials else ""


def _named_diffs(cfg: dict[str, Any], exp: Expected) -> list[Diff]:
    out: list[Diff] = []
    for key, value in cfg.items():
        if isinstance(key, str) and key.endswith("_token") and _token_text(value) is not _NOT_A_TOKEN:
            out += _check_token(key, value, exp, hint=_named_hint(key, exp))
    return out


def _list_diffs(key: str, value: Any, exp: Expected) -> list[Diff]:
    if isinstance(value, dict):
        items = [(f"{key}.{name}", v) for name, v in value.items()]
    elif isinstance(value, list):
        items = [(f"{key}[{n}]", v) for n, v in enumerate(value)]
    else:
        return [Diff(f"{key} is {shorten(value)}, not a list or {{name: token}} object")]
    return [d for where, v in items for d in _check_token(where, v, exp)]


def _decoder_diffs(decoder: Any, exp: Expected) -> list[Diff]:
    if not isinstance(decoder, dict):
        return [Diff(f"added_tokens_decoder is {shorten(decoder)}, not an {{id: token}} object")]
    out: list[Diff] = []
    by_id: dict[int, list[str]] = {}
    for key, value in decoder.items():
        text = _token_text(value)
        if not (isinstance(key, str) and key.isascii() and key.isdigit()) or not isinstance(text, str):
            out.append(Diff(f"added_tokens_decoder[{key!r}] is {shorten(value)}, not an id -> {{content}}"))
            continue
        by_id.setdefault(int(key), []).append(text)
    out += compare_ids(
        "added_tokens_decoder id",
        by_id,
        exp.id_to_special,
        show=repr,
        describe=exp.describe,
        remove="the added token",
        partial=True,  # tokenizer.json's added_tokens define the specials; the decoder may list fewer
    )
    return out


def config_diffs(cfg: Any, exp: Expected) -> list[Diff]:
    if not isinstance(cfg, dict):
        return [Diff(f"the top level is {shorten(cfg)}, not an object")]
    out: list[Diff] = []
    if cfg.get("added_tokens_decoder") is not None:
        out += _decoder_diffs(cfg["added_tokens_decoder"], exp)
    out += _named_diffs(cfg, exp)
    for key in ("additional_special_tokens", "extra_special_tokens"):
        if cfg.get(key) is not None:
            out += _list_diffs(key, cfg[key], exp)
    return out


def added_tokens_json_diffs(data: Any, exp: Expected) -> list[Diff]:
    """``added_tokens.json`` (``{content: id}``, which transformers still loads and adds): every
    entry must be an artifact special at its id -- anything else becomes a token no export has."""
    if not isinstance(data, dict):
        return [Diff(f"added_tokens.json is {shorten(data)}, not a {{content: id}} object")]
    got: dict[int, list[str]] = {}
    for content, token_id in data.items():
        got.setdefault(token_id if is_int(token_id) else -1, []).append(content)
    want = {i: s for s, i in exp.specials.items() if i in got}
    return compare_ids(
        "added_tokens.json id",
        got,
        want,
        show=repr,
        describe=exp.describe,
        remove="the added token",
        partial=True,
    )
