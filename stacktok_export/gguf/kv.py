"""The key/value header of a GGUF file (v2/v3, little-endian), read without its tensors.

gguf-py's ``GGUFReader`` keeps a numpy view of every part of every field: on the 128,256
tokens and 280,147 merges of Llama-3 that is ~30 s on this machine. A tokenizer needs only the
header's strings and small arrays, so :func:`read_kv` walks the header once with ``struct``
(string arrays as ``list[bytes]``, numeric arrays as ``numpy`` arrays) and stops at the first
tensor description. tests/test_import.py and tests/test_gguf_reader.py check it field by field
against ``GGUFReader``.

:func:`read_fields` is the same walk shaped as gguf-py's reader answers (``{key: (contents,
type name)}`` with its ``GGUF.*`` pseudo-fields, tensor shapes), for the gate: it answers the
ordinary well-formed file itself and hands every other file to ``GGUFReader``, so a file the
library refuses is refused with the library's words and an odd one is read the library's way.

Every read goes through :class:`~stacktok_export.gguf.header.Cursor`, which checks each declared
count and length against the file before anything is built, and the library is handed only a
file :func:`~stacktok_export.gguf.header.scan` has walked whole (``GGUFReader`` checks nothing
first: a 2**40-element array declared in 200 bytes takes it hours and gigabytes).

Out of scope: tensor data; big-endian files and GGUF v1 (:func:`read_kv` refuses them as
:class:`GGUFFormatError`, :func:`read_fields` hands them to ``GGUFReader``).
"""

from __future__ import annotations

import hashlib
import os
import struct
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .header import (
    ARRAY,
    SCALARS,
    STRING,
    TYPE_NAMES,
    Cursor,
    GGUFHeaderError,
    byte_order,
    counts,
    mapped,
    scan,
    tensor_count_fits,
    tensor_info,
)

_SCALARS = {t: "<" + code for t, code in SCALARS.items()}
_STRING, _ARRAY = STRING, ARRAY


class GGUFFormatError(ValueError):
    """The file is not a GGUF header this reader knows (the message says what)."""


def _value(cur: Cursor, vtype: int, where: str, depth: int = 0) -> Any:
    if vtype == _STRING:
        return cur.string(where)
    if vtype == _ARRAY:
        itype, count = cur.array_head(where, depth)
        if itype == _STRING:
            return [cur.string(where) for _ in range(count)]
        if itype in _SCALARS:
            dt = np.dtype(_SCALARS[itype])
            arr = np.frombuffer(cur.buf, dtype=dt, count=count, offset=cur.pos).copy()
            cur.pos += dt.itemsize * count
            return arr
        return [_value(cur, itype, where, depth + 1) for _ in range(count)]
    if vtype not in _SCALARS:
        raise GGUFFormatError(f"unknown value type {vtype}")
    return cur.take(SCALARS[vtype], where)


def _header(buf: Any, path: os.PathLike[str] | str) -> tuple[Cursor, int, int, int]:
    """A cursor past the fixed header, and its version, tensor count and key count (checked)."""
    if bytes(buf[:4]) != b"GGUF":
        raise GGUFFormatError("no GGUF magic at the start of the file")
    if byte_order(buf) != "<":
        version = struct.unpack_from("<I", buf, 4)[0] if len(buf) >= 8 else "(none)"
        raise GGUFFormatError(f"GGUF version {version} (this reader knows 2 and 3, little-endian)")
    cur = Cursor(buf, path)
    return (cur, *counts(cur))


def read_kv(path: str | os.PathLike[str], *, roots: Sequence[Path] = ()) -> dict[str, Any]:
    """Every metadata key of a GGUF file -> its value (strings as ``bytes``).

    Raises :class:`GGUFFormatError`, :class:`~stacktok_export.gguf.header.GGUFHeaderError` (a
    declared size the file cannot hold) or ``UntrustedFileError`` (not a regular file, or a
    symlink out of ``roots``); all are ``ValueError``.
    """
    with mapped(path, roots=roots) as buf:
        cur, _, _, n_kv = _header(buf, path)
        out: dict[str, Any] = {}
        for i in range(n_kv):
            try:
                key = cur.key()
            except UnicodeDecodeError:
                raise GGUFFormatError(f"key {i} is not UTF-8") from None
            out[key] = _value(cur, cur.value_type(key), key)
        return out


_TYPE_NAMES = TYPE_NAMES  # gguf-py's GGUFValueType names, by the value type number the file holds


class _NotOrdinary(Exception):
    """The file needs gguf-py's own reading (odd, or malformed): never leaves this module."""


Fields = dict[str, tuple[Any, str]]
Shapes = dict[str, tuple[int, ...]]


def read_fields(
    path: str | os.PathLike[str], *, roots: Sequence[Path] = ()
) -> tuple[Fields, Shapes, str | None]:
    """``({key: (contents, type name)}, {tensor: shape}, sha256)`` -- the digest of the file's
    bytes only for a file without tensors (a vocab-only GGUF; None beside gigabytes of weights).

    Equal to what ``gguf.GGUFReader(path)`` gives through ``field.contents()``, ``field.types``
    and ``tensor.shape`` -- checked against it field by field (tests/test_gguf_reader.py).
    A file this walk does not find ordinary (big-endian, nested arrays, a duplicate key or tensor,
    a tensor type gguf-py does not know, data past the end, any decoding error) is read by
    ``GGUFReader`` itself, which raises its own error or gives its own answer -- once
    :func:`~stacktok_export.gguf.header.scan` has found every declared size within the file
    (else :class:`~stacktok_export.gguf.header.GGUFHeaderError`, a ``ValueError``). ``path``
    must be a regular file, a symlink only into ``roots`` (``UntrustedFileError`` otherwise).
    """
    with mapped(path, roots=roots) as buf:
        try:
            return _ordinary(buf, path)
        except GGUFHeaderError:
            raise
        except (_NotOrdinary, struct.error, UnicodeDecodeError, ValueError, OverflowError, KeyError):
            pass
        scan(buf, path=path)  # before the library builds a view per declared element
    import gguf

    reader = gguf.GGUFReader(path)
    fields: dict[str, tuple[Any, str]] = {}
    for name, field in reader.fields.items():
        kinds = [t.name for t in field.types]
        kind = (kinds[0] + "".join(f"[{k}]" for k in kinds[1:])) if kinds else "?"
        fields[name] = (field.contents(), kind)
    tensors = {t.name: tuple(int(x) for x in t.shape) for t in reader.tensors}
    return fields, tensors, None if tensors else hashlib.sha256(memoryview(reader.data)).hexdigest()


def _ordinary(buf: Any, path: os.PathLike[str] | str) -> tuple[Fields, Shapes, str | None]:
    from gguf.constants import GGML_QUANT_SIZES, GGUF_DEFAULT_ALIGNMENT, GGMLQuantizationType

    cur, version, n_tensors, n_kv = _header(buf, path)  # GGUFFormatError: the library's turn
    fields: dict[str, tuple[Any, str]] = {
        "GGUF.version": (version, "UINT32"),
        "GGUF.tensor_count": (n_tensors, "UINT64"),
        "GGUF.kv_count": (n_kv, "UINT64"),
    }
    for _ in range(n_kv):
        key = cur.key()
        if key in fields:
            raise _NotOrdinary
        fields[key] = _field(cur, cur.take("I", key), key)
    tensor_count_fits(cur, n_tensors)
    infos = [tensor_info(cur, i) for i in range(n_tensors)]
    align = GGUF_DEFAULT_ALIGNMENT
    if "general.alignment" in fields:
        value, kind = fields["general.alignment"]
        if kind != "UINT32" or value == 0 or value & (value - 1):
            raise _NotOrdinary
        align = value
    start = cur.pos + (-cur.pos % align)
    tensors: dict[str, tuple[int, ...]] = {}
    for raw_name, dims, raw_type, offset in infos:
        name = raw_name.decode("utf-8")
        if name in tensors:
            raise _NotOrdinary
        block, size = GGML_QUANT_SIZES[GGMLQuantizationType(raw_type)]  # KeyError/ValueError: odd
        n = 1
        for d in dims:
            n *= d
        if start + offset + n * size // block > len(buf):
            raise _NotOrdinary
        tensors[name] = dims
    return fields, tensors, None if tensors else hashlib.sha256(buf).hexdigest()


def _field(cur: Cursor, vtype: int, key: str) -> tuple[Any, str]:
    if vtype == _STRING:
        return cur.string(key).decode("utf-8"), "STRING"
    if vtype in _SCALARS:
        return cur.take(SCALARS[vtype], key), _TYPE_NAMES[vtype]
    if vtype != _ARRAY:
        raise _NotOrdinary
    itype, count = cur.array_head(key)
    if count == 0:
        if itype not in _TYPE_NAMES:
            raise _NotOrdinary
        return [], "ARRAY"
    if itype == _STRING:
        return [cur.string(key).decode("utf-8") for _ in range(count)], "ARRAY[STRING]"
    if itype not in _SCALARS:
        raise _NotOrdinary  # nested arrays: gguf-py flattens them its own way
    dt = np.dtype(_SCALARS[itype])
    values = np.frombuffer(cur.buf, dtype=dt, count=count, offset=cur.pos).tolist()
    cur.pos += dt.itemsize * count
    return values, f"ARRAY[{_TYPE_NAMES[itype]}]"
