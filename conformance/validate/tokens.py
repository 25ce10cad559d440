"""Token entries as transformers and tokenizers spell them: a string or ``{"content": ..., flags}``.

Shared by ``tokenizer.json`` (``added_tokens``, every flag required) and the transformers files
(``added_tokens_decoder``, ``*_token`` keys, token lists; flags optional).

Out of scope: whether a token is the artifact's (the gate's static checks).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from conformance.validate.common import fail, need_object, show

TOKEN_FLAGS = ("special", "lstrip", "rstrip", "normalized", "single_word")


def check_token_entry(path: Path, where: str, entry: Any, *, require_flags: bool) -> dict[str, Any]:
    """``{"content": str, <flag>: bool...}``; ``require_flags`` as tokenizers requires them."""
    entry = need_object(path, where, entry, "write it as {'content': ..., 'special': ..., ...}")
    if not isinstance(entry.get("content"), str):
        fail(
            path,
            f"{where}.content",
            f"must be a string, got {show(entry.get('content'))}",
            "set the token text",
        )
    for flag in TOKEN_FLAGS:
        if flag not in entry and require_flags:
            fail(
                path, f"{where}.{flag}", "is missing (tokenizers requires every flag)", f"add {flag!r}: false"
            )
        if flag in entry and not isinstance(entry[flag], bool):
            fail(
                path,
                f"{where}.{flag}",
                f"must be true or false, got {show(entry[flag])}",
                "use a JSON boolean",
            )
    return entry


def check_token_value(path: Path, where: str, value: Any, *, allow_null: bool) -> None:
    """A token string, a token entry, or (``allow_null``) null."""
    if value is None and allow_null or isinstance(value, str):
        return
    if isinstance(value, dict):
        check_token_entry(path, where, value, require_flags=False)
        return
    fail(
        path,
        where,
        f"must be a token string{', null' if allow_null else ''} or {{'content': ...}}, got {show(value)}",
        "write the token text",
    )


def check_token_list(path: Path, where: str, value: Any) -> None:
    """Null, or a list of token values."""
    if value is None:
        return
    if not isinstance(value, list):
        fail(path, where, f"must be a list of tokens, got {show(value)}", "write it as a JSON list")
    for i, item in enumerate(value):
        check_token_value(path, f"{where}[{i}]", item, allow_null=False)
