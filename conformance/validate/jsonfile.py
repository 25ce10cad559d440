"""Strict reading: a file's bytes, UTF-8 text and JSON value, each failure naming where.

- :func:`read_bytes`: the bytes, or "cannot be read" with the OS reason (a dangling symlink, a
  directory, a git-lfs pointer or an empty file named as such: ``conformance.validate.download``;
  a link out of the checkpoint, a FIFO or device, a file over its size limit:
  ``stacktok_export.util.untrusted``);
- :func:`decode_utf8`: UTF-8 text, or the first bad byte with its offset and line;
- :func:`parse_json`: the JSON value of bytes already read, or the line and column of a syntax
  error (or where a truncated file ends), the key that appears twice in one object, or the
  ``NaN``/``Infinity`` (or a number that overflows to infinity) Rust and JS reject.

Out of scope: what the JSON must hold (``tokenizer_json``, ``configs``); JSONL user data
(``conformance.core.fixtures``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

from conformance.validate.common import fail
from conformance.validate.download import refuse_placeholder, unreadable
from stacktok_export.util import limits
from stacktok_export.util.untrusted import read_untrusted


def read_bytes(path: Path, *, roots: Sequence[Path] = (), limit: int | None = None) -> bytes:
    """The file's bytes; a dangling symlink, a directory, a git-lfs pointer or an empty file fails,
    and so does a symlink out of ``roots``, a FIFO or device, or a file over ``limit`` bytes
    (default: the limit for a configuration file) -- refused before it is opened
    (``stacktok_export.util.untrusted``)."""
    name = Path(path)
    if name.is_dir() or (name.is_symlink() and not name.exists()):
        unreadable(path, OSError("not a file"))
    data = read_untrusted(path, roots=roots, limit=limits.current().config_json if limit is None else limit)
    refuse_placeholder(path, data)
    return data


def decode_utf8(path: Path, data: bytes) -> str:
    """``data`` as UTF-8, or :class:`InputError` naming the first bad byte, its offset and line."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        fail(
            path,
            f"byte offset {exc.start} (line {line})",
            f"byte 0x{data[exc.start]:02x} is not valid UTF-8 ({exc.reason})",
            "save the file as UTF-8",
        )


class _DuplicateKey(Exception):
    def __init__(self, key: str) -> None:
        self.key = key


def _unique_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _DuplicateKey(key)
            seen.add(key)
    return out


def _reject_constant(name: str) -> NoReturn:
    raise ValueError(f"{name} is not JSON")


def _finite_float(text: str) -> float:
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise ValueError(f"the number {text[:40]} overflows a 64-bit float (Python reads it as infinity)")
    return value


def parse_json(path: Path, data: bytes) -> Any:
    """Parse the bytes of ``path`` strictly; :class:`InputError` names the byte, line/column or key."""
    text = decode_utf8(path, data)
    try:
        return json.loads(
            text, object_pairs_hook=_unique_pairs, parse_constant=_reject_constant, parse_float=_finite_float
        )
    except json.JSONDecodeError as exc:
        if exc.pos >= len(text.rstrip()):
            fail(
                path,
                f"line {exc.lineno} column {exc.colno}",
                f"not valid JSON ({exc.msg}): it ends early, the file is truncated",
                "download or copy it again",
            )
        fail(
            path,
            f"line {exc.lineno} column {exc.colno}",
            f"not valid JSON ({exc.msg})",
            "fix the JSON syntax (a UTF-8 BOM must be removed)"
            if text.startswith("\ufeff")
            else "fix the JSON syntax",
        )
    except _DuplicateKey as exc:
        fail(
            path,
            f"key {exc.key!r}",
            "appears twice in one object (parsers silently keep only the last)",
            "keep exactly one",
        )
    except ValueError as exc:  # NaN / Infinity
        fail(path, "value", str(exc), "use a number or null (Rust and JS parsers reject NaN/Infinity)")
    except RecursionError:
        fail(path, "structure", "is nested too deeply to parse", "flatten the JSON")


def read_json(path: Path) -> Any:
    """:func:`read_bytes` then :func:`parse_json`."""
    return parse_json(path, read_bytes(path))
