"""Before anything is read: every entry of the checkpoint directory is the checkpoint's own.

The backends read more of DIR than validation parses (transformers looks for ``vocab.json``,
``merges.txt``, ``tokenizer.model``, ``processor_config.json`` ...), so a link to a secret under
any name could reach a report. :func:`guard_directory` walks DIR's entries (and
``additional_chat_templates/``) once and refuses, naming the entry and where it points:

- a symlink whose target lies outside ``conformance.core.layout.trusted_roots`` (DIR itself, or
  for a Hugging Face cache snapshot its repository's ``blobs/``, where every snapshot file
  legitimately points);
- a FIFO, socket or device (directly or behind a link inside DIR): opening a FIFO blocks forever.

Weights are passed over (``*.safetensors``, ``*.bin``, ...: no tokenizer backend reads them, and a
training run may well link them to shared storage); so are other subdirectories (transformers
reads only ``additional_chat_templates/``). The walk stops at :data:`MAX_ENTRIES` entries.

Out of scope: what a regular file holds (the per-kind validators, which read it bounded:
``conformance.validate.jsonfile.read_bytes``); files outside DIR that the user named on the
command line (``--probes``, ``--text``, ``--artifact``: read bounded, from anywhere).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from conformance.core.layout import trusted_roots
from conformance.validate.common import fail
from stacktok_export.util.untrusted import UntrustedFileError, kind_of, refuse_link_out

#: an entry with one of these endings is weights or an optimizer state: no tokenizer backend reads it
WEIGHTS = (".safetensors", ".bin", ".pt", ".pth", ".ckpt", ".h5", ".msgpack", ".onnx", ".npz", ".pdparams")
#: more entries than any real checkpoint directory holds (a sharded 405B model: ~200)
MAX_ENTRIES = 100_000
#: the subdirectories a backend reads files from
READ_SUBDIRS = ("additional_chat_templates",)


def guard_directory(directory: Path, roots: Sequence[Path] | None = None) -> None:
    """Refuse the first entry of ``directory`` that is a link out of ``roots`` (default:
    :func:`trusted_roots`) or a special file (module docstring); weights are passed over."""
    roots = trusted_roots(directory) if roots is None else tuple(roots)
    top = Path(directory)
    seen = 0
    for folder in (top, *(top / d for d in READ_SUBDIRS)):
        if folder != top and not folder.is_dir():
            continue  # absent, or an entry of DIR already checked (a link out was refused)
        with os.scandir(folder) as entries:
            for entry in entries:
                seen += 1
                if seen > MAX_ENTRIES:
                    fail(
                        top,
                        "directory",
                        f"holds more than {MAX_ENTRIES:,} entries, more than any checkpoint",
                        "pass the directory that holds the tokenizer files",
                    )
                if not entry.name.endswith(WEIGHTS):
                    _check_entry(Path(entry.path), roots)


def _check_entry(path: Path, roots: Sequence[Path]) -> None:
    """A link out of ``roots`` (dangling or not, to a file or a directory), or a special file."""
    refuse_link_out(path, roots)
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return  # a dangling link inside DIR: the reader of that name says so when it matters
    kind = kind_of(mode)
    if kind is not None and kind != "a directory":
        raise UntrustedFileError(path, f"is {kind}, not a regular file", "put the file itself there")
