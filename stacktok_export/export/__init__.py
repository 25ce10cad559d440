"""Exporters: every ecosystem format, rendered from one artifact as exact bytes.

``render_exports`` returns ``{relative path: bytes}`` for an artifact named
``NAME`` (``formats=`` a subset of :data:`FORMATS`; :func:`export_paths` names where each format
goes) -- the one export orchestration, used by ``export_all``, ``check_exports`` and
``stacktok audit``::

    NAME.tiktoken                  tiktoken rank file
    NAME-hf/tokenizer.json         tokenizers
    NAME-hf/tokenizer_config.json  transformers (4.57.x and 5.x), chat template inline
    NAME-hf/special_tokens_map.json
    NAME-hf/chat_template.jinja
    NAME.gguf                      vocab-only GGUF for llama.cpp

The same for an imported (v2) artifact: ids in any order, specials anywhere, its roles,
BOS/EOS defaults, split patterns, ``ignore_merges`` and chat template. A format that cannot
express one of these refuses the whole export (:class:`ExportRefused`, one line naming the
format, what and why) rather than write a file that behaves differently.

``export_all`` writes them atomically and, once it has succeeded, removes the
temporary files an interrupted export left in the output directory (only its
own: ``.NAME.tiktoken.*.tmp``, ``.NAME.gguf.*.tmp``, ``.NAME-hf.*.tmp``,
``.NAME-hf.old-*``, ``.stacktok-tmp-*``); ``check_exports`` compares what is
on disk with what the artifact produces, byte for byte.

Out of scope: model weights and ``config.json`` -- those belong to a
checkpoint, which the gate checks but never writes.
"""

from __future__ import annotations

import glob
import os
import shutil
import time
from collections.abc import Sequence
from pathlib import Path

from ..models.bpe.bpe import StackTokenizer
from ..util.atomic import atomic_directory, write_bytes_atomic
from .hf import hf_files
from .tiktoken_fmt import tiktoken_text
from .vocab import ExportRefused

#: every export format, in the order ``render_exports`` renders them
FORMATS = ("tiktoken", "hf", "gguf")


def export_paths(name: str) -> dict[str, str]:
    """Where each of :data:`FORMATS` goes, relative to the output directory (``hf`` is a folder)."""
    return {"tiktoken": f"{name}.tiktoken", "hf": f"{name}-hf", "gguf": f"{name}.gguf"}


def render_format(
    tok: StackTokenizer, fmt: str, *, name: str | None = None, tmp_dir: str | os.PathLike[str] | None = None
) -> dict[str, bytes]:
    """The files of one of :data:`FORMATS`, keyed by path relative to the output directory.

    ``name``: the file stem (default ``tok.name``). ``tmp_dir``: where a scratch file may go if
    one is needed (the output directory). Raises ``ImportError`` when the format's writer needs
    a library that is not installed, ``ValueError`` when ``tok`` cannot be written in it.
    """
    path = export_paths(tok.name if name is None else name)[fmt]
    if fmt == "tiktoken":
        return {path: tiktoken_text(tok).encode("ascii")}
    if fmt == "hf":
        return {f"{path}/{fname}": data for fname, data in hf_files(tok).items()}
    if fmt == "gguf":
        from .gguf_fmt import gguf_bytes

        return {path: gguf_bytes(tok, tmp_dir=tmp_dir)}
    raise ValueError(f"unknown export format {fmt!r}; choose from {', '.join(FORMATS)}")


def render_exports(
    tok: StackTokenizer,
    *,
    name: str | None = None,
    formats: Sequence[str] = FORMATS,
    tmp_dir: str | os.PathLike[str] | None = None,
) -> dict[str, bytes]:
    """Every export file of ``tok`` (or of ``formats`` only), keyed by path relative to the
    output directory; ``name`` and ``tmp_dir`` as in :func:`render_format`."""
    files: dict[str, bytes] = {}
    for fmt in formats:
        files.update(render_format(tok, fmt, name=name, tmp_dir=tmp_dir))
    return files


def _load(artifact: str | os.PathLike[str]) -> StackTokenizer:
    tok = StackTokenizer.load(artifact)
    tok.name = Path(artifact).stem
    return tok


def export_all(
    artifact: str | os.PathLike[str],
    out: str | os.PathLike[str],
    *,
    formats: Sequence[str] = FORMATS,
    notes: list[str] | None = None,
) -> list[Path]:
    """Render every export of ``artifact`` (or of ``formats`` only) into ``out``; return the paths
    written. ``notes`` receives what a user should know about a written file (a ``.tiktoken``
    whose equality with the artifact is left to the gate: ``tiktoken_unproven``).

    Everything is rendered in memory first -- a format that cannot express the artifact
    raises :class:`ExportRefused` before anything is written; the HF directory is swapped in
    whole and each single file is renamed into place, so an interruption
    leaves the previous exports intact.
    """
    started = time.time()
    tok = _load(artifact)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    files = render_exports(tok, formats=formats, tmp_dir=out)
    written: list[Path] = []
    hf_dir = export_paths(tok.name)["hf"]
    with atomic_directory(out / hf_dir) as tmp:
        for rel, data in files.items():
            if rel.startswith(hf_dir + "/"):
                (tmp / rel.split("/", 1)[1]).write_bytes(data)
                written.append(out / rel)
    for rel, data in files.items():
        if not rel.startswith(hf_dir + "/"):
            write_bytes_atomic(out / rel, data)
            written.append(out / rel)
    remove_stale_temps(out, tok.name, older_than=started)
    if notes is not None and "tiktoken" in formats:
        from .tiktoken_fmt import tiktoken_unproven

        reason = tiktoken_unproven(tok)
        if reason:
            notes.append(f"the .tiktoken file is not proven equal to the artifact ({reason})")
    return sorted(written)


def stale_temps(out: str | os.PathLike[str], name: str) -> list[Path]:
    """Temporary files and directories an export of ``name`` may leave in ``out`` if killed."""
    from .gguf_fmt import TMP_PREFIX

    out = Path(out)
    found = set(out.glob(f"{TMP_PREFIX}*"))
    for target in export_paths(name).values():
        target = glob.escape(target)
        found.update(out.glob(f".{target}.*.tmp"))  # util/atomic.py's temp names
        found.update(out.glob(f".{target}.old-*"))  # atomic_directory's set-aside copy
    return sorted(found)


def remove_stale_temps(out: str | os.PathLike[str], name: str, *, older_than: float) -> list[Path]:
    """Remove :func:`stale_temps` last modified before ``older_than`` (a ``time.time()``).

    The age test spares the live temp files of an export into ``out`` that
    started after this one. Returns what was removed.
    """
    removed = []
    for path in stale_temps(out, name):
        try:
            if path.lstat().st_mtime >= older_than:
                continue
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            else:
                path.unlink()
        except FileNotFoundError:
            continue
        removed.append(path)
    return removed


def check_exports(
    artifact: str | os.PathLike[str], out: str | os.PathLike[str], *, formats: Sequence[str] = FORMATS
) -> list[str]:
    """Return one line per export file in ``out`` (of ``formats``) that is missing or differs."""
    tok = _load(artifact)
    problems: list[str] = []
    for rel, data in sorted(render_exports(tok, formats=formats).items()):
        path = Path(out) / rel
        if not path.is_file():
            problems.append(f"{path} is missing")
        elif path.read_bytes() != data:
            problems.append(f"{path} differs from what {artifact} produces (hand-edited or stale)")
    return problems


__all__ = [
    "ExportRefused",
    "FORMATS",
    "export_paths",
    "render_format",
    "render_exports",
    "export_all",
    "check_exports",
    "stale_temps",
    "remove_stale_temps",
]
