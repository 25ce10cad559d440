"""Rows as a JUnit XML report, for CI systems that show test results.

One ``<testcase>`` per row (``classname`` the check, ``name`` ``check[backend]``): ``fail`` is a
``<failure>`` and ``error`` an ``<error>`` (message, then the fix as the body); ``missing`` -- a
backend that reads a file present and did not run, which makes the verdict INCOMPLETE -- is an
``<error type="incomplete">``, never a skip a dashboard would show green; ``skip`` (not
applicable) is ``<skipped>``. A row with declared divergences carries
``<properties><property name="declared" value="N"/></properties>``; it and a warning keep their
message in ``<system-out>``. The suite's ``failures`` / ``errors`` / ``skipped`` counts follow.

Out of scope: deciding anything (``conformance.core.rows``), writing the file (the command).
"""

from __future__ import annotations

from collections.abc import Sequence
from xml.sax.saxutils import escape, quoteattr

from conformance.core.rows import Row

#: the ``<error type=...>`` of a row that made the run INCOMPLETE
INCOMPLETE = "incomplete"


def to_junit(rows: Sequence[Row], *, seconds: float) -> str:
    """The whole document, ``seconds`` as the suite's time."""
    failures = sum(r.status == "fail" for r in rows)
    errors = sum(r.status in ("error", "missing") for r in rows)
    skipped = sum(r.status == "skip" for r in rows)
    out = [
        '<?xml version="1.0" encoding="UTF-8"?>',
        f'<testsuites name="stacktok-gate" tests="{len(rows)}" failures="{failures}" errors="{errors}" '
        f'time="{seconds:.2f}">',
        f'  <testsuite name="stacktok-gate" tests="{len(rows)}" failures="{failures}" '
        f'skipped="{skipped}" errors="{errors}">',
    ]
    for r in rows:
        out += _testcase(r)
    out += ["  </testsuite>", "</testsuites>"]
    return "\n".join(out) + "\n"


def _testcase(r: Row) -> list[str]:
    out = [f"    <testcase classname={quoteattr(r.check)} name={quoteattr(f'{r.check}[{r.backend}]')}>"]
    if r.declared:
        out.append(f'      <properties><property name="declared" value="{r.declared}"/></properties>')
    if r.status in ("fail", "error"):
        tag = "failure" if r.status == "fail" else "error"
        out.append(f"      <{tag} message={quoteattr(r.message)}>{escape(r.fix)}</{tag}>")
    elif r.status == "missing":
        message = quoteattr(f"INCOMPLETE: not checked: {r.message}")
        out.append(f'      <error type="{INCOMPLETE}" message={message}>{escape(r.fix)}</error>')
    elif r.status == "skip":
        out.append(f"      <skipped message={quoteattr(r.status + ': ' + r.message)}/>")
    elif r.status == "warn" or r.declared:
        out.append(f"      <system-out>{escape(r.status + ': ' + r.message)}</system-out>")
    out.append("    </testcase>")
    return out
