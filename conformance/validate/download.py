"""A file that is not really there: a broken symlink, a directory, a git-lfs pointer, an empty file.

Real checkpoints arrive through ``git clone`` without git-lfs (each large file is a 130-byte
pointer), half-finished downloads, and the Hugging Face cache (every file a symlink into
``blobs/``, dangling while a blob is missing). :func:`present` says whether a name exists in a
directory at all -- a dangling symlink or a directory in a file's place counts, so it is read and
refused instead of skipped in silence; :func:`unreadable` turns the ``OSError`` of reading it into
the one-line failure; :func:`refuse_placeholder` names a git-lfs pointer or an empty file.

Out of scope: what a real file must hold (one module per file kind); truncation inside a file
(each parser names the line or byte where it ends early).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import NoReturn

from conformance.validate.common import fail

LFS_PREFIX = b"version https://git-lfs.github.com/spec/"
_FETCH = "download it again (`git lfs pull`, or `huggingface-cli download` for the whole directory)"


def present(path: Path) -> bool:
    """Whether anything is at ``path``: a file, a directory, or a symlink even to nothing."""
    return os.path.lexists(path)


def unreadable(path: Path, exc: OSError) -> NoReturn:
    """The failure for a file that cannot be opened: a dangling symlink, a directory, or the OS reason."""
    path = Path(path)
    if path.is_symlink() and not path.exists():
        fail(
            path,
            "file",
            f"is a symlink to {os.readlink(path)}, which does not exist (a broken or unfinished download)",
            _FETCH,
        )
    if path.is_dir():
        fail(path, "file", "is a directory, not a file", f"put the file itself at {path.name}")
    fail(path, "file", f"cannot be read ({exc.strerror or exc})", "check that it exists and is readable")


def refuse_placeholder(path: Path, head: bytes) -> None:
    """``head`` (the file's first bytes, or all of it) as a git-lfs pointer or an empty file fails."""
    if head.startswith(LFS_PREFIX):
        fail(path, "file", "is a git-lfs pointer, not the file (fetched without git-lfs)", _FETCH)
    if not head.strip():
        what = "is empty (0 bytes)" if not head else "holds only whitespace"
        fail(path, "file", what, f"the download did not finish: {_FETCH}")
