"""The one JSON editor: read a file, change it, write it back in the style it was written in.

``edit_json(path, fn)`` calls ``fn`` on the parsed value, which it changes in place (what ``fn``
returns is ignored, so ``lambda c: c.pop("key")`` works);
``set=`` / ``delete=`` take dotted paths (``"model.merges.3"``: list items by index). The file is
written back with the indent, ``ensure_ascii`` and trailing newline the original had, unless a
test passes ``indent=`` / ``ensure_ascii=`` / ``sort_keys=`` to plant a layout on purpose.

Example::

    edit_json(ckpt / "tokenizer_config.json", set={"add_bos_token": True})
    edit_json(ckpt / "tokenizer.json", lambda t: t["model"]["merges"].reverse())

Out of scope: JSONL fixtures (:mod:`tests.helpers.data`), non-JSON files (write them directly).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

_KEEP: Any = object()  # "as the original file had it"


def edit_json(
    path: Path,
    fn: Callable[[Any], object] | None = None,
    *,
    set: Mapping[str, Any] | None = None,  # noqa: A002 -- reads as the verb it is
    delete: Sequence[str] = (),
    indent: int | None = _KEEP,
    ensure_ascii: bool = _KEEP,
    sort_keys: bool = False,
) -> Any:
    """Edit the JSON file at ``path`` in place; returns the value written."""
    text = path.read_text(encoding="utf-8")
    data = json.loads(text)
    if fn is not None:
        fn(data)
    for dotted, value in (set or {}).items():
        parent, key = _walk(data, dotted)
        parent[key] = value
    for dotted in delete:
        parent, key = _walk(data, dotted)
        del parent[key]
    style = _style(text)
    dumped = json.dumps(
        data,
        indent=style["indent"] if indent is _KEEP else indent,
        ensure_ascii=style["ensure_ascii"] if ensure_ascii is _KEEP else ensure_ascii,
        sort_keys=sort_keys,
    )
    path.write_text(dumped + style["newline"], encoding="utf-8")
    return data


def json_edit(name: str, fn: Callable[[Any], Any] | None = None, **options: Any) -> Callable[[Path], None]:
    """``edit_json`` of ``DIR/name`` as a checkpoint edit (for tables of planted faults)."""

    def edit(directory: Path) -> None:
        edit_json(directory / name, fn, **options)

    return edit


def _walk(data: Any, dotted: str) -> tuple[Any, Any]:
    *parents, last = dotted.split(".")
    node = data
    for part in parents:
        node = node[_key(node, part)]
    return node, _key(node, last)


def _key(node: Any, part: str) -> Any:
    return int(part) if isinstance(node, list) else part


def _style(text: str) -> dict[str, Any]:
    """The indent, ``ensure_ascii`` and trailing newline ``text`` was written with."""
    match = re.search(r"\n( +)\S", text)
    return {
        "indent": len(match.group(1)) if match else None,
        "ensure_ascii": text.isascii(),
        "newline": "\n" if text.endswith("\n") else "",
    }
