"""A GGUF header walked with every declared length checked against the file, before anything is built.

A GGUF header declares its own sizes: ``kv_count`` and ``tensor_count`` (u64), each string's
length (u64), each array's element count (u64), each tensor's dimension count. A hostile file
declares an int32 array of 2**40 elements in a few hundred bytes. gguf-py's ``GGUFReader`` maps
the file and builds a numpy view for every part of every field -- one per array element -- before
any sanity check: past the end of the file each view is empty and its offset stops advancing, so
that one key costs 2**40 loop turns (3.4 GB after 30 s, still growing); ``frombuffer`` raises a bare
``ValueError`` and a ``range(count)`` of strings runs to the end of the file first. Why by hand:
no GGUF library bounds its reads, so :class:`Cursor` is the one walker that does, shared by
:mod:`stacktok_export.gguf.kv` (which builds values with it) and :func:`scan` (which builds
nothing: the pre-scan run before ``GGUFReader`` sees a file).

The rules, each a :class:`GGUFHeaderError` naming the file, the key (or ``GGUF.kv_count``,
``tensor <name>``...), the declared size and what remains of the file:

- every declared count times the smallest size its element can take (a key/value 13 bytes, a
  tensor description 24, a string 8, a nested array 12, a number its width) fits in the bytes
  the file has left at that point -- so no loop turns more often than the file has bytes;
- one array holds at most ``limits.current().vocab_entries`` elements, all arrays together
  twice that (the largest real vocabulary, XLM-V's, has 901,629 tokens); one string at most
  ``limits.current().config_json`` bytes; arrays nest at most :data:`MAX_NESTING` deep;
- a value type is one GGUF defines (an unknown one has no size to skip).

Both byte orders are read (gguf-py's rule: a version whose low 16 bits are 0 is big-endian).

Out of scope: what the values mean and duplicate keys (the readers); tensor data (never read;
``kv.py`` checks each tensor's extent); GGUF v1 and files without the magic, which :func:`scan`
leaves to the reader's own refusal.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import struct
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from ..util.limits import current
from ..util.untrusted import UntrustedFileError, check_untrusted, escape, kind_of

#: GGUF value types (gguf-py ``GGUFValueType``): struct code per scalar
SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
STRING, ARRAY = 8, 9
#: gguf-py's ``GGUFValueType`` names, by the number the file holds
TYPE_NAMES = {
    0: "UINT8", 1: "INT8", 2: "UINT16", 3: "INT16", 4: "UINT32", 5: "INT32", 6: "FLOAT32",
    7: "BOOL", 8: "STRING", 9: "ARRAY", 10: "UINT64", 11: "INT64", 12: "FLOAT64",
}  # fmt: skip
#: the fewest bytes a value of each type takes (a string: its u64 length; an array: type + count)
MIN_SIZE = {**{t: struct.calcsize(c) for t, c in SCALARS.items()}, STRING: 8, ARRAY: 12}
_KV_MIN = 8 + 4 + 1  # key length, value type, a one-byte value
_TENSOR_MIN = 8 + 4 + 4 + 8  # name length, dimension count, type, offset
#: arrays of arrays this deep at most (llama.cpp reads none; gguf-py flattens them)
MAX_NESTING = 4
_FIX = "the file is corrupt or hostile: download it again, or rebuild it (`stacktok export`)"
_RAISE = "if the file is real, raise the limit with --max-file-mb"


class GGUFHeaderError(ValueError):
    """A header whose declared sizes do not fit its file: ``"<path>: <where>: <what>; <fix>"``."""

    def __init__(self, path: os.PathLike[str] | str, where: str, what: str, fix: str = _FIX) -> None:
        self.path, self.where, self.what, self.fix = escape(os.fspath(path), 4096), escape(where), what, fix
        super().__init__(f"{self.path}: {self.where}: {what}; {fix}")


class Cursor:
    """A position in a GGUF buffer whose every read is checked against the buffer's end."""

    def __init__(self, buf: Any, path: os.PathLike[str] | str, order: str = "<") -> None:
        self.buf, self.path, self.order, self.pos = buf, path, order, 0
        self.size = len(buf)
        self._structs = {code: struct.Struct(order + code) for code in (*SCALARS.values(), "I", "Q")}
        self._u64 = self._structs["Q"]
        limits = current()
        self.max_entries, self.max_string = limits.vocab_entries, limits.config_json
        self.entries = 0  # array elements declared so far (the whole header's budget)

    def fail(self, where: str, what: str, fix: str = _FIX) -> GGUFHeaderError:
        return GGUFHeaderError(self.path, where, what, fix)

    def take(self, code: str, where: str) -> Any:
        """One number (``struct`` code without byte order) at the cursor."""
        unpack = self._structs[code]
        try:
            (value,) = unpack.unpack_from(self.buf, self.pos)
        except struct.error:
            raise self.fail(where, f"the file ends at byte {self.size:,}, inside this entry") from None
        self.pos += unpack.size
        return value

    def fits(self, count: int, size: int, where: str, what: str) -> None:
        """``count`` things of at least ``size`` bytes each fit in what the file has left."""
        left = self.size - self.pos
        if count * size > left:
            least = f" (at least {count * size:,} bytes)" if size > 1 else ""
            remain = f"only {left:,} of the file's {self.size:,} bytes remain"
            raise self.fail(where, f"declares {count:,} {what}{least} but {remain}")

    def string(self, where: str) -> bytes:
        """A GGUF string's bytes (u64 length, then the bytes)."""
        start = self._string_span(where)
        return bytes(self.buf[start : self.pos])

    def skip_string(self, where: str) -> None:
        self._string_span(where)

    def _string_span(self, where: str) -> int:
        """Past a string; where its bytes start. (The hot path of a vocabulary: one unpack, one
        comparison per string when all is well.)"""
        try:
            (n,) = self._u64.unpack_from(self.buf, self.pos)
        except struct.error:
            raise self.fail(where, f"the file ends at byte {self.size:,}, inside this entry") from None
        start = self.pos + 8
        if start + n > self.size or n > self.max_string:
            self.pos = start
            self.fits(n, 1, where, "bytes of string")
            raise self.fail(
                where, f"declares a string of {n:,} bytes, over the {self.max_string:,}-byte limit", _RAISE
            )
        self.pos = start + n
        return start

    def array_head(self, where: str, depth: int = 0) -> tuple[int, int]:
        """An array's element type and count, both checked (``depth``: arrays around this one)."""
        itype, count = self.take("I", where), self.take("Q", where)
        if itype not in MIN_SIZE:
            if count:
                raise self.fail(where, f"an array of value type {itype}, which GGUF does not define")
            return itype, 0  # gguf-py reads an empty array of any type
        if itype == ARRAY and depth + 1 >= MAX_NESTING:
            raise self.fail(where, f"arrays nested more than {MAX_NESTING} deep (llama.cpp reads none)")
        self.fits(count, MIN_SIZE[itype], where, f"{TYPE_NAMES[itype]} elements")
        if count > self.max_entries:
            raise self.fail(
                where, f"declares {count:,} elements, over the {self.max_entries:,}-element limit", _RAISE
            )
        self.entries += count
        if self.entries > 2 * self.max_entries:
            raise self.fail(
                where,
                f"brings the header's arrays to {self.entries:,} elements, over the "
                f"{2 * self.max_entries:,}-element limit",
                _RAISE,
            )
        return itype, count

    def value_type(self, where: str) -> int:
        vtype = self.take("I", where)
        if vtype not in MIN_SIZE:
            raise self.fail(where, f"value type {vtype}, which GGUF does not define")
        return vtype

    def skip_value(self, vtype: int, where: str, depth: int = 0) -> None:
        """Past one value of type ``vtype``, every length in it checked."""
        if vtype == STRING:
            self.skip_string(where)
        elif vtype == ARRAY:
            itype, count = self.array_head(where, depth)
            if itype == STRING:
                for _ in range(count):
                    self.skip_string(where)
            elif itype == ARRAY:
                for _ in range(count):
                    self.skip_value(ARRAY, where, depth + 1)
            elif count:
                self.pos += count * MIN_SIZE[itype]
        else:
            self.fits(1, MIN_SIZE[vtype], where, "value")
            self.pos += MIN_SIZE[vtype]

    def key(self) -> str:
        """A key/value entry's key, as text for messages and dicts (``UnicodeDecodeError`` as is)."""
        return self.string("a key").decode("utf-8")


def byte_order(buf: Any) -> str | None:
    """``"<"`` or ``">"`` for a GGUF v2/v3 buffer (gguf-py's rule), ``None`` for anything else."""
    if len(buf) < 8 or bytes(buf[:4]) != b"GGUF":
        return None
    (version,) = struct.unpack_from("<I", buf, 4)
    order = ">" if version & 0xFFFF == 0 else "<"
    (version,) = struct.unpack_from(order + "I", buf, 4)
    return order if version in (2, 3) else None


def counts(cur: Cursor) -> tuple[int, int, int]:
    """``(version, tensor_count, kv_count)`` from the fixed header; ``kv_count`` checked."""
    cur.pos = 4
    version = cur.take("I", "GGUF.version")
    n_tensors, n_kv = cur.take("Q", "GGUF.tensor_count"), cur.take("Q", "GGUF.kv_count")
    cur.fits(n_kv, _KV_MIN, "GGUF.kv_count", "key/value entries")
    return version, n_tensors, n_kv


def tensor_count_fits(cur: Cursor, n_tensors: int) -> None:
    cur.fits(n_tensors, _TENSOR_MIN, "GGUF.tensor_count", "tensor descriptions")


def tensor_info(cur: Cursor, index: int) -> tuple[bytes, tuple[int, ...], int, int]:
    """One tensor description: ``(name, dims, type, offset)``, every length checked."""
    where = f"tensor {index}"
    name = cur.string(where)
    where = f"tensor {name.decode('utf-8', errors='replace')!r}"
    n_dims = cur.take("I", where)
    cur.fits(n_dims, 8, where, "dimensions")
    dims = tuple(cur.take("Q", where) for _ in range(n_dims))
    return name, dims, cur.take("I", where), cur.take("Q", where)


def scan(buf: Any, *, path: os.PathLike[str] | str) -> None:
    """Walk the whole header of ``buf`` building nothing; :class:`GGUFHeaderError` at the first
    declared size the file cannot hold. A buffer that is not GGUF v2/v3 is left to its reader."""
    order = byte_order(buf)
    if order is None:
        return
    cur = Cursor(buf, path, order)
    _, n_tensors, n_kv = counts(cur)
    for i in range(n_kv):
        where = f"key {i}"
        try:
            where = cur.key()
        except UnicodeDecodeError:
            pass  # the key's bytes were in bounds: its reader names it
        cur.skip_value(cur.value_type(where), where)
    tensor_count_fits(cur, n_tensors)
    for i in range(n_tensors):
        tensor_info(cur, i)


@contextlib.contextmanager
def mapped(path: os.PathLike[str] | str, *, roots: Sequence[Path] = ()) -> Iterator[Any]:
    """The file mapped read-only (``b""`` when empty), once it is a regular file where it should
    be (:func:`~stacktok_export.util.untrusted.check_untrusted`: a FIFO or device is never opened)."""
    real = check_untrusted(path, roots=roots)
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(real, flags)
    except OSError as exc:
        what = f"cannot be read ({exc.strerror or exc})"
        raise UntrustedFileError(path, what, "check its permissions") from None
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        kind = kind_of(st.st_mode)
        if kind is not None:  # swapped between the check and the open
            raise UntrustedFileError(path, f"is {kind}, not a regular file", "put the file itself there")
        if st.st_size == 0:
            yield b""
            return
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as buf:
            yield buf


def check_file(path: os.PathLike[str] | str, *, roots: Sequence[Path] = ()) -> None:
    """:func:`scan` of the file at ``path`` (what to call before handing a path to ``GGUFReader``)."""
    with mapped(path, roots=roots) as buf:
        scan(buf, path=path)
