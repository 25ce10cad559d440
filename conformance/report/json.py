"""The JSON documents CI keeps: one serialisation (sorted keys, two-space indent, ASCII) for all.

:func:`to_json` writes any report document the same way, so the same inputs give the same
bytes: the gate's (verdict, exit code, versions, fixture hashes, seeds, one entry per row) and
``python -m conformance``'s (:func:`results_document`: the same rows and verdict, plus each
backend's counts and its first 200 failures).

The gate's document is versioned: ``schema_version`` (:data:`SCHEMA_VERSION`) names the JSON
Schema it follows (``conformance/report/schema.json``, shipped in the wheel, :func:`schema`);
:func:`run_metadata` is its one non-deterministic part, the ``run`` object (start time and
duration); :func:`stacktok_version` the version that wrote it. With ``SOURCE_DATE_EPOCH`` set
(the reproducible-builds convention) the start is that time and the duration null, so the same
inputs give the same bytes.

Out of scope: validating a document (tests do, with ``jsonschema``), deciding anything
(``conformance.core.rows``).
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import asdict
from datetime import datetime, timezone
from importlib import resources
from typing import TYPE_CHECKING, Any

from conformance.core.rows import Row

if TYPE_CHECKING:
    from conformance.checks.runner import BackendResult

#: failures kept per backend in a results document (the count is always the full one)
MAX_FAILURES = 200
#: the version of ``schema.json`` the gate's document follows; bump it with every schema change
SCHEMA_VERSION = 1


def schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of the gate's ``--json`` report, as shipped."""
    text = resources.files("conformance.report").joinpath("schema.json").read_text(encoding="utf-8")
    return json.loads(text)


def stacktok_version() -> str:
    """The installed stacktok's version (``importlib.metadata``); "unknown" for a bare source tree."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("stacktok")
    except PackageNotFoundError:
        return "unknown"


def run_metadata(*, started: float, seconds: float) -> dict[str, Any]:
    """The report's ``run``: the start (UTC, ISO 8601, whole seconds) and the duration in seconds."""
    pinned = os.environ.get("SOURCE_DATE_EPOCH", "").strip()
    if pinned.isdigit():
        return {"started": _utc(float(pinned)), "seconds": None}
    return {"started": _utc(started), "seconds": round(seconds, 3)}


def _utc(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


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
