"""``*.gguf``: readable as ``gguf.GGUFReader`` reads it, tokenizer arrays of the right types and lengths.

The read is ``stacktok_export.gguf.kv.read_fields``: one walk of the header giving
``GGUFReader``'s answer (tested field by field against it), which hands any file it does not
find ordinary to ``GGUFReader`` itself -- so a broken file fails with the library's complaint.

:func:`read_gguf_checked` reads the fields once, through the gate's one shared GGUF read
(``conformance.core.layout.gguf_fields``, cached per file version, so the static checks and
the surface reuse it), and checks ``tokenizer.ggml.tokens`` / ``token_type`` / ``merges``.
Only when the reader fails are the first bytes looked at, to tell a git-lfs pointer, an empty
file or "not a GGUF" (the magic) from "truncated or corrupt". A header declaring more than its
file holds (a 2**40-element array, a 2**60-byte string: ``stacktok_export.gguf.header``, checked
before gguf-py builds anything) fails naming the key and the sizes in the same line; a path that is not a
regular file is refused before it is opened (``UntrustedFileError``, passed on as it is).
Without ``gguf`` installed nothing is read: it returns None and ``validate_directory`` records
that on its result.

Out of scope: whether the vocabulary equals the artifact's (the gate's GGUF and surface checks).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

from conformance.backends import dist_version
from conformance.core.layout import gguf_fields
from conformance.validate.common import fail, first_line, rethrow_interrupts
from conformance.validate.download import refuse_placeholder, unreadable
from stacktok_export.gguf.header import GGUFHeaderError
from stacktok_export.util.untrusted import UntrustedFileError

NOT_CHECKED = "GGUF not checked: gguf is not installed; pip install 'stacktok[gguf]'"
_AGAIN = "copy it again or rebuild it with `stacktok export`"
_INT_TYPES = frozenset({"UINT8", "INT8", "UINT16", "INT16", "UINT32", "INT32", "UINT64", "INT64"})


def read_gguf_checked(path: Path) -> dict[str, tuple[Any, str]] | None:
    """``{key: (value, type name)}`` of a well-formed GGUF; None when ``gguf`` is not installed."""
    if importlib.util.find_spec("gguf") is None:
        return None
    fields = _read_fields(path)
    _check_gguf_array(path, fields, "tokenizer.ggml.tokens", {"STRING"})
    _check_gguf_array(path, fields, "tokenizer.ggml.token_type", _INT_TYPES)
    _check_gguf_array(path, fields, "tokenizer.ggml.merges", {"STRING"})
    tokens = fields.get("tokenizer.ggml.tokens")
    types = fields.get("tokenizer.ggml.token_type")
    if tokens is not None and types is not None and len(types[0]) != len(tokens[0]):
        fail(
            path,
            "tokenizer.ggml.token_type",
            f"has {len(types[0])} entries for {len(tokens[0])} tokens",
            "give every token one type: rebuild the GGUF with `stacktok export`",
        )
    return fields


def _read_fields(path: Path) -> dict[str, tuple[Any, str]]:
    """The shared read, failing as input: a wrong magic first, else the reader's own complaint."""
    try:
        return gguf_fields(path)
    except GGUFHeaderError as exc:  # a declared size the file cannot hold: never handed to gguf-py
        size = Path(path).stat().st_size
        what = f"gguf {dist_version('gguf')} cannot read its {size} bytes ({exc.where}: {exc.what})"
        fail(path, "file", what, f"the file is truncated or corrupt (or hostile): {_AGAIN}")
    except UntrustedFileError:
        raise
    except BaseException as exc:  # numpy/struct errors on truncated files
        rethrow_interrupts(exc)
        error = exc
    head = _head(path)
    refuse_placeholder(path, head)
    head = head[:4]
    if head != b"GGUF":
        what = f"starts with {head!r}, not" if len(head) == 4 else f"is {len(head)} bytes long, without"
        fail(path, "header", f"{what} the magic b'GGUF'", "this is not a GGUF file: re-export it")
    fail(
        path,
        "file",
        f"gguf {dist_version('gguf')} cannot read its {Path(path).stat().st_size} bytes "
        f"({type(error).__name__}: {first_line(str(error))})",
        f"the file is truncated or corrupt: {_AGAIN}",
    )


def _head(path: Path) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read(64)
    except OSError as exc:
        unreadable(path, exc)


def _check_gguf_array(
    path: Path, fields: dict[str, tuple[Any, str]], key: str, element_types: set[str] | frozenset[str]
) -> None:
    if key not in fields:
        return
    kind = fields[key][1]  # e.g. "ARRAY[STRING]"
    if not (kind.startswith("ARRAY[") and kind[6:-1] in element_types):
        want = "/".join(sorted(element_types)) if len(element_types) < 3 else "integer"
        shown = "untyped" if kind == "?" else kind
        fail(path, key, f"is {shown}, not an array of {want}", "rebuild the GGUF with `stacktok export`")
