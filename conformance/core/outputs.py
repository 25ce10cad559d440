"""Outputs never touch inputs: where a report may be written, checked before anything runs.

:func:`check_outputs` is the one rule for every report flag of a tool (``--json``, ``--junit``,
``--markdown``, ``--html``, ``--out``), in flag order:

- not inside the directory checked (:func:`conformance.core.layout.refuse_outputs_inside`), and
  not any file the run reads, wherever it is (the ``NAME.gguf`` beside ``NAME-hf``, the artifact,
  a ``--probes`` file, a Hugging Face cache blob): compared after resolving links;
- not a directory, a socket or a block device; a character device or a FIFO (``/dev/stdout``, a
  pipe) is written through, never replaced; a symlink is written at its target;
- its directory exists and this process can create a file in it (tried: a temporary file is
  created and removed), so an unwritable path fails in seconds, not after the whole run.

Writing is :func:`stacktok_export.util.atomic.write_report` (temp file + rename for a regular file,
straight through for a device or FIFO).

Out of scope: what a report holds (``conformance.report``).
"""

from __future__ import annotations

import os
import stat
import tempfile
from collections.abc import Iterable
from pathlib import Path

from conformance.core.errors import UsageError
from conformance.core.layout import refuse_outputs_inside
from stacktok_export.util.untrusted import kind_of


def check_outputs(
    directory: Path | None, outputs: dict[str, Path | None], *, reads: Iterable[Path | None] = (), tool: str
) -> None:
    """Each report path of ``outputs`` (flag -> path, None: not asked for) as the module docstring
    says; ``reads`` are the files the run reads outside ``directory`` (None: a run without one,
    such as the audit of an artifact alone)."""
    read = {Path(os.path.realpath(p)): Path(p) for p in reads if p is not None}
    for flag, p in outputs.items():
        if p is None:
            continue
        if directory is not None:
            refuse_outputs_inside(directory, {flag: p}, tool=tool)
        full = Path(os.path.realpath(p))
        if full in read:
            raise UsageError(
                f"{flag} {p} is {read[full]}, a file the {tool} reads: it never writes over its inputs; "
                "write the report elsewhere"
            )
        _check_kind(flag, Path(p), full)
        _check_writable(flag, Path(p), full.parent)


def _check_kind(flag: str, given: Path, full: Path) -> None:
    try:
        mode = os.stat(full).st_mode
    except FileNotFoundError:
        return
    except OSError as exc:
        raise UsageError(f"{flag} {given}: cannot be written ({exc.strerror})") from None
    if stat.S_ISDIR(mode):
        raise UsageError(f"{flag} {given} is a directory; give a file path such as {given / 'gate-report'}")
    kind = kind_of(mode)
    if kind is not None and not (stat.S_ISCHR(mode) or stat.S_ISFIFO(mode)):
        raise UsageError(f"{flag} {given} is {kind}; give a file path, /dev/stdout or a pipe")


def _check_writable(flag: str, given: Path, parent: Path) -> None:
    if not parent.is_dir():
        raise UsageError(f"{flag} {given}: directory {parent} does not exist; create it first")
    if stat.S_ISCHR(_mode(given)) or stat.S_ISFIFO(_mode(given)):
        return  # written through: the device or pipe itself must be writable
    try:
        with tempfile.NamedTemporaryFile(dir=parent, prefix=".stacktok-write-test-"):
            pass
    except OSError as exc:
        raise UsageError(
            f"{flag} {given}: cannot write in {parent} ({exc.strerror or exc}); choose a writable directory"
        ) from None


def _mode(path: Path) -> int:
    try:
        return os.stat(path).st_mode
    except OSError:
        return 0
