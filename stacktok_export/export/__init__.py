"""Exporters: every ecosystem format, rendered from one artifact as exact bytes.

``render_exports`` returns ``{relative path: bytes}`` for an artifact named
``NAME``::

    NAME.tiktoken                  tiktoken rank file
    NAME-hf/tokenizer.json         tokenizers
    NAME-hf/tokenizer_config.json  transformers (4.57.x and 5.x), chat template inline
    NAME-hf/special_tokens_map.json
    NAME-hf/chat_template.jinja
    NAME.gguf                      vocab-only GGUF for llama.cpp

``export_all`` writes them atomically; ``check_exports`` compares what is on
disk with what the artifact produces, byte for byte.

Out of scope: model weights and ``config.json`` -- those belong to a
checkpoint, which the gate checks but never writes.
"""

from __future__ import annotations

import os
from pathlib import Path

from .._atomic import atomic_directory, write_bytes_atomic
from ..bpe import StackTokenizer
from .hf import hf_files
from .tiktoken_fmt import tiktoken_text


def render_exports(tok: StackTokenizer) -> dict[str, bytes]:
    """Every export file of ``tok``, keyed by path relative to the output directory."""
    from .gguf_fmt import gguf_bytes

    name = tok.name
    files = {f"{name}.tiktoken": tiktoken_text(tok).encode("ascii")}
    for fname, data in hf_files(tok).items():
        files[f"{name}-hf/{fname}"] = data
    files[f"{name}.gguf"] = gguf_bytes(tok)
    return files


def _load(artifact: str | os.PathLike[str]) -> StackTokenizer:
    tok = StackTokenizer.load(artifact)
    tok.name = Path(artifact).stem
    return tok


def export_all(artifact: str | os.PathLike[str], out: str | os.PathLike[str]) -> list[Path]:
    """Render every export of ``artifact`` into ``out``; return the paths written.

    Everything is rendered in memory first; the HF directory is swapped in
    whole and each single file is renamed into place, so an interruption
    leaves the previous exports intact.
    """
    tok = _load(artifact)
    files = render_exports(tok)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    hf_dir = f"{tok.name}-hf"
    with atomic_directory(out / hf_dir) as tmp:
        for rel, data in files.items():
            if rel.startswith(hf_dir + "/"):
                (tmp / rel.split("/", 1)[1]).write_bytes(data)
                written.append(out / rel)
    for rel, data in files.items():
        if not rel.startswith(hf_dir + "/"):
            write_bytes_atomic(out / rel, data)
            written.append(out / rel)
    return sorted(written)


def check_exports(artifact: str | os.PathLike[str], out: str | os.PathLike[str]) -> list[str]:
    """Return one line per export file in ``out`` that is missing or differs."""
    tok = _load(artifact)
    problems: list[str] = []
    for rel, data in sorted(render_exports(tok).items()):
        path = Path(out) / rel
        if not path.is_file():
            problems.append(f"{path} is missing")
        elif path.read_bytes() != data:
            problems.append(f"{path} differs from what {artifact} produces (hand-edited or stale)")
    return problems


__all__ = ["render_exports", "export_all", "check_exports"]
