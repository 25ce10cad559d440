"""The one-line failure every validator raises, and the small value helpers they share.

:func:`fail` raises :class:`~conformance.core.errors.InputError` as
``"<path>: <where>: <what is wrong>; <fix>"``; :func:`show` and :func:`first_line`
keep a quoted value or a library's message short enough for that one line.

Out of scope: what any particular file must hold (one module per file kind).
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from pathlib import Path
from typing import Any, NoReturn

from conformance.core.errors import InputError

#: the largest id tokenizers stores (``u32``)
U32_MAX = 2**32 - 1


def fail(path: Path | str, where: str, what: str, fix: str) -> NoReturn:
    raise InputError(path, where, what, fix)


def show(value: Any, limit: int = 60) -> str:
    """``repr(value)``, cut to ``limit`` characters: ``show("x" * 99, 8) == "'xxxx..."``."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def first_line(message: str, limit: int = 200) -> str:
    """The first non-blank line of a (library's) message, cut to ``limit`` characters."""
    lines = [line.strip() for line in str(message).splitlines() if line.strip()]
    line = lines[0] if lines else "(no message)"
    return line if len(line) <= limit else line[: limit - 3] + "..."


def is_int(value: Any) -> bool:
    """A JSON integer (``True`` is not one)."""
    return isinstance(value, int) and not isinstance(value, bool)


def rethrow_interrupts(exc: BaseException) -> None:
    if isinstance(exc, (KeyboardInterrupt, SystemExit)):
        raise exc


def need_object(path: Path, where: str, value: Any, fix: str) -> dict[str, Any]:
    """``value`` when it is a JSON object, else the failure naming ``where``."""
    if not isinstance(value, dict):
        fail(path, where, f"must be a JSON object, got {type(value).__name__} {show(value, 40)}", fix)
    return value


def unknown_keys(path: Path, where: str, obj: dict[str, Any], known: Iterable[str], what: str) -> None:
    """A key that looks like a renamed known key (the known one absent) is an error; a key with no
    near match may be a newer library's field -- the library's own load decides it."""
    known = tuple(known)
    for key in obj:
        if key not in known:
            close = [k for k in difflib.get_close_matches(key, known, n=1) if k not in obj]
            if not close:
                continue
            hint = f"did you mean {close[0]!r}? "
            fail(
                path,
                f"{where}.{key}" if where else key,
                f"unknown key {key!r} ({what} knows: {', '.join(known)})",
                f"{hint}rename or remove it",
            )
