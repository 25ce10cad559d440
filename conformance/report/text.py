"""The terminal view of rows: counts per status, the failures first with their windows, the verdict.

Every command that judges a directory prints its rows through here: ``stacktok gate`` (table,
then verdict) and ``python -m conformance`` (table, verdict). :func:`render_table` opens with
the rows per status (``summary:``), then lists the error, fail and missing rows before the rest
(``conformance.report.failures``); below each failing row that carries one come its probe, its
text and the id window with both sides' bytes (at most :data:`MAX_WINDOWS` of them).

    >>> from conformance.core.rows import Row
    >>> print(render_table([Row("config.eos", "files", "fail", "eos is 0", "set it to 32765")]))
    summary: 1 FAIL
    check       backend              result    detail / fix
    config.eos  files                FAIL      eos is 0 -> set it to 32765

Out of scope: deciding the verdict (``conformance.core.rows``), files (``conformance.report.junit``,
``markdown``, ``html``, ``json``).
"""

from __future__ import annotations

from collections.abc import Sequence

from conformance.core.rows import Row
from conformance.report.failures import WORDS, detail_lines, failures_first, status_word, summary
from stacktok_export.util.untrusted import escape

#: the result column's word per status (a pass with declared divergences reads ``DECLARED``)
MARK = WORDS
#: at most this many first-difference windows are printed
MAX_WINDOWS = 10
INDENT = " " * 6


def render_table(rows: Sequence[Row], *, limit: int = MAX_WINDOWS) -> str:
    """summary, then check, backend, result, detail (``-> fix`` where the row did not pass or
    skip), failures first, each failing row's window below it."""
    width = max((len(r.check) for r in rows), default=10)
    lines = [f"summary: {summary(rows)}", f"{'check':{width}s}  {'backend':20s} {'result':8s}  detail / fix"]
    shown = 0
    for r in failures_first(rows):
        detail = f"{r.message} -> {r.fix}" if r.fix and r.status not in ("pass", "skip") else r.message
        # one line per row: a control character from a checkpoint (a file name) cannot forge another
        lines.append(
            f"{r.check:{width}s}  {r.backend:20s} {status_word(r):8s}  {escape(detail, limit=1 << 16)}"
        )
        if r.status == "fail" and r.window and shown < limit:
            shown += 1
            lines += [INDENT + line for line in detail_lines(r.window)]
    return "\n".join(lines)


def render_verdict(verdict: str, *, seconds: float | None = None, timings: str = "") -> str:
    """``verdict: PASS``, with the wall time and per-backend timings when given."""
    if seconds is None:
        return f"verdict: {verdict}"
    return f"verdict: {verdict} in {seconds:.1f}s ({timings})"
