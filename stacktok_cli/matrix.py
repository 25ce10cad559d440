"""``stacktok matrix [--json]``: the support matrix this install ships (conformance/support_matrix.jsonl).

The table is the one ``nox -s matrix`` commits to ``SUPPORT_MATRIX.md`` and the README (one row
per backend and version, then the bisected floors); ``--json`` prints the committed rows and
floors as they are stored, keys sorted. It reads the package data, never the network, so it
says what *this* release was measured against.

Out of scope: measuring (``nox -s conformance``, ``nox -s floor``), comparing rows
(``conformance.matrix.changes``).
"""

from __future__ import annotations

import argparse
import json

from conformance.core.errors import UsageError
from conformance.matrix import changes

HELP = "print the support matrix shipped with this release (--json: the committed rows)"


def add_arguments(m: argparse.ArgumentParser) -> None:
    m.add_argument("--json", action="store_true", help="print the rows and floors as JSON (default: a table)")


def main(args: argparse.Namespace) -> int:
    try:
        rows = changes.load_rows(changes.BASELINE)
    except changes.RowsError as exc:
        raise UsageError(
            f"{exc} (the support matrix is missing from this install; reinstall stacktok)"
        ) from None
    floors = changes.load_floors(changes.BASELINE)
    if args.json:
        doc = {"floors": floors, "rows": [{k: v for k, v in r.items()} for r in rows]}
        print(json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=False))
    else:
        print(changes.render(rows, floors), end="")
    return 0
