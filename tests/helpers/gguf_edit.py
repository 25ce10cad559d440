"""Rewrite a vocabulary-only GGUF's metadata with gguf-py's own writer, as a converter would.

``rewrite_gguf(src, dst, edit)`` reads every key of ``src`` (``stacktok_export.gguf.reader``),
lets ``edit`` change the ``{key: value}`` dict in place (a new key takes its type from the value:
a string, an int, a bool, a list of strings) and writes ``dst`` with ``gguf.GGUFWriter``, keeping
each existing key's GGUF type.

Out of scope: tensors (the files are vocabulary-only); checking the result (the gate does).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from stacktok_export.gguf.reader import read_gguf_file


def rewrite_gguf(src: Path, dst: Path, edit: Callable[[dict[str, Any]], None]) -> None:
    """``src``'s metadata (vocab-only: no tensors), ``edit``ed, written by gguf-py's writer to ``dst``."""
    import gguf

    fields = {k: v for k, v in read_gguf_file(src)[0].items() if not k.startswith("GGUF.")}
    values = {k: v for k, (v, _) in fields.items()}
    edit(values)
    writer = gguf.GGUFWriter(dst, values.pop("general.architecture"))
    for key, value in values.items():
        kind = fields[key][1] if key in fields else _kind(value)
        if kind.startswith("ARRAY["):
            sub = gguf.GGUFValueType[kind[6:-1]]
            writer.add_key_value(key, value, gguf.GGUFValueType.ARRAY, sub_type=sub)
        else:
            writer.add_key_value(key, value, gguf.GGUFValueType[kind])
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def _kind(value: Any) -> str:
    """The GGUF type name of a new key's value."""
    if isinstance(value, bool):
        return "BOOL"
    if isinstance(value, int):
        return "UINT32"
    if isinstance(value, list):
        return "ARRAY[STRING]"
    return "STRING"
