"""The support matrix: one row per backend and version, rendered as the Markdown table.

:func:`matrix_row` turns one backend's result into the row ``python -m conformance --matrix``
writes (JSONL) and ``conformance.matrix.changes`` compares and commits; :func:`support_matrix`
renders committed rows as ``SUPPORT_MATRIX.md`` and the README's block.

A row's ``result`` is the rows' verdict for that backend, said in the matrix's words
(:data:`RESULTS`): ``conforms`` where every row passes (``conforms (declared divergences)``
where declared divergences covered some differences -- still a pass, with the count in the
``declared`` column), ``diverges`` where a row fails or errors, ``missing`` / ``skip`` where the
backend did not run. :func:`result_conforms` is the one test of a result word.

Out of scope: running backends (``conformance.checks``), comparing rows (``conformance.matrix.changes``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the nox host imports this module without the package's dependencies
    from conformance.checks.runner import BackendResult

CONFORMS, DECLARED, DIVERGES = "conforms", "conforms (declared divergences)", "diverges"
#: row status -> the matrix's word for it (``pass`` with declared divergences is :data:`DECLARED`)
RESULTS = {"pass": CONFORMS, "fail": DIVERGES, "error": DIVERGES, "missing": "missing", "skip": "skip"}
#: a glanceable mark per support-matrix result (first matching prefix wins)
MATRIX_MARKS = (
    (DECLARED, "☑️"),
    (CONFORMS, "✅"),
    (DIVERGES, "❌"),
    ("missing", "➖"),
    ("skip", "➖"),
)


def result_conforms(result: str) -> bool:
    """True for ``conforms`` and ``conforms (declared divergences)``."""
    return str(result).startswith(CONFORMS)


def support_matrix(rows: Sequence[dict[str, str]]) -> str:
    """Markdown: backend x version -> conforms / diverges / declared / missing."""
    lines = [
        "| backend | version | result | probes identical / run | chats identical / run | declared |",
        "|---|---|---|---|---|---|",
    ]
    for row in rows:
        mark = next((m for word, m in MATRIX_MARKS if row["result"].startswith(word)), "")
        result = f"{mark} {row['result']}"
        lines.append(
            f"| {row['backend']} | {row['version']} | {result} | {row['identical']} / {row['run']} "
            f"| {row.get('chats', '-')} | {row['declared']} |"
        )
    return "\n".join(lines) + "\n"


def _result(r: BackendResult) -> str:
    if r.status in ("missing", "skip"):
        return RESULTS[r.status]
    if r.status != "ok":
        return DIVERGES
    if r.probes_declared or any(f.declared for f in r.failures):
        return DECLARED
    return CONFORMS


def matrix_row(
    r: BackendResult, *, env: dict[str, str] | None = None, stale: Sequence[str] = ()
) -> dict[str, Any]:
    """One support-matrix row: the table's columns plus what ``conformance.matrix.changes`` compares --
    per-check counts, the first undeclared failing probe per check, the declarations used,
    the no-flags default behaviour, this backend's stale declarations and the exact versions."""
    chat = r.checks.get("chat", {})
    chats = f"{chat.get('pass', 0)} / {sum(chat.values())}" if chat else "-"
    first: dict[str, str] = {}
    for f in r.failures:
        if f.declared is None:
            first.setdefault(f.check, f.probe)
    return {
        "backend": r.name,
        "version": r.version or "-",
        "result": _result(r),
        "reason": r.reason,
        "identical": str(r.probes_identical),
        "run": str(r.probes_run),
        "chats": chats,
        "declared": str(sum(1 for f in r.failures if f.declared)),
        "checks": {c: dict(counts) for c, counts in sorted(r.checks.items())},
        "first_failure": first,
        "declarations": sorted({f.declared for f in r.failures if f.declared}),
        "default": r.default_behaviour,
        "stale": sorted(stale),
        "env": dict(env or {}),
    }
