"""The audit's two outputs: the human table (one line a finding, then capped detail lines) and
the JSON report (sorted keys, no timestamps or timings).

Each finding's JSON form is ``{"name", "subject", "status", "summary", "details"}`` -- the row's
check, backend, status and message, and its evidence's details.

Out of scope: the verdict (``conformance.core.rows.exit_code``); writing files (``command``).
"""

from __future__ import annotations

import json
from typing import Any

from conformance.audit.findings import Findings
from conformance.audit.target import subject_label
from conformance.core.rows import Row
from conformance.plan import Plan
from stacktok_export import StackTokenizer


def render_human(findings: Findings, plan: Plan) -> str:
    """One line a finding (``PASS  name  subject: summary``), then each finding's detail lines."""
    width = max(len(r.check) for r in findings)
    rows = []
    for r in findings:
        label = subject_label(r.backend, plan)
        rows.append(f"{r.status.upper():4s}  {r.check:{width}s}  {label + ': ' if label else ''}{r.message}")
    details = [
        f"\n{r.check} ({subject_label(r.backend, plan) or r.backend}):\n"
        + "\n".join("  " + x for x in findings.of(r).lines)
        for r in findings
        if findings.of(r).lines
    ]
    return "\n".join(rows) + ("\n" + "\n".join(details) if details else "")


def verdict_line(code: int, *, seconds: float, vocab_seconds: float, timings: dict[str, float]) -> str:
    steps = ", ".join(f"{k} {v:.1f}s" for k, v in timings.items())
    return (
        f"\naudit: {'FAIL' if code else 'PASS'} in {seconds:.1f}s (vocabulary {vocab_seconds:.1f}s"
        f"{', unicode_tables: ' + steps if steps else ''})"
    )


def finding_json(r: Row, findings: Findings) -> dict[str, Any]:
    return {
        "name": r.check,
        "subject": r.backend,
        "status": r.status,
        "summary": r.message,
        "details": findings.of(r).details,
    }


def report(findings: Findings, plan: Plan, tok: StackTokenizer | None, code: int) -> dict[str, Any]:
    return {
        "verdict": "FAIL" if code else "PASS",
        "exit_code": code,
        "artifact": str(plan.artifact),
        "directory": None if plan.target is None else str(plan.target.directory),
        "fingerprint": tok.fingerprint if tok else None,
        "findings": [finding_json(r, findings) for r in findings],
    }


def report_text(findings: Findings, plan: Plan, tok: StackTokenizer | None, code: int) -> str:
    """The JSON report as written: sorted keys, two-space indent, ASCII, a final newline."""
    doc = report(findings, plan, tok, code)
    return json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=True) + "\n"
