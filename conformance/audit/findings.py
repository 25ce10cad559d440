"""The audit's findings: one suite :class:`~conformance.core.rows.Row` each, plus its evidence.

A finding's verdict is a plain ``Row`` -- ``check`` is the finding's name (``self_reachable``),
``backend`` its subject (``artifact``, ``tokenizer.json`` or ``backends``), ``message`` its
one-line summary -- so the audit's exit code is the suite's one rule
(:func:`conformance.core.rows.exit_code`). What a row cannot carry, the JSON ``details`` and the
capped human detail lines, is its :class:`Evidence`, kept beside the row in :class:`Findings`
(keyed by the row's check and subject), never as a second verdict.

Out of scope: rendering (``conformance.audit.render``); what any finding checks.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from conformance.core.rows import Row

CAP = 10  # list items shown per finding in human output


@dataclass(frozen=True)
class Evidence:
    """What backs one finding: JSON ``details`` and human detail lines (already capped)."""

    details: dict[str, Any] = field(default_factory=dict)
    lines: list[str] = field(default_factory=list)


#: one finding: its verdict row and its evidence
Found = tuple[Row, Evidence]


def found(
    name: str,
    subject: str,
    status: str,
    summary: str,
    details: dict[str, Any] | None = None,
    lines: Sequence[str] = (),
) -> Found:
    """A finding ``name`` about ``subject`` with ``status`` (one of the suite's ``STATUSES``)."""
    return Row(name, subject, status, summary), Evidence(dict(details or {}), list(lines))


@dataclass
class Findings:
    """The audit's findings in report order: the rows, and each row's evidence."""

    rows: list[Row] = field(default_factory=list)
    evidence: dict[tuple[str, str], Evidence] = field(default_factory=dict)

    def add(self, finding: Found) -> None:
        row, evidence = finding
        self.rows.append(row)
        self.evidence[(row.check, row.backend)] = evidence

    def extend(self, findings: Sequence[Found]) -> None:
        for f in findings:
            self.add(f)

    def of(self, row: Row) -> Evidence:
        return self.evidence[(row.check, row.backend)]

    def status(self, name: str, subject: str) -> str | None:
        """The status of finding ``name`` about ``subject`` (``None`` if there is none)."""
        return next((r.status for r in self.rows if (r.check, r.backend) == (name, subject)), None)

    def __iter__(self) -> Iterator[Row]:
        return iter(self.rows)


# ------------------------------------------------------------------ formatting
def hex_bytes(b: bytes) -> str:
    """A short printable form of token bytes (Python bytes literal, cut at 24 bytes)."""
    return repr(b) if len(b) <= 24 else repr(b[:24]) + "..."


def cap(items: Sequence[str], *, limit: int = CAP) -> list[str]:
    """At most ``limit`` items, then a line counting the rest."""
    shown = list(items[:limit])
    if len(items) > limit:
        shown.append(f"... and {len(items) - limit:,} more")
    return shown
