"""The one way the floor and the suite read a GGUF: fields, tensor shapes and metadata, checked first.

:func:`read_gguf_fields` / :func:`read_gguf` / :func:`read_gguf_file` answer as gguf-py's
``GGUFReader`` would (``{key: (value, type name)}``, tensor shapes in ``ne`` order, the file's
sha256 for a vocab-only file), through :func:`~.kv.read_fields`, whose header walk
(:mod:`.header`) checks every declared size against the file before anything is built;
:func:`read_gguf_metadata` is the ``general.*``, ``tokenizer.*`` and ``stacktok.*`` keys as
plain values. :func:`require` imports gguf-py or says how to install it (the writers in
``export/`` use it too).

Out of scope: writing (``export/gguf_fmt.py``, ``export/gguf_model.py``), tensor data, what the
keys mean to llama.cpp (:mod:`.pretypes`, :mod:`.pre`).
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

from .kv import read_fields

METADATA_PREFIXES = ("general.", "tokenizer.", "stacktok.")

_INSTALL = {"gguf": "pip install 'stacktok[gguf]'  (or: pip install gguf numpy)"}


def require(module: str) -> ModuleType:
    """Import ``gguf``; ``ImportError`` says how to install it."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ImportError(f"{module} is not installed: {_INSTALL[module]}") from exc


def read_gguf_fields(
    path: str | os.PathLike[str], *, roots: Sequence[Path] = ()
) -> dict[str, tuple[Any, str]]:
    """Every field as ``(plain value, type name)``: ``"STRING"``, ``"UINT32"``, ``"ARRAY[INT32]"``...

    Raises gguf-py's own error for a file it cannot read (``ImportError`` without gguf), and
    before it, ``GGUFHeaderError`` for a declared size the file cannot hold and
    ``UntrustedFileError`` for a path that is not a regular file (or a symlink out of ``roots``).
    """
    return read_gguf(path, roots=roots)[0]


def read_gguf(
    path: str | os.PathLike[str], *, roots: Sequence[Path] = ()
) -> tuple[dict[str, tuple[Any, str]], dict[str, tuple[int, ...]]]:
    """:func:`read_gguf_fields` and every tensor's GGUF shape (``ne`` order), in one read."""
    fields, tensors, _ = read_gguf_file(path, roots=roots)
    return fields, tensors


def read_gguf_file(
    path: str | os.PathLike[str], *, roots: Sequence[Path] = ()
) -> tuple[dict[str, tuple[Any, str]], dict[str, tuple[int, ...]], str | None]:
    """:func:`read_gguf` plus the sha256 of the file's bytes, hashed from the same memory map (no
    second read) -- only for a vocab-only GGUF (None for a model GGUF: gigabytes of weights).

    ``roots``: where a symlink may point (the checkpoint directory); ``()``: a regular file
    anywhere (a path the user named). Its header is checked before anything is built
    (:mod:`stacktok_export.gguf.header`)."""
    require("gguf")  # the missing-package error names the extra; the reader falls back on it
    return read_fields(path, roots=roots)


def read_gguf_metadata(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The ``general.*``, ``tokenizer.*`` and ``stacktok.*`` fields as plain Python values.

    Strings are ``str``, integers ``int``, booleans ``bool``, arrays ``list``.
    """
    fields = read_gguf_fields(path)
    return {name: value for name, (value, _) in fields.items() if name.startswith(METADATA_PREFIXES)}
