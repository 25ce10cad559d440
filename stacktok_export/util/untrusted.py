"""Reading a file that came from the internet: a regular file, where it should be, not too big.

A checkpoint directory is hostile until proven otherwise: a cloned repository keeps symlinks
(``chat_template.jinja -> ~/.ssh/id_rsa``), a file can be a FIFO that blocks the reader forever or
``/dev/zero`` that never ends. :func:`read_untrusted` is the one reader for such files:

1. the name is looked at without following it (``lstat``): a symlink is followed only when its
   final target lies inside one of ``roots`` (the checkpoint directory, or a Hugging Face cache
   repository's folder, whose snapshots are symlinks into ``blobs/``); anywhere else it is
   refused naming the file and where the link points -- never anything read from it;
2. the target must be a regular file: a FIFO, a socket, a character or block device or a
   directory is refused before it is opened (opening a FIFO blocks; a device may have effects);
3. its size is checked against ``limit`` before reading (``fstat`` of the opened descriptor, which
   is checked to be the same inode ``stat`` saw), and at most ``limit + 1`` bytes are read, so a
   file that grows while read is refused too.

Every refusal is :class:`UntrustedFileError`: ``"<path>: file: <what>; <fix>"``, one line, with
the path and the link text escaped (a newline in a file name cannot forge a second line).

Why by hand: no library checks a path against a set of roots after resolving links and reads it
bounded; ``pathlib``/``open`` follow links and read to the end.

Out of scope: what the bytes mean (each parser); files the user names on the command line are
read with ``roots=()`` (anywhere, still regular and bounded).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Sequence
from pathlib import Path

#: characters of a link's text quoted in a message (a path named in full: PATH_MAX is 4,096)
_SHOW = 160
_PATH = 4096

_KINDS = (
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISDIR, "a directory"),
)


class UntrustedFileError(ValueError):
    """A file refused before (or while) reading it: ``"<path>: file: <what>; <fix>"``."""

    def __init__(self, path: os.PathLike[str] | str, what: str, fix: str) -> None:
        self.path, self.where, self.what, self.fix = escape(os.fspath(path), _PATH), "file", what, fix
        super().__init__(f"{self.path}: file: {what}; {fix}")


def escape(text: str, limit: int = _SHOW) -> str:
    """``text`` safe for one line of a log: control characters as escapes, cut to ``limit``.

    >>> escape("a\\nverdict: PASS")
    'a\\\\nverdict: PASS'
    """
    out = "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)
    return out if len(out) <= limit else out[: limit - 3] + "..."


def kind_of(mode: int) -> str | None:
    """What a ``stat`` mode is when it is not a regular file (``None`` for a regular file)."""
    for test, name in _KINDS:
        if test(mode):
            return name
    return None if stat.S_ISREG(mode) else "not a regular file"


def inside(path: Path, roots: Sequence[Path]) -> bool:
    """Whether the resolved ``path`` is one of ``roots`` or below one (roots resolved here too)."""
    for root in roots:
        real = Path(os.path.realpath(root))
        if path == real or real in path.parents:
            return True
    return False


def check_untrusted(
    path: os.PathLike[str] | str, *, roots: Sequence[Path] = (), limit: int | None = None
) -> Path:
    """The resolved path of ``path`` once it passes steps 1-2 of the module docstring (and the size
    by ``stat``, when ``limit`` is given); :class:`UntrustedFileError` otherwise. Opens nothing."""
    name = Path(path)
    try:
        link = os.lstat(name)
    except OSError as exc:
        raise UntrustedFileError(
            name, f"cannot be read ({exc.strerror or exc})", "check that it exists"
        ) from None
    real = Path(os.path.realpath(name))
    if stat.S_ISLNK(link.st_mode) and roots:
        refuse_link_out(name, roots)
    try:
        st = os.stat(name)
    except OSError as exc:
        target = escape(os.readlink(name)) if stat.S_ISLNK(link.st_mode) else ""
        what = f"is a symlink to {target}, which cannot be read ({exc.strerror})" if target else exc.strerror
        raise UntrustedFileError(name, str(what), "download or copy it again") from None
    kind = kind_of(st.st_mode)
    if kind is not None:
        via = f" (a symlink to {escape(os.readlink(name))})" if stat.S_ISLNK(link.st_mode) else ""
        raise UntrustedFileError(name, f"is {kind}{via}, not a regular file", "put the file itself there")
    if limit is not None and st.st_size > limit:
        raise too_big(name, st.st_size, limit)
    return real


def refuse_link_out(path: os.PathLike[str] | str, roots: Sequence[Path]) -> None:
    """:class:`UntrustedFileError` when ``path`` is a symlink whose final target (existing or not)
    lies outside every one of ``roots``; the message names the link's text, never the target's."""
    if not os.path.islink(path) or inside(Path(os.path.realpath(path)), roots):
        return
    where = ", ".join(escape(str(r), _PATH) for r in roots)
    raise UntrustedFileError(
        path,
        f"is a symlink to {escape(os.readlink(path))}, outside {where}: the gate reads only the "
        "checkpoint's own files",
        "copy the file itself into the directory (cp --dereference), if it really belongs to it",
    )


def too_big(path: os.PathLike[str] | str, size: int, limit: int) -> UntrustedFileError:
    return UntrustedFileError(
        path,
        f"is {size:,} bytes, over the {limit:,}-byte limit for this kind of file",
        "if it is a real file this large, raise the limit with --max-file-mb",
    )


def read_untrusted(path: os.PathLike[str] | str, *, limit: int, roots: Sequence[Path] = ()) -> bytes:
    """The bytes of ``path``, read as the module docstring says (at most ``limit`` bytes)."""
    real = check_untrusted(path, roots=roots, limit=limit)
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOCTTY", 0)
    try:
        fd = os.open(real, flags | getattr(os, "O_NOFOLLOW", 0))
    except OSError as exc:
        raise UntrustedFileError(
            path, f"cannot be read ({exc.strerror or exc})", "check its permissions"
        ) from None
    try:
        st = os.fstat(fd)
        kind = kind_of(st.st_mode)
        if kind is not None:  # swapped between the check and the open
            raise UntrustedFileError(path, f"is {kind}, not a regular file", "put the file itself there")
        if st.st_size > limit:
            raise too_big(path, st.st_size, limit)
        chunks, total = [], 0
        while True:
            chunk = os.read(fd, min(1 << 20, limit + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
            if total > limit:
                raise too_big(path, total, limit)
        return b"".join(chunks)
    finally:
        os.close(fd)
