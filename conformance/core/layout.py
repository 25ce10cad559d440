"""Where a directory's exports are: the HF files, a ``.tiktoken`` file, a GGUF.

``Exports.discover(DIR)`` accepts a checkpoint/tokenizer directory holding
``tokenizer.json`` and optionally ``*.tiktoken`` / ``*.gguf`` beside it; for a
directory named ``NAME-hf`` (our export layout) it also looks for
``NAME.tiktoken`` and ``NAME.gguf`` in the parent directory. A name that is there counts even
when it is a dangling symlink or a directory (validation then refuses it, naming it): a Hugging
Face cache snapshot is symlinks into ``blobs/``, and a missing blob is a broken download, never
a file to skip. A cache repository itself (``models--org--name``, holding ``snapshots/``) is
refused with the snapshot to pass instead.

Out of scope: remote hub ids -- the suite never downloads anything.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from conformance.core.errors import LayoutError, UsageError
from stacktok_export.util import limits
from stacktok_export.util.untrusted import read_untrusted


@dataclass(frozen=True)
class Exports:
    artifact: Path
    hf_dir: Path | None
    tiktoken: Path | None
    gguf: Path | None

    @classmethod
    def discover(cls, directory: Path, *, artifact: Path) -> Exports:
        directory = Path(directory)
        if not directory.is_dir():
            raise LayoutError(f"{directory} is not a directory; pass the tokenizer/checkpoint directory")
        hf = directory if os.path.lexists(directory / "tokenizer.json") else None
        return cls(
            artifact=Path(artifact),
            hf_dir=hf,
            tiktoken=_find(directory, ".tiktoken"),
            gguf=_find(directory, ".gguf"),
        )


def _find(directory: Path, suffix: str) -> Path | None:
    found = sorted(directory.glob(f"*{suffix}"))
    if len(found) > 1:
        names = ", ".join(p.name for p in found)
        raise LayoutError(f"{directory} holds several {suffix} files ({names}); keep exactly one")
    if found:
        return found[0]
    if directory.name.endswith("-hf"):
        sibling = directory.parent / f"{directory.name[:-3]}{suffix}"
        if os.path.lexists(sibling):
            return sibling
    return None


def trusted_roots(directory: Path) -> tuple[Path, ...]:
    """Where a file of ``directory`` may really live: the directory itself and, when it is a snapshot
    of a Hugging Face cache (``models--org--name/snapshots/<commit>``), that repository's ``blobs``."""
    real = Path(os.path.realpath(directory))
    roots = [real]
    repo = real.parent.parent
    if real.parent.name == "snapshots" and repo.name.startswith(("models--", "datasets--", "spaces--")):
        roots.append(repo / "blobs")
    return tuple(roots)


def gguf_fields(path: Path) -> dict[str, tuple[Any, str]]:
    """``gguf_fmt.read_gguf_fields``, read once per file version and shared by the gate's validation,
    static checks and vocabulary surface (gguf-py takes about a second on the shipped GGUF).

    Callers must not mutate the result. Raises what the reader raises (not cached).
    """
    return _gguf_read(path)[0]


def gguf_tensors(path: Path) -> dict[str, tuple[int, ...]]:
    """Tensor name -> GGUF shape (``ne`` order; empty for a vocab-only GGUF), from the same read."""
    return _gguf_read(path)[1]


def gguf_digest(path: Path) -> str | None:
    """sha256 of a vocab-only GGUF's bytes, from the same read (None for a model GGUF)."""
    return _gguf_read(path)[2]


def _gguf_read(path: Path) -> tuple[dict[str, tuple[Any, str]], dict[str, tuple[int, ...]], str | None]:
    stat = Path(path).stat()
    return _gguf_cached(str(Path(path).resolve()), stat.st_mtime_ns, stat.st_size)


@functools.lru_cache(maxsize=4)
def _gguf_cached(path: str, mtime_ns: int, size: int) -> tuple[dict[str, tuple[Any, str]], dict, str | None]:
    from stacktok_export.gguf.reader import read_gguf_file

    return read_gguf_file(path, roots=trusted_roots(Path(path).parent))


def require_any_export(exports: Exports, directory: Path, *, verb: str) -> None:
    """The one "nothing to check here" rule (gate, fuzz, ``python -m conformance``): a directory
    with no ``tokenizer.json``, ``*.gguf`` or ``*.tiktoken`` is a usage error, never an empty PASS."""
    if exports.hf_dir is None and exports.gguf is None and exports.tiktoken is None:
        snapshots = sorted(Path(directory).glob("snapshots/*/"))
        if snapshots:
            ref = Path(directory) / "refs" / "main"
            rev = ref.read_text(encoding="utf-8", errors="replace").strip() if ref.is_file() else ""
            pick = Path(directory) / "snapshots" / rev if rev else snapshots[-1]
            raise UsageError(
                f"{directory} is a Hugging Face cache repository, not a snapshot; "
                f"pass the snapshot directory, e.g. {pick}"
            )
        raise UsageError(
            f"{directory} has no tokenizer.json, *.gguf or *.tiktoken to {verb}; "
            "pass the directory `stacktok export` or save_pretrained wrote"
        )


def refuse_outputs_inside(directory: Path, outputs: dict[str, Path | None], *, tool: str) -> None:
    """The one "never writes into DIR" rule: an output flag pointing into the directory a tool
    checks is a usage error (a gate or fuzz run never modifies what it checks)."""
    root = Path(directory).resolve()
    for flag, p in outputs.items():
        if p is None:
            continue
        full = Path(p).resolve()
        if full == root or root in full.parents:
            raise UsageError(
                f"{flag} {p} is inside {directory}: the {tool} never writes into the directory it checks; "
                "write it elsewhere"
            )


def file_bytes(path: Path, files: Any = None) -> bytes:
    """The bytes of ``path``: from what validation already read (``files``, a
    ``conformance.validate.Validated``) when it holds that file, else from disk. Later stages call
    this (and :func:`file_json`) so a gate run reads each checkpoint file once."""
    found = files.by_path(path) if files is not None else None
    if found is not None and found.raw is not None:
        return found.raw
    # not validated (a caller without validation): still only a bounded regular file of its folder
    return read_untrusted(path, limit=limits.current().tokenizer_json, roots=(Path(path).parent,))


def file_json(path: Path, files: Any = None) -> Any:
    """The parsed JSON of ``path``: validation's parse when ``files`` holds it, else read and parsed."""
    found = files.by_path(path) if files is not None else None
    if found is not None and found.value is not None and not isinstance(found.value, str):
        return found.value
    import json

    return json.loads(file_bytes(path, files).decode("utf-8"))


def file_text(path: Path, files: Any = None) -> str:
    """The UTF-8 text of ``path`` (a template): validation's copy when ``files`` holds it."""
    found = files.by_path(path) if files is not None else None
    if found is not None and isinstance(found.value, str):
        return found.value
    return file_bytes(path, files).decode("utf-8")
