"""The flags every command shares: ``--artifact`` with its one default, and comma lists.

- :func:`add_artifact_flag`: ``--artifact PATH`` with one help text (:data:`ARTIFACT_HELP`), for
  every command that reads an artifact: ``stacktok gate``, ``fuzz``, ``audit``, ``python -m
  conformance``, and ``stacktok encode``, ``decode``, ``export``, ``pack``, ``retokenize``;
- :func:`artifact_path`: the one default rule. ``--artifact`` as given, else the checkout's
  ``tokenizer/stack100m-32768.json`` when running from a stacktok checkout, else the copy shipped
  in the package (:func:`stacktok_export.default_artifact_path`; a test keeps the two identical);
- :func:`comma_list`: the ``argparse`` type of every ``a,b,c`` flag (``--backends``,
  ``--require``, ``--skip``, ``--generators``): names stripped, empty ones and repeats dropped,
  an unknown name refused with the known ones listed.

    >>> comma_list(("a", "b"), what="letter")(" b, a,,b")
    ['b', 'a']

Out of scope: each command's own flags (its module adds them); what an artifact holds
(``stacktok_export.artifact``).
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Sequence
from pathlib import Path

from stacktok_export import default_artifact_path

#: the help of every ``--artifact``
ARTIFACT_HELP = (
    "artifact JSON (default: tokenizer/stack100m-32768.json of the stacktok checkout, "
    "else the one shipped in the package)"
)


def add_artifact_flag(p: argparse.ArgumentParser) -> None:
    """``--artifact PATH`` (``None`` when not given: :func:`artifact_path` applies the default)."""
    p.add_argument("--artifact", type=Path, default=None, metavar="PATH", help=ARTIFACT_HELP)


def artifact_path(given: str | os.PathLike[str] | None) -> Path:
    """The artifact a command reads: ``given``, else the default (module docstring)."""
    return default_artifact_path() if given is None else Path(given)


def comma_list(
    choices: Sequence[str], *, what: str, none: bool = False, at_least_one: bool = False
) -> Callable[[str], list[str]]:
    """An ``argparse`` type: ``"a, b,a"`` -> ``["a", "b"]``, each name one of ``choices``.

    ``none``: the word ``none`` alone means the empty list; ``at_least_one``: an empty list is
    refused. Errors are ``argparse.ArgumentTypeError`` naming the choices (a usage error, exit 2).
    """
    known = ", ".join(choices) + (" or none" if none else "")

    def parse(value: str) -> list[str]:
        names = list(dict.fromkeys(n.strip() for n in value.split(",") if n.strip()))
        if none and names == ["none"]:
            return []
        unknown = [n for n in names if n not in choices]
        if unknown:
            raise argparse.ArgumentTypeError(f"unknown {what}(s) {unknown}; choose from {known}")
        if at_least_one and not names:
            raise argparse.ArgumentTypeError(f"name at least one {what}; choose from {known}")
        return names

    parse.__name__ = f"{what}_list"  # what argparse names in its own messages
    return parse
