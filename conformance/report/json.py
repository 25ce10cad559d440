"""The JSON documents CI keeps: one serialisation (sorted keys, two-space indent, ASCII) for all.

:func:`to_json` writes any report document the same way, so the same inputs give the same
bytes: the gate's (verdict, exit code, versions, fixture hashes, seeds, one entry per row) and
``python -m conformance``'s (:func:`results_document`: the same rows and verdict, plus each
backend's counts and its first 200 failures).

Out of scope: wall times (never written, so a document does not change between runs),
deciding anything (``conformance.core.rows``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from conformance.core.rows import Row

if TYPE_CHECKING:
    from conformance.checks.runner import BackendResult

#: failures kept per backend in a results document (the count is always the full one)
MAX_FAILURES = 200


def to_json(doc: dict[str, Any]) -> str:
    """The document as text: sorted keys, indent 2, ``ensure_ascii`` (invisible characters show)."""
    return json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=True) + "\n"


def results_document(
    results: Sequence[BackendResult],
    rows: Sequence[Row],
    *,
    verdict: str,
    code: int,
    meta: dict[str, Any],
    stale: Sequence[str] = (),
) -> dict[str, Any]:
    """``python -m conformance --json``: meta, the verdict and rows, each backend's detail."""
    return {
        "meta": meta,
        "verdict": verdict,
        "exit_code": code,
        "checks": [r.to_json() for r in rows],
        "backends": {
            r.name: {
                **{k: v for k, v in asdict(r).items() if k not in ("failures", "seconds")},
                "chat_injection": r.chat_injection,
                "failures": [asdict(f) for f in r.failures[:MAX_FAILURES]],
                "failures_total": len(r.failures),
            }
            for r in results
        },
        "stale_declarations": list(stale),
    }
