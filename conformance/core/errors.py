"""The suite's two error classes: every "bad input" path ends in one of them (exit 2, one line).

- :class:`UsageError`: bad arguments or an unusable combination of them (``--workers 0``, an
  output path inside the directory checked, ``--require`` naming an excluded backend). Every
  command -- ``stacktok gate``, ``fuzz``, ``audit``, the tokenizer commands in ``stacktok_cli``
  and ``python -m conformance`` -- raises this one class.
- :class:`InputError`: a malformed input file, ``"<path>: <where>: <what is wrong>; <fix>"``;
  :class:`FixtureError` a malformed probe/chat/divergence file; :class:`LayoutError` a directory
  that is not a tokenizer directory.

:func:`input_errors` lists every exception class that means "bad input", so the command line
maps all of them to exit 2 in one place (``stacktok_cli``).

Out of scope: internal errors (exit 3) and verdicts (``conformance.core.rows``).
"""

from __future__ import annotations

from pathlib import Path

from stacktok_export.util.untrusted import escape


class _OneLine(Exception):
    """A message printed as one line: control characters (a newline in a file name) escaped, so
    nothing read from a checkpoint can forge a second line of output."""

    def __init__(self, message: object = "") -> None:
        super().__init__(escape(str(message), limit=1 << 20))


class UsageError(_OneLine):
    """Bad arguments or unreadable input: exit 2 with this one-line message."""


class InputError(ValueError):
    """A malformed input file: ``"<path>: <where>: <what is wrong>; <fix>"`` on one line."""

    def __init__(self, path: Path | str, where: str, what: str, fix: str) -> None:
        self.path, self.where, self.what, self.fix = str(path), where, what, fix
        message = f"{path}: {where}: {what}; {fix}"
        ValueError.__init__(self, escape(message, limit=1 << 20))


class FixtureError(_OneLine, ValueError):
    """A fixture file is unreadable or malformed; names the file and line."""


class LayoutError(_OneLine, ValueError):
    """The directory is not a tokenizer directory; the message says what is missing."""


class RequiredUnavailable(Exception):
    """A ``--require``d backend cannot run (its library is absent or DIR lacks the file it reads),
    found before any check runs: the run stops at once with verdict INCOMPLETE (exit 4)."""


def input_errors() -> tuple[type[Exception], ...]:
    """Every exception that means "bad input" (exit 2, one line): a usage error, a malformed file,
    an unreadable fixture or user file, a directory that is not a tokenizer directory, an artifact
    the reference refuses, a file refused before reading (a link out of the directory, a device,
    over its size limit: ``stacktok_export.util.untrusted``). One list for ``stacktok``,
    ``stacktok gate`` and ``python -m conformance``."""
    from stacktok_export import ArtifactError
    from stacktok_export.util.limits import FlagError
    from stacktok_export.util.untrusted import UntrustedFileError

    return (UsageError, InputError, FixtureError, LayoutError, ArtifactError, UntrustedFileError, FlagError)
