"""``stacktok import``: any byte-level BPE source -> the frozen reference (artifact v2).

:func:`import_tokenizer` reads one source and builds it with ``StackTokenizer.from_vocab``
(which validates it and returns a v1 tokenizer when the layout is exactly ours, so importing
our own exports gives our fingerprint). :func:`read_source` is the reading half: the
``from_vocab`` keyword dict. The kind of file decides the reader:

============================  =====================================================
``*.gguf`` (GGUF magic)       :mod:`.gguf_src` (``tokenizer.ggml.model = gpt2``)
``tokenizer.json`` / a folder :mod:`.hf_json` (with ``tokenizer_config.json`` beside it)
``*.tiktoken``                :mod:`.tiktoken_src` (needs ``pattern`` and ``specials``)
``*.model``                   :mod:`.minbpe_src` (minbpe's text format)
other ``*.json``              :mod:`.seed004` (specials first, then bytes, then merges)
============================  =====================================================

Anything that is not a byte-level BPE the reference can follow raises :class:`ImportRefused`
(one line: the file, the component, why). Every source is untrusted input: read bounded by
``stacktok_export.util.limits`` (``--max-file-mb`` raises it), a special file (FIFO, device)
refused before it is opened, a vocabulary over the entry limit or without its byte tokens
refused, and whatever a reader or library raises on a malformed file (``ValueError`` from
``int()``, ``UnicodeDecodeError``, ``struct.error``, ``KeyError``, ``IndexError``, numpy's
errors, ``RecursionError``) becomes an ``ImportRefused`` naming the file (:func:`read_source`).

Out of scope: writing exports of the result (``stacktok export --artifact``), and
SentencePiece / WordPiece / Unigram models (refused).
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..artifact.artifact import ArtifactError
from ..util.limits import current
from ..util.untrusted import UntrustedFileError, check_untrusted
from .common import ImportRefused, check_bytes, load_json, malformed

if TYPE_CHECKING:
    from ..models.bpe.bpe import StackTokenizer

__all__ = ["ImportRefused", "import_tokenizer", "read_source", "source_kind"]

KINDS = ("gguf", "hf", "tiktoken", "minbpe", "seed004")


def source_kind(path: str | os.PathLike[str]) -> str:
    """Which reader a path needs (one of :data:`KINDS`); ``ImportRefused`` when none does."""
    p = Path(path)
    if p.is_dir():
        if (p / "tokenizer.json").is_file():
            return "hf"
        raise ImportRefused(p, "source", "a folder without tokenizer.json; pass the file itself")
    if not p.exists() and not p.is_symlink():
        raise ImportRefused(p, "source", "no such file")
    try:
        check_untrusted(p)  # a FIFO would block the read below; a device never ends
    except UntrustedFileError as exc:
        raise ImportRefused(p, "source", f"{exc.what}; {exc.fix}") from None
    with open(p, "rb") as f:
        head = f.read(4)
    if head == b"GGUF" or p.suffix == ".gguf":
        return "gguf"
    if p.suffix == ".tiktoken":
        return "tiktoken"
    if p.suffix == ".model":
        return "minbpe"
    if p.name == "tokenizer.json":
        return "hf"
    if p.suffix == ".json":
        return "hf" if _has_model(p) else "seed004"
    raise ImportRefused(
        p, "source", "unknown kind; expected .gguf, tokenizer.json, .tiktoken, .model or .json"
    )


def _has_model(p: Path) -> bool:
    data = load_json(p, limit=current().tokenizer_json)
    return isinstance(data, dict) and "model" in data


#: what readers and the libraries they call raise on a malformed file (``ImportRefused`` and
#: ``UntrustedFileError`` are ``ValueError`` too, handled first)
_MALFORMED = (
    ValueError, TypeError, KeyError, IndexError, AttributeError, struct.error, OverflowError,
    RecursionError, UnicodeError,
)  # fmt: skip


def read_source(
    path: str | os.PathLike[str],
    *,
    pattern: str | None = None,
    specials: Iterable[tuple[str, int]] = (),
    name: str | None = None,
) -> dict[str, Any]:
    """The ``StackTokenizer.from_vocab`` keywords of one source (see the module docstring).

    ``pattern`` replaces the source's split (required for ``.tiktoken``); ``specials`` are
    ``(token, id)`` pairs (``.tiktoken`` only: the file carries none).
    """
    kind = source_kind(path)
    specials = list(specials)
    if specials and kind != "tiktoken":
        raise ImportRefused(
            path, "--special", f"only a .tiktoken file takes specials; a {kind} source has its own"
        )
    try:
        return _read(kind, path, pattern=pattern, specials=specials, name=name)
    except ImportRefused:
        raise
    except UntrustedFileError as exc:
        raise ImportRefused(exc.path, "file", f"{exc.what}; {exc.fix}") from None
    except _MALFORMED as exc:
        raise malformed(path, f"{kind} source", exc) from None


def _read(
    kind: str,
    path: str | os.PathLike[str],
    *,
    pattern: str | None,
    specials: list[tuple[str, int]],
    name: str | None,
) -> dict[str, Any]:
    if kind == "gguf":
        from .gguf_src import read_gguf

        return read_gguf(path, pattern=pattern, name=name)
    if kind == "hf":
        from .hf_json import read_hf

        return read_hf(path, pattern=pattern, name=name)
    if kind == "tiktoken":
        from .tiktoken_src import read_tiktoken

        return read_tiktoken(path, pattern=pattern, specials=specials, name=name)
    if kind == "minbpe":
        from .minbpe_src import read_minbpe

        return read_minbpe(path, pattern=pattern, name=name)
    from .seed004 import read_seed004

    return read_seed004(path, pattern=pattern, name=name)


def import_tokenizer(
    path: str | os.PathLike[str],
    *,
    pattern: str | None = None,
    specials: Iterable[tuple[str, int]] = (),
    name: str | None = None,
) -> StackTokenizer:
    """Read one source and build its reference tokenizer (``ImportRefused`` on anything else)."""
    from ..models.bpe.bpe import StackTokenizer

    vocab = read_source(path, pattern=pattern, specials=specials, name=name)
    check_bytes(path, vocab["tokens"], vocab["specials"])
    try:
        return StackTokenizer.from_vocab(**vocab)
    except ArtifactError as exc:
        raise ImportRefused(path, "vocabulary", str(exc)) from None
