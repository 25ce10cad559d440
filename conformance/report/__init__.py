"""Rendering rows: one renderer per format, used by every command that judges a directory.

- ``conformance.report.text``: the terminal table (failures first, with their windows), the verdict line;
- ``conformance.report.failures``: what every format shares -- counts per status, failures first,
  status words, a failing row's probe, text and id window;
- ``conformance.report.junit`` / ``markdown`` / ``html``: the report files CI and people read;
- ``conformance.report.json``: the one JSON serialisation (gate and ``python -m conformance``);
- ``conformance.report.matrix``: support-matrix rows and their Markdown table;
- ``conformance.report.entry``: :func:`run_main`, exceptions -> exit 2 / 3 in one line.

Out of scope: deciding pass/fail (``conformance.core.rows.exit_code`` does, over the rows).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from conformance.report.entry import run_main
from conformance.report.json import results_document, to_json
from conformance.report.matrix import MATRIX_MARKS, matrix_row, result_conforms, support_matrix
from conformance.report.text import render_table, render_verdict

if TYPE_CHECKING:
    from conformance.checks.runner import BackendResult


def render_results(results: Sequence[BackendResult], *, stale: Sequence[str] = ()) -> str:
    """Backend results as the terminal shows them: their rows, failures first with their
    first-difference windows (:func:`render_table`)."""
    from conformance.checks.runner import result_rows

    return render_table(result_rows(results, stale=stale)) + "\n"


__all__ = [
    "MATRIX_MARKS",
    "matrix_row",
    "render_table",
    "render_results",
    "render_verdict",
    "result_conforms",
    "results_document",
    "run_main",
    "support_matrix",
    "to_json",
]
