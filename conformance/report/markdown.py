"""Rows as a Markdown report (a pull-request comment, a model card): verdict, counts, failures, grid, rows.

Under the heading come the rows per status (``conformance.report.failures.summary``), the
backends' versions, then ``#### Failures``: each error, fail and missing row with its message,
its fix (a cause where ``conformance.checks.causes`` found one) and, for a failing
conformance row, its probe, text and id window with both sides' bytes in a code block. Then the
grid (:func:`conformance.report.html.grid_markdown`) and one table line per row, failures
first, ``— fix: ...`` where the row failed, errored, warned or is missing. Status words, not
emoji: a reader without an emoji font sees them too. ``|`` and newlines in messages are escaped.

Out of scope: deciding anything (``conformance.core.rows``), writing the file (the command).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from conformance.core.rows import Row
from conformance.report.failures import FIRST, detail_lines, failures_first, fix_text, status_word, summary
from conformance.report.html import grid_markdown

#: statuses whose detail names the fix
WITH_FIX = ("fail", "error", "warn", "missing")


def to_markdown(
    rows: Sequence[Row], *, verdict: str, versions: dict[str, str], checked: str | None = None
) -> str:
    """``### Tokenizer release gate: VERDICT``, what was checked (a directory, or
    ``org/name@revision (commit ...)`` for a Hub id), counts, versions, failures, the grid, one line a row."""
    lines = [
        f"### Tokenizer release gate: {verdict}",
        "",
        *([f"Checked: `{_code(checked)}`", ""] if checked else []),
        f"**{summary(rows)}**",
        "",
        "Backends: " + ", ".join(f"{k} {v}" for k, v in sorted(versions.items()) if v),
        "",
        *failures_markdown(rows),
        grid_markdown(rows),
        "",
        "| check | backend | result | detail |",
        "|---|---|---|---|",
    ]
    for r in failures_first(rows):
        fix = f" — {fix_text(r)}" if r.fix and r.status in WITH_FIX else ""
        lines.append(f"| {r.check} | {r.backend} | {status_word(r)} | {_cell(r.message + fix)} |")
    return "\n".join(lines) + "\n"


def failures_markdown(rows: Sequence[Row]) -> list[str]:
    """``#### Failures`` and one list item per error, fail or missing row (nothing when none)."""
    bad = [r for r in rows if r.status in FIRST]
    if not bad:
        return []
    out = [f"#### Failures ({len(bad)})", ""]
    for r in bad:
        out.append(f"- **{status_word(r)}** `{r.check}` [{r.backend}]: {_line(r.message)}")
        if r.fix:
            out.append(f"  - {_line(fix_text(r))}")
        window = detail_lines(r.window) if r.status == "fail" else []
        if window:
            fence = "`" * max(3, 1 + max(len(m) for m in re.findall("`+", "\n".join(window)) or [""]))
            out += ["", f"  {fence}text", *(f"  {line}" for line in window), f"  {fence}"]
    return out + [""]


def _code(text: str) -> str:
    """``text`` safe inside one Markdown code span (backticks and newlines would end it)."""
    return text.replace("`", "'").replace("\n", " ")


def _line(text: str) -> str:
    return text.replace("\n", " ")


def _cell(text: str) -> str:
    return _line(text).replace("|", "\\|")
