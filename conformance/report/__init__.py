"""Rendering results: a table a person reads, a JSON document CI keeps, a Markdown matrix.

The human table has one line per backend and version (probes run /
identical / diverged / declared, status), then for each failing backend and
check the first divergence window (probe id, position, three ids either side
with their bytes, from both sides). JSON has everything but wall
times, with sorted keys, so the same inputs give the same bytes.

Out of scope: deciding pass/fail (``conformance.core.rows.exit_code`` does, over ``runner.result_rows``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the nox host imports this module without the package's dependencies
    from conformance.checks.runner import BackendResult

MAX_WINDOWS = 10


def _line(r: BackendResult) -> str:
    if r.status in ("missing", "skip", "error"):
        return f"  {r.name:20s} {'-':12s} {r.status.upper():9s} {r.reason}"
    counts = (
        f"{r.probes_run:5d} run {r.probes_identical:5d} identical "
        f"{r.probes_diverged:4d} diverged {r.probes_declared:4d} declared"
    )
    extra = []
    if r.default_behaviour:
        extra.append(f"default={r.default_behaviour}")
    if r.chat_injection:
        extra.append(f"chat_injection={r.chat_injection}")
    status = {"ok": "CONFORMS", "diverged": "DIVERGES", "error": "ERROR"}[r.status]
    return f"  {r.name:20s} {r.version:12s} {status:9s} {counts}  {r.seconds:6.1f}s  {' '.join(extra)}"


def _window_lines(window: dict[str, Any]) -> list[str]:
    def fmt(side: list[list[Any]]) -> str:
        return "  ".join(f"{i}:{b}" for i, b in side)

    return [
        f"      first difference at id position {window['position']} "
        f"(lengths: reference {window['reference_len']}, backend {window['backend_len']})",
        f"      reference: {fmt(window['reference'])}",
        f"      backend:   {fmt(window['backend'])}",
    ]


def render_text(results: Sequence[BackendResult], *, stale: Sequence[str] = ()) -> str:
    out = ["conformance against the reference", ""]
    out += [_line(r) for r in results]
    for r in results:
        undeclared = [f for f in r.failures if f.declared is None]
        if not undeclared:
            continue
        out += ["", f"{r.name} {r.version}: {len(undeclared)} undeclared failure(s)"]
        seen: set[str] = set()
        for f in undeclared:
            if f.check in seen:
                continue
            seen.add(f.check)
            out.append(f"    [{f.check}] probe {f.probe}: {f.detail}")
            if f.window:
                out += _window_lines(f.window)
            if len(seen) >= MAX_WINDOWS:
                break
    if stale:
        out += ["", "stale declared divergences (they matched no failure; fix or narrow them):"]
        out += [f"    {s}" for s in stale]
    return "\n".join(out) + "\n"


def to_json(results: Sequence[BackendResult], *, meta: dict[str, Any], stale: Sequence[str] = ()) -> str:
    doc = {
        "meta": meta,
        "backends": {
            r.name: {
                **{k: v for k, v in asdict(r).items() if k not in ("failures", "seconds")},
                "chat_injection": r.chat_injection,
                "failures": [asdict(f) for f in r.failures[:200]],
                "failures_total": len(r.failures),
            }
            for r in results
        },
        "stale_declarations": list(stale),
    }
    return json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=True) + "\n"


#: a glanceable mark per support-matrix result (first matching prefix wins)
MATRIX_MARKS = (
    ("conforms (declared", "☑️"),
    ("conforms", "✅"),
    ("diverges", "❌"),
    ("missing", "➖"),
    ("skip", "➖"),
)


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


def matrix_row(
    r: BackendResult, *, env: dict[str, str] | None = None, stale: Sequence[str] = ()
) -> dict[str, Any]:
    """One support-matrix row: the table's columns plus what ``conformance.matrix.changes`` compares --
    per-check counts, the first undeclared failing probe per check, the declarations used,
    the no-flags default behaviour, this backend's stale declarations and the exact versions."""
    if r.status in ("missing", "skip"):
        result = r.status
    elif r.status != "ok":
        result = "diverges"
    elif r.probes_declared or any(f.declared for f in r.failures):
        result = "conforms (declared divergences)"
    else:
        result = "conforms"
    chat = r.checks.get("chat", {})
    chats = f"{chat.get('pass', 0)} / {sum(chat.values())}" if chat else "-"
    first: dict[str, str] = {}
    for f in r.failures:
        if f.declared is None:
            first.setdefault(f.check, f.probe)
    return {
        "backend": r.name,
        "version": r.version or "-",
        "result": result,
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
