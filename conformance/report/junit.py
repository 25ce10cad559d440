"""Rows as a JUnit XML report, for CI systems that show test results.

One ``<testcase>`` per row (``classname`` the check, ``name`` ``check[backend]``): ``fail`` is a
``<failure>`` and ``error`` an ``<error>`` (message, then the fix as the body), ``missing`` and
``skip`` are ``<skipped>``, a warning or a row with declared divergences keeps its message in
``<system-out>``.

Out of scope: deciding anything (``conformance.core.rows``), writing the file (the command).
"""

from __future__ import annotations

from collections.abc import Sequence
from xml.sax.saxutils import escape, quoteattr

from conformance.core.rows import Row


def to_junit(rows: Sequence[Row], *, seconds: float) -> str:
    """The whole document, ``seconds`` as the suite's time."""
    failures = sum(r.status == "fail" for r in rows)
    errors = sum(r.status == "error" for r in rows)
    skipped = sum(r.status in ("missing", "skip") for r in rows)
    out = [
        '<?xml version="1.0" encoding="UTF-8"?>',
        f'<testsuites name="stacktok-gate" tests="{len(rows)}" failures="{failures}" errors="{errors}" '
        f'time="{seconds:.2f}">',
        f'  <testsuite name="stacktok-gate" tests="{len(rows)}" failures="{failures}" '
        f'skipped="{skipped}" errors="{errors}">',
    ]
    for r in rows:
        name = quoteattr(f"{r.check}[{r.backend}]")
        out.append(f"    <testcase classname={quoteattr(r.check)} name={name}>")
        if r.status in ("fail", "error"):
            tag = "failure" if r.status == "fail" else "error"
            out.append(f"      <{tag} message={quoteattr(r.message)}>{escape(r.fix)}</{tag}>")
        elif r.status in ("missing", "skip"):
            out.append(f"      <skipped message={quoteattr(r.status + ': ' + r.message)}/>")
        elif r.status == "warn" or r.declared:
            out.append(f"      <system-out>{escape(r.status + ': ' + r.message)}</system-out>")
        out.append("    </testcase>")
    out += ["  </testsuite>", "</testsuites>"]
    return "\n".join(out) + "\n"
