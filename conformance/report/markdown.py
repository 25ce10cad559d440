"""Rows as a Markdown report (a pull-request comment, a model card): verdict, versions, grid, rows.

The grid is :func:`conformance.report.html.grid_markdown` (one line per check, one column per
backend); the table below it has every row, its result and its detail (``— fix: ...`` where
the row failed, errored, warned or is missing). ``|`` and newlines in messages are escaped.

Out of scope: deciding anything (``conformance.core.rows``), writing the file (the command).
"""

from __future__ import annotations

from collections.abc import Sequence

from conformance.core.rows import Row
from conformance.report.html import grid_markdown

ICON = {
    "pass": "✅ pass",
    "fail": "❌ fail",
    "warn": "⚠️ warn",
    "missing": "➖ missing",
    "skip": "➖ skip",
    "error": "💥 error",
    "info": "ℹ️ info",
}
#: statuses whose detail names the fix
WITH_FIX = ("fail", "error", "warn", "missing")


def to_markdown(rows: Sequence[Row], *, verdict: str, versions: dict[str, str]) -> str:
    """``### Tokenizer release gate: VERDICT``, the backends' versions, the grid, one line a row."""
    lines = [
        f"### Tokenizer release gate: {verdict}",
        "",
        "Backends: " + ", ".join(f"{k} {v}" for k, v in sorted(versions.items()) if v),
        "",
        grid_markdown(rows),
        "",
        "| check | backend | result | detail |",
        "|---|---|---|---|",
    ]
    for r in rows:
        fix = f" — fix: {r.fix}" if r.fix and r.status in WITH_FIX else ""
        detail = (r.message + fix).replace("|", "\\|").replace("\n", " ")
        lines.append(f"| {r.check} | {r.backend} | {ICON[r.status]} | {detail} |")
    return "\n".join(lines) + "\n"
