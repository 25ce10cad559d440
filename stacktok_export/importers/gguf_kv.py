"""The key/value header of a GGUF file (v2/v3, little-endian), read without its tensors.

gguf-py's ``GGUFReader`` keeps a numpy view of every part of every field: on the 128,256
tokens and 280,147 merges of Llama-3 that is ~30 s on this machine. A tokenizer needs only the
header's strings and small arrays, so :func:`read_kv` walks the header once with ``struct``
(string arrays as ``list[bytes]``, numeric arrays as ``numpy`` arrays) and stops at the first
tensor description. tests/test_import.py checks it field by field against ``GGUFReader``.

Out of scope: tensor data, big-endian files, GGUF v1 (refused as :class:`GGUFFormatError`).
"""

from __future__ import annotations

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


def read_kv(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Every metadata key of a GGUF file -> its value (strings as ``bytes``)."""
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as buf:
        if buf[:4] != b"GGUF":
            raise GGUFFormatError("no GGUF magic at the start of the file")
        cur = _Cursor(buf)
        cur.pos = 4
        version = cur.take("<I")
        if version not in (2, 3):
            raise GGUFFormatError(f"GGUF version {version} (this reader knows 2 and 3, little-endian)")
        cur.take("<Q")  # tensor count
        n_kv = cur.take("<Q")
        out: dict[str, Any] = {}
        try:
            for _ in range(n_kv):
                key = cur.string().decode("utf-8")
                out[key] = cur.value(cur.take("<I"))
        except struct.error:
            raise GGUFFormatError("the header ends before its last key") from None
        return out
