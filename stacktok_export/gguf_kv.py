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

Out of scope: tensor data; big-endian files and GGUF v1 (:func:`read_kv` refuses them as
:class:`GGUFFormatError`, :func:`read_fields` hands them to ``GGUFReader``).
"""

from __future__ import annotations

import hashlib
import mmap
import os
import struct
from typing import Any

import numpy as np

_SCALARS = {
    0: "<B",
    1: "<b",
    2: "<H",
    3: "<h",
    4: "<I",
    5: "<i",
    6: "<f",
    7: "<?",
    10: "<Q",
    11: "<q",
    12: "<d",
}
_STRING, _ARRAY = 8, 9


class GGUFFormatError(ValueError):
    """The file is not a GGUF header this reader knows (the message says what)."""


class _Cursor:
    def __init__(self, buf: Any) -> None:
        self.buf, self.pos = buf, 0

    def take(self, fmt: str) -> Any:
        (value,) = struct.unpack_from(fmt, self.buf, self.pos)
        self.pos += struct.calcsize(fmt)
        return value

    def string(self) -> bytes:
        n = self.take("<Q")
        start, self.pos = self.pos, self.pos + n
        if self.pos > len(self.buf):
            raise GGUFFormatError(f"a string of {n} bytes runs past the end of the file")
        return bytes(self.buf[start : self.pos])

    def value(self, vtype: int) -> Any:
        if vtype == _STRING:
            return self.string()
        if vtype == _ARRAY:
            itype, count = self.take("<I"), self.take("<Q")
            if itype == _STRING:
                return [self.string() for _ in range(count)]
            if itype in _SCALARS:
                dt = np.dtype(_SCALARS[itype])
                arr = np.frombuffer(self.buf, dtype=dt, count=count, offset=self.pos).copy()
                self.pos += dt.itemsize * count
                return arr
            return [self.value(itype) for _ in range(count)]
        if vtype not in _SCALARS:
            raise GGUFFormatError(f"unknown value type {vtype}")
        return self.take(_SCALARS[vtype])


def _header(buf: Any) -> tuple[_Cursor, int, int, int]:
    """A cursor past the fixed header, and its version, tensor count and key count."""
    if buf[:4] != b"GGUF":
        raise GGUFFormatError("no GGUF magic at the start of the file")
    cur = _Cursor(buf)
    cur.pos = 4
    version = cur.take("<I")
    if version not in (2, 3):
        raise GGUFFormatError(f"GGUF version {version} (this reader knows 2 and 3, little-endian)")
    return cur, version, cur.take("<Q"), cur.take("<Q")


def read_kv(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Every metadata key of a GGUF file -> its value (strings as ``bytes``)."""
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as buf:
        cur, _, _, n_kv = _header(buf)
        out: dict[str, Any] = {}
        try:
            for _ in range(n_kv):
                key = cur.string().decode("utf-8")
                out[key] = cur.value(cur.take("<I"))
        except struct.error:
            raise GGUFFormatError("the header ends before its last key") from None
        return out


# gguf-py's GGUFValueType names, by the value type number the file holds
_TYPE_NAMES = {
    0: "UINT8", 1: "INT8", 2: "UINT16", 3: "INT16", 4: "UINT32", 5: "INT32", 6: "FLOAT32",
    7: "BOOL", 8: "STRING", 9: "ARRAY", 10: "UINT64", 11: "INT64", 12: "FLOAT64",
}  # fmt: skip


class _NotOrdinary(Exception):
    """The file needs gguf-py's own reading (odd, or malformed): never leaves this module."""


Fields = dict[str, tuple[Any, str]]
Shapes = dict[str, tuple[int, ...]]


def read_fields(path: str | os.PathLike[str]) -> tuple[Fields, Shapes, str | None]:
    """``({key: (contents, type name)}, {tensor: shape}, sha256)`` -- the digest of the file's
    bytes only for a file without tensors (a vocab-only GGUF; None beside gigabytes of weights).

    Equal to what ``gguf.GGUFReader(path)`` gives through ``field.contents()``, ``field.types``
    and ``tensor.shape`` -- checked against it field by field (tests/test_gguf_reader.py).
    A file this walk does not find ordinary (big-endian, nested arrays, a duplicate key or tensor,
    a tensor type gguf-py does not know, data past the end, any decoding error) is read by
    ``GGUFReader`` itself, which raises its own error or gives its own answer.
    """
    try:
        with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as buf:
            return _ordinary(buf)
    except (_NotOrdinary, struct.error, UnicodeDecodeError, ValueError, OverflowError):
        pass
    import gguf

    reader = gguf.GGUFReader(path)
    fields: dict[str, tuple[Any, str]] = {}
    for name, field in reader.fields.items():
        kinds = [t.name for t in field.types]
        kind = (kinds[0] + "".join(f"[{k}]" for k in kinds[1:])) if kinds else "?"
        fields[name] = (field.contents(), kind)
    tensors = {t.name: tuple(int(x) for x in t.shape) for t in reader.tensors}
    return fields, tensors, None if tensors else hashlib.sha256(memoryview(reader.data)).hexdigest()


def _ordinary(buf: Any) -> tuple[Fields, Shapes, str | None]:
    from gguf.constants import GGML_QUANT_SIZES, GGUF_DEFAULT_ALIGNMENT, GGMLQuantizationType

    cur, version, n_tensors, n_kv = _header(buf)  # GGUFFormatError (a ValueError): the library's turn
    fields: dict[str, tuple[Any, str]] = {
        "GGUF.version": (version, "UINT32"),
        "GGUF.tensor_count": (n_tensors, "UINT64"),
        "GGUF.kv_count": (n_kv, "UINT64"),
    }
    for _ in range(n_kv):
        key = cur.string().decode("utf-8")
        if key in fields:
            raise _NotOrdinary
        fields[key] = _field(cur, cur.take("<I"))
    infos = []
    for _ in range(n_tensors):
        name = cur.string().decode("utf-8")
        dims = tuple(cur.take("<Q") for _ in range(cur.take("<I")))
        infos.append((name, dims, cur.take("<I"), cur.take("<Q")))
    align = GGUF_DEFAULT_ALIGNMENT
    if "general.alignment" in fields:
        value, kind = fields["general.alignment"]
        if kind != "UINT32" or value == 0 or value & (value - 1):
            raise _NotOrdinary
        align = value
    start = cur.pos + (-cur.pos % align)
    tensors: dict[str, tuple[int, ...]] = {}
    for name, dims, raw_type, offset in infos:
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


def _field(cur: _Cursor, vtype: int) -> tuple[Any, str]:
    if vtype == _STRING:
        return cur.string().decode("utf-8"), "STRING"
    if vtype in _SCALARS:
        return cur.take(_SCALARS[vtype]), _TYPE_NAMES[vtype]
    if vtype != _ARRAY:
        raise _NotOrdinary
    itype, count = cur.take("<I"), cur.take("<Q")
    if count == 0:
        if itype not in _TYPE_NAMES:
            raise _NotOrdinary
        return [], "ARRAY"
    if itype == _STRING:
        return [cur.string().decode("utf-8") for _ in range(count)], "ARRAY[STRING]"
    if itype not in _SCALARS:
        raise _NotOrdinary  # nested arrays: gguf-py flattens them its own way
    dt = np.dtype(_SCALARS[itype])
    if cur.pos + dt.itemsize * count > len(cur.buf):
        raise _NotOrdinary
    values = np.frombuffer(cur.buf, dtype=dt, count=count, offset=cur.pos).tolist()
    cur.pos += dt.itemsize * count
    return values, f"ARRAY[{_TYPE_NAMES[itype]}]"
