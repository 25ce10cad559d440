"""Failures first: the order, the counts, the status words and a failing row's detail, for every renderer.

The terminal table, the Markdown and the HTML all open with :func:`summary` (rows per status,
worst first), then list the rows :func:`failures_first` (``error``, ``fail`` and ``missing``
rows -- the ones that decide a FAIL or an INCOMPLETE verdict -- before the rest, each group
in its own order). :func:`status_word` is the one word per row, readable in any font: a pass
that a declared divergence covered is ``DECLARED``, never a clean ``PASS``.
:func:`detail_lines` is what a failing row shows below it: the probe id, its text
(repr-escaped, shortened around the first difference), the id window with each id's bytes
from the reference and the backend, the differing id bracketed.

    >>> from conformance.core.rows import Row
    >>> rows = [Row("a", "files", "pass", "ok"), Row("b", "files", "fail", "x")]
    >>> summary([*rows, Row("c", "x", "pass", "2 pass, 2 declared", declared=2)])
    '1 FAIL, 1 DECLARED, 1 PASS'

Out of scope: the layout of each format (``text``, ``markdown``, ``html``), causes
(``conformance.checks.causes``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from conformance.core.rows import Row

#: the word per status; ``DECLARED`` is a pass with declared divergences
WORDS = {
    "pass": "PASS",
    "fail": "FAIL",
    "warn": "WARN",
    "missing": "MISSING",
    "skip": "SKIP",
    "error": "ERROR",
    "info": "INFO",
}
DECLARED = "DECLARED"
#: statuses listed first: they make the verdict FAIL (error, fail) or INCOMPLETE (missing)
FIRST = ("error", "fail", "missing")
#: the summary's order, worst first
SUMMARY_ORDER = ("ERROR", "FAIL", "MISSING", "WARN", DECLARED, "PASS", "SKIP", "INFO")


def status_word(r: Row) -> str:
    """``PASS``, ``FAIL``, ... and ``DECLARED`` for a pass covered by declared divergences."""
    return DECLARED if r.status == "pass" and r.declared else WORDS[r.status]


def fix_text(r: Row) -> str:
    """``fix: ...``, or the row's ``cause: ...; fix: ...`` as it stands."""
    return r.fix if r.fix.startswith("cause: ") else f"fix: {r.fix}"


def failures_first(rows: Sequence[Row]) -> list[Row]:
    """The error, fail and missing rows, then every other row, each group in the given order."""
    return [r for r in rows if r.status in FIRST] + [r for r in rows if r.status not in FIRST]


def counts(rows: Sequence[Row]) -> dict[str, int]:
    """Rows per status word, worst first, zero counts left out."""
    words = [status_word(r) for r in rows]
    return {w: words.count(w) for w in SUMMARY_ORDER if w in words}


def summary(rows: Sequence[Row]) -> str:
    """``2 FAIL, 1 MISSING, 30 PASS``: rows per status word, worst first."""
    return ", ".join(f"{n} {w}" for w, n in counts(rows).items()) or "no rows"


def detail_lines(window: dict[str, Any] | None) -> list[str]:
    """A failing row's probe, text and id window (empty when the row carries none)."""
    if not window:
        return []
    lines = []
    if "text" in window:
        probe = f"probe {window['probe']}, " if window.get("probe") else ""
        where = f" (from char {window['offset']})" if "offset" in window else ""
        lines.append(f"{probe}text{where}: {window['text']}")
    if "position" in window:
        pos = window["position"]
        at = pos - window["start"] if "start" in window else None
        lines += [
            f"first difference at id position {pos} "
            f"(lengths: reference {window['reference_len']}, backend {window['backend_len']})",
            f"reference: {_side(window['reference'], at=at)}",
            f"backend:   {_side(window['backend'], at=at)}",
        ]
    return lines


def _side(side: Sequence[Sequence[Any]], *, at: int | None) -> str:
    """``id:bytes`` pairs, the one at index ``at`` (the first difference) in brackets."""
    return "  ".join(f"[{i}:{b}]" if k == at else f"{i}:{b}" for k, (i, b) in enumerate(side))
