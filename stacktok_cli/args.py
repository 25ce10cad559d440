"""Argument helpers every ``stacktok`` command shares: the parser class, corpus flags, input checks.

- :class:`Parser`: an ``argparse`` parser whose errors are one line ending in a ``--help`` hint;
  ``--artifact`` and its one default are the suite's (``conformance.core.arguments``: the
  lowest layer every command may import), re-exported here as :func:`add_artifact_flag` and
  :func:`artifact_path`.
- :func:`add_corpus_arguments` / :func:`corpus_options`: ``--field``, ``--column``,
  ``--text-docs`` and ``--errors`` (``train`` and ``pack`` read corpora the same way).
- :func:`input_paths`, :func:`check_workers`, :func:`check_out_file`: checks that raise
  :class:`~conformance.core.errors.UsageError` (exit 2) with a message that says the fix.

Out of scope: any command's own flags (each command module adds those) and the exit mapping
(``stacktok_cli.main``).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from conformance.core.arguments import add_artifact_flag, artifact_path
from conformance.core.errors import UsageError
from stacktok_export.corpus.corpus import CorpusError, CorpusOptions, expand_inputs

__all__ = [
    "Parser",
    "add_artifact_flag",
    "add_corpus_arguments",
    "artifact_path",
    "check_out_file",
    "check_workers",
    "corpus_options",
    "input_paths",
]


class Parser(argparse.ArgumentParser):
    """Usage errors as one line: ``stacktok: error: <what> (see `<prog> --help`)``, exit 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"stacktok: error: {message} (see `{self.prog} --help`)\n")


def add_corpus_arguments(p: argparse.ArgumentParser) -> None:
    """How documents are read from text, JSON Lines and Parquet inputs."""
    p.add_argument("--field", default="text", help="JSON Lines: the document field (default: text)")
    p.add_argument("--column", default="text", help="Parquet: the document column (default: text)")
    p.add_argument(
        "--text-docs",
        choices=("file", "paragraph", "line"),
        default="file",
        help="text files: one document per file, per blank-line-separated paragraph, or per line "
        "(default: file)",
    )
    p.add_argument(
        "--errors",
        choices=("strict", "replace", "skip"),
        default="strict",
        help="invalid UTF-8: stop naming file and byte, U+FFFD, or drop the document (default: strict)",
    )


def corpus_options(args: argparse.Namespace) -> CorpusOptions:
    """The flags of :func:`add_corpus_arguments` as :class:`CorpusOptions`."""
    try:
        return CorpusOptions(
            text_docs=args.text_docs, field=args.field, column=args.column, errors=args.errors
        )
    except CorpusError as exc:
        raise UsageError(str(exc)) from None


def input_paths(items: Sequence[str]) -> list[str]:
    """Files, globs and ``-`` expanded to readable paths (a pattern matching nothing is a usage error)."""
    try:
        return expand_inputs(items)
    except CorpusError as exc:
        raise UsageError(str(exc)) from None


def check_workers(workers: int | None) -> None:
    """``--workers`` is at least 1 when given (``None``: the command's default)."""
    if workers is not None and workers < 1:
        raise UsageError(f"--workers must be at least 1, got {workers}")


def check_out_file(path: Path, *, flag: str) -> None:
    """An output file path must not be a directory and its parent must exist."""
    if path.is_dir():
        raise UsageError(f"{flag} {path} is a directory; give a file path such as {path / 'out.json'}")
    if not path.parent.is_dir():
        raise UsageError(f"{flag} {path}: directory {path.parent} does not exist; create it first")
