"""The transformers and checkpoint JSON files: the types their loaders expect.

- ``tokenizer_config.json``: inline chat templates, ``added_tokens_decoder``, ``*_token`` keys,
  ``additional_special_tokens``/``extra_special_tokens``, ``model_max_length``,
  ``tokenizer_class``, ``auto_map``;
- ``special_tokens_map.json``, ``added_tokens.json``, ``chat_template.json``;
- ``config.json``, ``generation_config.json``: objects, ``vocab_size`` a positive int,
  ``*_token_id`` an int, null or a list of ints (also inside ``text_config``), both within
  32-bit token ids.

Each ``check_*`` takes the value ``conformance.validate.jsonfile`` parsed; :data:`JSON_CHECKS`
names them in the order validation runs them.

Out of scope: whether ids, tokens and templates equal the artifact's (the gate's static
checks); security of ``auto_map``/remote code.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from conformance.validate.common import U32_MAX, fail, is_int, need_object, show
from conformance.validate.template import check_inline_templates, validate_template
from conformance.validate.tokens import check_token_entry, check_token_list, check_token_value

CONFIG_FILES = ("config.json", "generation_config.json")
_DECIMAL = re.compile(r"[0-9]+")


def check_tokenizer_config(path: Path, value: Any) -> None:
    data = need_object(path, "top level", value, "tokenizer_config.json must be one JSON object")
    if "chat_template" in data:
        check_inline_templates(path, data["chat_template"])
    decoder = data.get("added_tokens_decoder")
    if decoder is not None:
        decoder = need_object(path, "added_tokens_decoder", decoder, 'write it as {"id": {"content": ...}}')
        for key, entry in decoder.items():
            if not _DECIMAL.fullmatch(key):
                fail(path, f"added_tokens_decoder[{key!r}]", "key is not a decimal token id", "use the id")
            check_token_entry(path, f"added_tokens_decoder[{key!r}]", entry, require_flags=False)
    for key, token in data.items():
        if key.endswith("_token") and not key.startswith("add_"):
            check_token_value(path, key, token, allow_null=True)
    check_token_list(path, "additional_special_tokens", data.get("additional_special_tokens"))
    _check_extra_special(path, data.get("extra_special_tokens"))
    _check_scalars(path, data)


def _check_extra_special(path: Path, value: Any) -> None:
    if isinstance(value, dict):
        for name, token in value.items():
            check_token_value(path, f"extra_special_tokens[{name!r}]", token, allow_null=False)
    else:
        check_token_list(path, "extra_special_tokens", value)


def _check_scalars(path: Path, data: dict[str, Any]) -> None:
    limit = data.get("model_max_length")
    if "model_max_length" in data and (isinstance(limit, bool) or not isinstance(limit, (int, float))):
        fail(path, "model_max_length", f"must be a number, got {show(limit)}", "set it to e.g. 8192")
    if "tokenizer_class" in data and not isinstance(data["tokenizer_class"], str):
        fail(
            path,
            "tokenizer_class",
            f"must be a string, got {show(data['tokenizer_class'])}",
            "use 'PreTrainedTokenizerFast'",
        )
    if "auto_map" in data:
        need_object(path, "auto_map", data["auto_map"], "remove auto_map (stacktok needs no custom code)")


def check_special_tokens_map(path: Path, value: Any) -> None:
    data = need_object(path, "top level", value, "special_tokens_map.json must be one JSON object")
    for key, token in data.items():
        if isinstance(token, list):
            check_token_list(path, key, token)
        else:
            check_token_value(path, key, token, allow_null=True)


def check_added_tokens_json(path: Path, value: Any) -> None:
    data = need_object(path, "top level", value, "added_tokens.json must be {token: id}")
    for token, token_id in data.items():
        if not is_int(token_id) or token_id < 0:
            fail(path, f"[{token!r}]", f"id {show(token_id)} is not a non-negative integer", "use the id")


def check_chat_template_json(path: Path, value: Any) -> None:
    data = need_object(path, "top level", value, 'write {"chat_template": "..."}')
    if not isinstance(data.get("chat_template"), str):
        fail(path, "chat_template", "must be a template string", 'write {"chat_template": "..."}')
    validate_template(path, "chat_template", data["chat_template"])


def check_model_config(path: Path, value: Any) -> None:
    """``config.json`` / ``generation_config.json``: an object, ``vocab_size``, ``*_token_id``."""
    data = need_object(path, "top level", value, f"{Path(path).name} must be one JSON object")
    _check_config_ids(path, "", data)
    text = data.get("text_config")
    if isinstance(text, dict):
        _check_config_ids(path, "text_config.", text)


def _check_config_ids(path: Path, prefix: str, data: dict[str, Any]) -> None:
    if "vocab_size" in data:
        size = data["vocab_size"]
        if not is_int(size) or size <= 0:
            fail(path, f"{prefix}vocab_size", f"must be a positive integer, got {show(size)}", "set it")
        if size > U32_MAX + 1:
            fail(
                path,
                f"{prefix}vocab_size",
                f"{show(size)} is more ids than any loader can index (token ids are 32-bit)",
                "set it to the embedding's row count",
            )
    for key, value in data.items():
        if not key.endswith("_token_id"):
            continue
        ok = value is None or is_int(value) or isinstance(value, list) and all(map(is_int, value))
        if not ok:
            fail(
                path,
                f"{prefix}{key}",
                f"must be an integer id, null or a list of ids, got {show(value)}",
                "write the token id(s)",
            )
        if value is not None and max(value if isinstance(value, list) else [value], default=0) > U32_MAX:
            fail(path, f"{prefix}{key}", f"{show(value)} is beyond 32-bit token ids", "write the token id(s)")


#: the JSON files beside ``tokenizer.json``, in the order validation checks them
JSON_CHECKS: tuple[tuple[str, Callable[[Path, Any], None]], ...] = (
    ("tokenizer_config.json", check_tokenizer_config),
    ("special_tokens_map.json", check_special_tokens_map),
    ("added_tokens.json", check_added_tokens_json),
    ("chat_template.json", check_chat_template_json),
    ("config.json", check_model_config),
    ("generation_config.json", check_model_config),
)
