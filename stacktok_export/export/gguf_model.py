"""Our tokenizer into a model GGUF: copy a GGUF with weights, every ``tokenizer.*`` key replaced.

``retokenize(model, out, tok)`` reads ``model`` with gguf-py's ``GGUFReader`` (tensors
memory-mapped), writes with ``GGUFWriter`` -- the copy loop of gguf-py's own
``gguf_new_metadata.py`` -- into a temp file beside ``out``, and renames it into place:

- every key outside ``tokenizer.*`` / ``stacktok.*`` is copied as it is (architecture,
  hyperparameters, ``general.*``; ``general.name`` kept);
- every ``tokenizer.*`` key of the input is dropped (scores, a foreign ``pre``, chat
  templates, ``tokenizer.huggingface.json`` ...) and the frozen artifact's are written
  (:func:`~stacktok_export.export.gguf_fmt.add_tokenizer_metadata`, the same keys as the
  vocab-only export), the token list padded with ``[PAD{i}]`` (UNUSED) when the
  embeddings have more rows than the tokenizer has ids -- llama.cpp sizes
  ``token_embd`` from the token list, and ``convert_hf_to_gguf.py`` pads the same way;
- tensors are streamed unchanged, in order, byte for byte.

Refused (:class:`ModelGGUFError`, one line naming the file and field, exit 2): a file
gguf-py cannot read, a GGUF without ``token_embd.weight`` (vocab-only: use ``stacktok
export``), embedding or ``output.weight`` rows fewer than the tokenizer's ids, split
GGUFs, ``out`` equal to the input.

Out of scope: converting weights (any converter does that: ``convert_hf_to_gguf.py``,
see docs/exports.md, "Shipping a GGUF"), quantizing, split (multi-file) GGUFs, architectures
whose embedding tensor is not ``token_embd.weight``.
"""

from __future__ import annotations

import os
import tempfile
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..gguf.header import GGUFHeaderError, check_file
from ..gguf.reader import require
from ..util.untrusted import UntrustedFileError
from .gguf_fmt import add_tokenizer_metadata

if TYPE_CHECKING:
    from ..models.bpe.bpe import StackTokenizer

#: keys of the input that the artifact replaces (all of them, not only the ones it writes)
REPLACED_PREFIXES = ("tokenizer.", "stacktok.")
EMBEDDING, OUTPUT = "token_embd.weight", "output.weight"
_ALIGNMENT = "general.alignment"


class ModelGGUFError(ValueError):
    """The model GGUF cannot take our tokenizer; the message names the file, the field and the fix."""


@dataclass(frozen=True)
class Retokenized:
    out: Path
    architecture: str
    tensors: int
    tensor_bytes: int
    rows: int  # embedding rows (= token list length written)
    dropped: tuple[str, ...]  # the input's tokenizer keys that were replaced


def embedding_rows(tensors: dict[str, tuple[int, ...]]) -> int | None:
    """Rows of ``token_embd.weight`` (GGUF shapes are ``ne``: ``(n_embd, n_vocab)``), or None."""
    shape = tensors.get(EMBEDDING)
    return int(shape[1]) if shape is not None and len(shape) >= 2 else None


def tensor_shapes(reader: Any) -> dict[str, tuple[int, ...]]:
    return {t.name: tuple(int(x) for x in t.shape) for t in reader.tensors}


def check_rows(path: Path, tensors: dict[str, tuple[int, ...]], n_ids: int) -> int:
    """The embedding rows, or :class:`ModelGGUFError` when they cannot hold ``n_ids`` ids."""
    rows = embedding_rows(tensors)
    if rows is None:
        raise ModelGGUFError(
            f"{path}: no {EMBEDDING} tensor: this is not a model GGUF with weights "
            "(a vocab-only GGUF comes from `stacktok export`)"
        )
    fix = f"resize the model's embeddings to at least {n_ids:,} rows before converting"
    if rows < n_ids:
        raise ModelGGUFError(
            f"{path}: {EMBEDDING} has {rows:,} rows, fewer than the {n_ids:,} token ids; {fix}"
        )
    out_shape = tensors.get(OUTPUT)
    if out_shape is not None and len(out_shape) >= 2 and int(out_shape[1]) != rows:
        raise ModelGGUFError(
            f"{path}: {OUTPUT} has {int(out_shape[1]):,} rows but {EMBEDDING} has {rows:,}; {fix} (both)"
        )
    return rows


def _open(path: Path) -> Any:
    gguf = require("gguf")
    if not os.path.lexists(path):
        raise ModelGGUFError(f"{path}: no such file")
    try:  # the header's declared sizes against the file first: gguf-py maps before it checks
        check_file(path)
    except (GGUFHeaderError, UntrustedFileError) as exc:
        raise ModelGGUFError(str(exc)) from None
    try:
        return gguf.GGUFReader(path)
    except FileNotFoundError:
        raise ModelGGUFError(f"{path}: no such file") from None
    except (ValueError, OSError, IndexError, KeyError) as exc:  # gguf-py's errors for a malformed file
        raise ModelGGUFError(f"{path}: not a GGUF gguf-py can read ({exc})") from None


def _architecture(path: Path, reader: Any) -> str:
    field = reader.get_field("general.architecture")
    if field is None:
        raise ModelGGUFError(f"{path}: general.architecture is missing; convert the model again")
    split = reader.get_field("split.count")
    if split is not None and int(split.contents()) > 1:
        raise ModelGGUFError(
            f"{path}: split.count is {split.contents()}: merge the shards first (gguf-split)"
        )
    return str(field.contents())


def retokenize(
    model: str | os.PathLike[str], out: str | os.PathLike[str], tok: StackTokenizer
) -> Retokenized:
    """Write ``out``: ``model`` with ``tok``'s tokenizer metadata, tensors unchanged (atomically)."""
    gguf = require("gguf")
    model, out = Path(model), Path(out)
    if out.exists() and out.resolve() == model.resolve():
        raise ModelGGUFError(f"--out {out}: is the input; write the copy to another path")
    reader = _open(model)
    arch = _architecture(model, reader)
    rows = check_rows(model, tensor_shapes(reader), tok.vocab_size)
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent)
    os.close(fd)
    try:
        writer = gguf.GGUFWriter(tmp, arch, endianess=reader.endianess)
        dropped = _copy_metadata(reader, writer, gguf)
        add_tokenizer_metadata(writer, tok, rows=rows)
        total = _copy_tensors(reader, writer)
        os.chmod(tmp, 0o644)
        with open(tmp, "rb+") as f:
            os.fsync(f.fileno())
        os.replace(tmp, out)
    finally:
        with suppress(FileNotFoundError):
            os.unlink(tmp)
    return Retokenized(out, arch, len(reader.tensors), total, rows, dropped)


def _copy_metadata(reader: Any, writer: Any, gguf: Any) -> tuple[str, ...]:
    dropped = []
    for field in reader.fields.values():
        name = field.name
        if name == "general.architecture" or name.startswith("GGUF."):
            continue  # the writer writes these itself
        if name.startswith(REPLACED_PREFIXES):
            dropped.append(name)
            continue
        kind = field.types[0]
        sub = field.types[-1] if kind == gguf.GGUFValueType.ARRAY else None
        writer.add_key_value(name, field.contents(), kind, sub_type=sub)
        if name == _ALIGNMENT:
            writer.data_alignment = int(field.contents())
    return tuple(dropped)


def _copy_tensors(reader: Any, writer: Any) -> int:
    total = 0
    for t in reader.tensors:
        writer.add_tensor_info(t.name, t.data.shape, t.data.dtype, t.data.nbytes, t.tensor_type)
        total += int(t.n_bytes)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    for t in reader.tensors:
        writer.write_tensor_data(t.data, tensor_endianess=reader.endianess)
    writer.close()
    return total
