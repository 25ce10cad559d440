"""The ``unicode_tables`` finding: where installed backends' pre-tokenizers split code points
differently from the reference's ``regex``, and each backend's apparent Unicode version.

:func:`audit_unicode` renders the exports the chosen backends read, scans each backend
(``conformance.audit.backends``) and states the result: ``pass`` if every checked backend
agrees, else ``info`` -- disagreement is informational (declared divergences cover it) but
always stated, with the ranges, one example and the declarations that name it.

Out of scope: white-space class changes that do not change ids; regex differences that are not
Unicode tables (llama.cpp's ``'[sS]`` vs case-folded ``'ſ``).
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from conformance.audit.backends import FORMAT_OF, scan_backend, unicode_declarations, write_exports
from conformance.audit.findings import Found, cap, found
from conformance.audit.unicode_scan import (
    Scan,
    all_code_points,
    apparent_version,
    backend_class,
    code_point_runs,
    reference_blocks,
    reference_class,
    span,
    u_plus,
    undeclared_versions,
)
from stacktok_export import StackTokenizer
from stacktok_export.split.drift import Shape, choose_shape
from stacktok_export.split.pretokenize import engine_info

Say = Callable[[str], None]


def grouped_ranges(tok: StackTokenizer, shape: Shape, scan: Scan) -> list[dict[str, Any]]:
    """Disagreeing code points as runs with the same (reference class, backend class)."""
    rows: list[dict[str, Any]] = []
    for cp, _, ids in scan.leaves:
        ch = chr(cp)
        key = (reference_class(ch), backend_class(tok, shape, ch, ids))
        last = rows[-1] if rows else None
        if last and last["last"] == cp - 1 and (last["reference"], last["backend"]) == key:
            last["last"], last["count"] = cp, last["count"] + 1
        else:
            rows.append({"first": cp, "last": cp, "count": 1, "reference": key[0], "backend": key[1]})
    return rows


def scan_details(tok: StackTokenizer, shape: Shape, scan: Scan) -> dict[str, Any]:
    d: dict[str, Any] = {"status": scan.status, "version": scan.version, "reason": scan.reason}
    if scan.status not in ("agrees", "disagrees"):
        return d
    rows = grouped_ranges(tok, shape, scan)
    d.update(
        disagreeing_code_points=len(scan.leaves),
        ranges=[{**r, "first": u_plus(r["first"]), "last": u_plus(r["last"])} for r in rows],
        compressed=[span(a, b) for a, b in code_point_runs([c for c, _, _ in scan.leaves])],
        sentinels=scan.sentinels,
        apparent_unicode=apparent_version(scan.sentinels),
        declared=scan.declared,
        undeclared_versions=undeclared_versions(scan),
    )
    if scan.leaves:
        cp, ref_ids, be_ids = scan.leaves[0]
        d["example"] = {
            "code_point": u_plus(cp),
            "text": shape.text(chr(cp)),
            "reference_ids": ref_ids,
            "backend_ids": be_ids,
        }
    return d


def _scan_line(name: str, d: dict[str, Any]) -> str:
    head = f"{name} {d['version']}".strip()
    if d["status"] in ("missing", "error"):
        return f"{head}: {d['status'].upper()} ({d['reason']})"
    if d["status"] == "agrees":
        return f"{head}: agrees on every code point (apparent Unicode {d['apparent_unicode']})"
    undeclared = (
        f"; no declared divergence names Unicode {', '.join(d['undeclared_versions'])}"
        if d["undeclared_versions"]
        else ""
    )
    count, ranges, declared = d["disagreeing_code_points"], len(d["compressed"]), ", ".join(d["declared"])
    return (
        f"{head}: DISAGREES on {count:,} code points in {ranges:,} ranges "
        f"(apparent Unicode {d['apparent_unicode']}; declared: {declared or 'none'}{undeclared})"
    )


def _scan_lines(name: str, d: dict[str, Any]) -> list[str]:
    lines = [_scan_line(name, d)]
    if d.get("ranges"):
        lines += [
            "  " + s
            for s in cap(
                [
                    f"{span(int(r['first'][2:], 16), int(r['last'][2:], 16))} "
                    f"({r['count']:,}): reference {r['reference']}, {name} {r['backend']}"
                    for r in d["ranges"]
                ]
            )
        ]
        ex = d["example"]
        lines.append(f"  e.g. {ex['text']!r}: reference {ex['reference_ids']} vs {name} {ex['backend_ids']}")
    return lines


def _summary(per: dict[str, dict[str, Any]], unicode_version: str) -> str:
    disagree = [
        f"{n} {d['disagreeing_code_points']:,} (apparent Unicode {d['apparent_unicode']})"
        for n, d in per.items()
        if d["status"] == "disagrees"
    ]
    other = [f"{n} {d['status']}" for n, d in per.items() if d["status"] in ("missing", "error")]
    if disagree:
        summary = (
            f"backends split differently from the reference (Unicode {unicode_version}) on "
            f"code points: {', '.join(disagree)} -- informational, see declared divergences"
        )
    elif checked := [n for n, d in per.items() if d["status"] == "agrees"]:
        summary = f"{', '.join(checked)} split every code point like the reference"
    else:
        summary = "no backend could be checked"
    return summary + (f"; {', '.join(other)}" if other else "")


def unicode_finding(tok: StackTokenizer, shape: Shape, scans: Sequence[Scan]) -> Found:
    """The ``unicode_tables`` finding: pass if every checked backend agrees, else info (stated)."""
    installed = engine_info()
    ref = {
        "installed": installed,
        "recorded": tok.engine,
        "shape": shape.text("{c}"),
        "strong_shape": shape.strong,
    }
    per = {s.name: scan_details(tok, shape, s) for s in scans}
    lines = [
        f"reference: regex {installed['version']} (Unicode {installed['unicode_version']}); artifact "
        f"recorded regex {tok.engine.get('version', '?')} (Unicode {tok.engine.get('unicode_version', '?')})"
    ]
    if not shape.strong:
        lines.append(
            "weak probe: the vocabulary lacks a contraction or 3-digit token; some differences may not show"
        )
    for name, d in per.items():
        lines += _scan_lines(name, d)
    stated = any(d["status"] in ("disagrees", "missing", "error") for d in per.values())
    summary = _summary(per, installed["unicode_version"])
    details = {"reference": ref, "backends": per}
    return found("unicode_tables", "backends", "info" if stated else "pass", summary, details, lines)


def audit_unicode(
    tok: StackTokenizer, artifact: Path, names: Sequence[str], say: Say
) -> tuple[list[Found], dict[str, float]]:
    """Scan every backend in ``names``; return the findings (``unicode_tables``, and a
    ``declared_divergences`` row if the declarations cannot be read) and per-step seconds."""
    timings: dict[str, float] = {}
    shape = choose_shape(tok)
    start = time.perf_counter()
    say(f"unicode_tables: reference over {len(all_code_points()):,} code points")
    blocks, texts, ref_ids = reference_blocks(tok, shape)
    timings["reference"] = time.perf_counter() - start
    declarations, unread = unicode_declarations()
    scans: list[Scan] = []
    with tempfile.TemporaryDirectory(prefix="stacktok-audit-") as tmp:
        exports, failed = write_exports(tok, artifact, Path(tmp), names)
        for name in names:
            if FORMAT_OF[name] in failed:
                scans.append(Scan(name, "error", reason=f"cannot export: {failed[FORMAT_OF[name]]}"))
                continue
            say(f"unicode_tables: {name}")
            scans.append(
                scan_backend(name, exports, tok, shape, blocks, texts, ref_ids, declarations=declarations)
            )
            timings[name] = scans[-1].seconds
    return [unicode_finding(tok, shape, scans), *unread], timings


def skipped_unicode(reason: str) -> Found:
    return found("unicode_tables", "backends", "skip", f"not checked: {reason}")
