"""What every surface comparison shares: the artifact's surface, one difference, the verdict row.

:class:`Expected` is the artifact's id layout computed once (ordinary ids' bytes and
byte-level strings, the specials, the GGUF token list); a comparison returns :class:`Diff`
values; :func:`verdict` turns them into one row naming the first :data:`SHOWN` and the
total; :func:`guarded` makes a file of an unexpected shape a difference, never an exception.

Out of scope: reading any format (``tokenizer_json``, ``config``, ``gguf``, ``tiktoken``
in this package) except the JSON read of :func:`json_row`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from conformance.core.expect import is_ours, ordinary_bytes
from conformance.core.layout import file_json
from conformance.core.rows import FILES, Row, skip
from stacktok_export import StackTokenizer
from stacktok_export.split.bytelevel import from_chars, to_chars

T = TypeVar("T")
SHOWN = 5  # differences named in a message; the total is always given
REEXPORT = "re-export with `stacktok export`"
TOKEN_TYPE_NORMAL, TOKEN_TYPE_CONTROL, TOKEN_TYPE_USER_DEFINED = 1, 3, 4


@dataclass(frozen=True)
class Diff:
    text: str  # one difference, naming the id or key
    remove: str = ""  # what the file defines that the artifact does not (named in the fix)
    instead: str = ""  # the alternative to removing it


class Expected:
    """The artifact's surface, computed once (any layout: ordinary ids need not come first)."""

    def __init__(self, ref: StackTokenizer) -> None:
        #: ordinary (non-special) id -> its bytes / its byte-level string, in id order
        self.ordinary_by_id = ordinary_bytes(ref)
        self.chars_by_id = {i: to_chars(b) for i, b in self.ordinary_by_id.items()}
        self.specials = dict(ref.special_to_id)
        self.id_to_special = {i: s for s, i in self.specials.items()}
        self.vocab_size = ref.vocab_size
        self.in_text = frozenset(ref.in_text)
        self.ours = is_ours(ref)
        self.gguf_tokens = [
            self.chars_by_id[i] if i in self.chars_by_id else self.id_to_special.get(i, "")
            for i in range(self.vocab_size)
        ]
        self.gguf_types = [self._gguf_type(i) for i in range(self.vocab_size)]

    def _gguf_type(self, token_id: int) -> int:
        if token_id in self.chars_by_id:
            return TOKEN_TYPE_NORMAL
        in_text = self.id_to_special.get(token_id) in self.in_text
        return TOKEN_TYPE_USER_DEFINED if in_text else TOKEN_TYPE_CONTROL

    @property
    def ordinary_count(self) -> int:
        return len(self.ordinary_by_id)

    def describe(self, token_id: int) -> str:
        """What the artifact has at ``token_id``."""
        if token_id in self.ordinary_by_id:
            return f"{self.chars_by_id[token_id]!r} = {self.ordinary_by_id[token_id]!r}"
        if token_id in self.id_to_special:
            return f"special {self.id_to_special[token_id]!r}"
        return f"no id {token_id} (ids are 0..{self.vocab_size - 1})"

    def special_list(self) -> str:
        return ", ".join(self.specials)


def shorten(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def show_chars(text: str) -> str:
    """A byte-level string and the bytes it stands for."""
    try:
        return f"{text!r} = {from_chars(text)!r}"
    except KeyError:
        return f"{text!r} (not a byte-level string)"


def compare_ids(
    where: str,
    got: Mapping[int, list[T]],
    want: Mapping[int, T],
    *,
    show: Callable[[T], str],
    describe: Callable[[int], str],
    remove: str,
    partial: bool = False,
) -> list[Diff]:
    """Id-by-id differences between ``got`` (id -> every value the file has there) and ``want``.

    ``where`` names the id space (``added_tokens id``, ``rank``); ``remove`` names what a value
    the artifact lacks is (``the added token``), for the fix; ``partial``: ids the file leaves
    out are not differences.
    """
    out: list[Diff] = []
    for token_id in sorted(got.keys() | want.keys()):
        values = got.get(token_id, [])
        if (token_id in want and values == [want[token_id]]) or (partial and not values):
            continue
        found = " and ".join(show(v) for v in values) or "nothing"
        text = f"{where} {token_id}: file has {found}, artifact has {describe(token_id)}"
        extra = [v for v in values if token_id not in want or (v != want[token_id] and len(values) > 1)]
        what = f"{remove} {show(extra[0])} ({where} {token_id})" if extra else ""
        out.append(Diff(text, remove=what))
    return out


def verdict(check: str, name: str, diffs: list[Diff], *, fix: str) -> Row:
    if not diffs:
        return Row(check, FILES, "pass", "ok")
    shown = "; ".join(d.text for d in diffs[:SHOWN])
    more = f"; ... ({len(diffs) - SHOWN} more)" if len(diffs) > SHOWN else ""
    message = f"{name}: {len(diffs)} difference(s) from the artifact: {shown}{more}"
    first = next((d for d in diffs if d.remove), None)
    if first is not None:
        instead = f" or {first.instead}" if first.instead else ""
        fix = (
            f"{REEXPORT}, or remove {first.remove} from {name}{instead}: "
            "the artifact does not define it, so the reference cannot certify it"
        )
    return Row(check, FILES, "fail", message, fix)


def guarded(
    name: str, compare: Callable[[Any, Expected], list[Diff]], data: Any, exp: Expected
) -> list[Diff]:
    """``compare(data, exp)``; a value of a shape the comparison did not foresee is a difference."""
    try:
        return compare(data, exp)
    except (TypeError, ValueError, KeyError, AttributeError, IndexError, OverflowError) as exc:
        return [Diff(f"{name} has an unexpected shape ({type(exc).__name__}: {exc})")]


def json_row(
    check: str,
    hf_dir: Path | None,
    name: str,
    exp: Expected,
    compare: Callable[[Any, Expected], list[Diff]],
    *,
    fix: str,
    files: Any = None,
) -> Row:
    if hf_dir is None:
        return skip(check, "no Hugging Face files (tokenizer.json) in the directory")
    path = hf_dir / name
    if not path.is_file():
        return skip(check, f"{name} is absent from {hf_dir}")
    try:
        data = file_json(path, files)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        return Row(check, FILES, "fail", f"{name} is not readable JSON ({exc})", f"{REEXPORT} ({name})")
    return verdict(check, name, guarded(name, compare, data, exp), fix=fix)


def as_warning(r: Row, why: str) -> Row:
    """A difference no loader we run acts on: a warning that says why, not a failure."""
    if r.status != "fail":
        return r
    return Row(r.check, r.backend, "warn", f"{r.message} ({why})", r.fix)
