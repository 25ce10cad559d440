"""What a fuzz run prints and writes: counterexamples, the per-backend table, the probe JSONL.

:func:`render` prints each undeclared counterexample (input, minimal input, the first
difference window or the exception), one table line per backend (its status word is
the row vocabulary's, ``ok``/``diverged`` for one that ran), one line per declared
example, the totals and the verdict. :func:`probes_jsonl` is what ``--out`` holds: one
probe per counterexample (category ``fuzz``), ``ensure_ascii`` and sorted keys, ready
for ``stacktok gate --probes FILE`` and for ``fixtures/``.

Out of scope: the shared renderers of ``conformance.report`` (the fuzz's rows are
``FuzzReport.rows``) and writing the file (``conformance.fuzz.command``).
"""

from __future__ import annotations

import json

from conformance.core.rows import VERDICTS
from conformance.fuzz.results import NOT_RUN, BackendRun, Counterexample, FuzzReport


def _clip(text: str, limit: int = 100) -> str:
    r = repr(text)
    return r if len(r) <= limit else r[: limit - 5] + "...'" + f" ({len(text)} chars)"


def describe(cx: Counterexample) -> list[str]:
    head = (
        f"DIVERGENCE {cx.backend} ({cx.mode}): generator={cx.generator} example={cx.index}, "
        f"shrunk {len(cx.original)} -> {len(cx.text)} chars in {cx.shrunk.calls} calls, "
        f"{cx.shrunk.seconds:.2f}s"
    )
    lines = [head, f"  input:   {_clip(cx.original)}", f"  minimal: {cx.text!r}"]
    if cx.kind == "raises":
        lines.append(f"  the backend raises: {cx.detail}")
    elif cx.window is not None:
        w = cx.window
        lines.append(
            f"  first difference at id {w['position']} (reference {w['reference_len']} ids, "
            f"backend {w['backend_len']} ids)"
        )
        lines.append(f"    reference: {json.dumps(w['reference'], ensure_ascii=True)}")
        lines.append(f"    backend:   {json.dumps(w['backend'], ensure_ascii=True)}")
    return lines


def _status(r: BackendRun) -> str:
    if r.status in NOT_RUN:
        reason = r.reason if len(r.reason) <= 110 else r.reason[:105] + " ..."
        return f"{r.status}: {reason}"
    if r.status == "error":
        fix = "fix the export" if r.reason.startswith("cannot load") else "fix its adapter"
        return f"error: {r.reason} -> {fix}, then re-run"
    return "diverged" if r.status == "fail" else "ok"


def _row(r: BackendRun) -> str:
    if r.status in NOT_RUN or (r.status == "error" and not r.examples):
        return f"{r.name:20s} {r.version or '-':10s} {'':67s}  {_status(r)}"
    return (
        f"{r.name:20s} {r.version:10s} {r.examples:9d} {r.checks:9d} {r.seconds:9.2f} "
        f"{r.rate:8.0f} {r.undeclared:10d} {r.declared:9d} {r.raises:7d}  {_status(r)}"
    )


def render(report: FuzzReport) -> str:
    lines: list[str] = []
    for cx in report.counterexamples:
        lines += describe(cx) + [""]
    lines.append(
        f"{'backend':20s} {'version':10s} {'examples':>9s} {'checks':>9s} {'cpu s':>9s} "
        f"{'ex/s':>8s} {'undeclared':>10s} {'declared':>9s} {'raises':>7s}  status"
    )
    lines += [_row(r) for r in report.runs]
    lines.append("(ex/s: examples per CPU second inside the backend's encode, this thread only)")
    for r in report.runs:
        for cx in r.declared_examples:
            lines.append(
                f"declared ({cx.declared}): {r.name} {cx.mode} e.g. {cx.text!r} "
                f"(shrunk from {len(cx.original)} chars)"
            )
    ran = [r for r in report.runs if r.status not in NOT_RUN]
    checks = sum(r.checks for r in ran)
    rate = checks / report.loop_seconds if report.loop_seconds > 0 else 0.0
    ref_rate = report.examples / report.reference_seconds if report.reference_seconds > 0 else 0.0
    cxs = report.counterexamples
    lines.append(
        f"fuzz: seed {report.config.seed}, {report.examples} examples x {len(ran)} backends "
        f"= {checks} checks "
        f"in {report.loop_seconds:.1f}s ({rate:.0f} checks/s; reference {ref_rate:.0f} ex/s), "
        f"shrinking {report.shrink_seconds:.1f}s; {len(cxs)} undeclared counterexample(s)"
    )
    if cxs:
        out = report.config.out or "OUT.jsonl"
        lines.append(
            "fix: re-export with `stacktok export`, or declare a cited divergence in "
            f"fixtures/divergences.jsonl; replay with `stacktok gate DIR --probes {out}`"
        )
    lines.append(f"verdict: {VERDICTS[report.exit_code]}")
    return "\n".join(lines)


def probes_jsonl(report: FuzzReport) -> str:
    seed = report.config.seed
    return "".join(
        json.dumps(cx.probe(seed), ensure_ascii=True, sort_keys=True) + "\n" for cx in report.counterexamples
    )
