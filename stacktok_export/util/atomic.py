"""Atomic writes: a file or a whole directory appears complete or not at all.

Out of scope: cross-filesystem moves and fsync of parent directories on exotic
filesystems; we rely on POSIX ``os.replace`` within one directory.
"""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def write_bytes_atomic(path: str | os.PathLike[str], data: bytes) -> None:
    """Write ``data`` to ``path`` via a temp file in the same directory + rename."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        os.fchmod(fd, 0o644)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def write_report(path: str | os.PathLike[str], text: str) -> None:
    """A report at ``path``: a character device or a FIFO (``/dev/stdout``, a pipe) is written
    through, never replaced by a file; a symlink is followed and its target written atomically;
    anything else as :func:`write_text_atomic`."""
    real = os.path.realpath(path)
    try:
        mode = os.stat(real).st_mode
    except OSError:
        mode = 0
    if stat.S_ISCHR(mode) or stat.S_ISFIFO(mode):
        with open(real, "w", encoding="utf-8", newline="\n") as f:
            f.write(text)
        return
    write_text_atomic(real, text)


def write_text_atomic(path: str | os.PathLike[str], text: str) -> None:
    """UTF-8, ``\\n`` line endings, atomically."""
    write_bytes_atomic(path, text.encode("utf-8"))


@contextmanager
def atomic_directory(path: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a fresh temp directory; on success it replaces ``path`` whole.

    If the body raises, the temp directory is removed and ``path`` keeps its
    previous contents. The swap renames the old directory aside first, so a
    crash between the two renames leaves ``path.old-*`` beside it, never a
    half-written ``path``.
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent))
    try:
        yield tmp
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    os.chmod(tmp, 0o755)
    if target.exists():
        aside = Path(tempfile.mkdtemp(prefix=f".{target.name}.old-", dir=target.parent))
        os.rmdir(aside)
        os.replace(target, aside)
        os.replace(tmp, target)
        shutil.rmtree(aside, ignore_errors=True)
    else:
        os.replace(tmp, target)
