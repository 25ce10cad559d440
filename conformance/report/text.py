"""The terminal view of rows: one table line per row, the first differences, the verdict line.

Every command that judges a directory prints its rows through here: ``stacktok gate`` (table,
then verdict) and ``python -m conformance`` (table, first-difference windows, verdict).

    >>> from conformance.core.rows import Row
    >>> print(render_table([Row("config.eos", "files", "fail", "eos is 0", "set it to 32765")]))
    check       backend              result    detail / fix
    config.eos  files                FAIL      eos is 0 -> set it to 32765

Out of scope: deciding the verdict (``conformance.core.rows``), files (``conformance.report.junit``,
``markdown``, ``html``, ``json``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from conformance.core.rows import Row

#: the result column's word per status
MARK = {
    "pass": "PASS",
    "fail": "FAIL",
    "warn": "WARN",
    "missing": "MISSING",
    "skip": "SKIP",
    "error": "ERROR",
    "info": "INFO",
}
#: at most this many first-difference windows are printed
MAX_WINDOWS = 10


def render_table(rows: Sequence[Row]) -> str:
    """check, backend, result, detail (``-> fix`` where the row did not pass or skip)."""
    width = max((len(r.check) for r in rows), default=10)
    lines = [f"{'check':{width}s}  {'backend':20s} {'result':8s}  detail / fix"]
    for r in rows:
        detail = f"{r.message} -> {r.fix}" if r.fix and r.status not in ("pass", "skip") else r.message
        lines.append(f"{r.check:{width}s}  {r.backend:20s} {MARK[r.status]:8s}  {detail}")
    return "\n".join(lines)


def render_windows(rows: Sequence[Row], *, limit: int = MAX_WINDOWS) -> str:
    """The first difference of each failing row that carries one, reference above backend."""
    out: list[str] = []
    for r in [r for r in rows if r.window and r.status == "fail"][:limit]:
        out += [f"{r.check} [{r.backend}]: {r.message}", *_window_lines(r.window)]
    return "\n".join(out)


def _window_lines(window: dict[str, Any]) -> list[str]:
    def fmt(side: list[list[Any]]) -> str:
        return "  ".join(f"{i}:{b}" for i, b in side)

    return [
        f"      first difference at id position {window['position']} "
        f"(lengths: reference {window['reference_len']}, backend {window['backend_len']})",
        f"      reference: {fmt(window['reference'])}",
        f"      backend:   {fmt(window['backend'])}",
    ]


def render_verdict(verdict: str, *, seconds: float | None = None, timings: str = "") -> str:
    """``verdict: PASS``, with the wall time and per-backend timings when given."""
    if seconds is None:
        return f"verdict: {verdict}"
    return f"verdict: {verdict} in {seconds:.1f}s ({timings})"
