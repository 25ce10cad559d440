"""``stacktok audit`` as a command: its arguments, the run, the exit code.

Exit 0: no violation of the vocabulary findings in ``VIOLATIONS``; 1: a violation (the suite's
one rule, :func:`conformance.core.rows.exit_code`, over the findings' rows -- ``info`` and
``skip`` never fail); 2: usage error (``conformance.core.errors.UsageError``, one line) or a
malformed file of the directory (validated once, as the gate validates it: ``conformance.plan``).

Out of scope: what any finding checks (the other modules of ``conformance.audit``).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from conformance.audit.backends import DEFAULT_BACKENDS, SCANNABLE
from conformance.audit.findings import Findings
from conformance.audit.render import render_human, report_text, verdict_line
from conformance.audit.target import plan_audit
from conformance.audit.unicode_tables import Say, audit_unicode, skipped_unicode
from conformance.audit.vocabulary import vocab_findings
from conformance.core.arguments import add_artifact_flag, comma_list
from conformance.core.rows import exit_code
from conformance.report.entry import verdict_or_usage
from stacktok_export.util.atomic import write_text_atomic
from stacktok_export.util.progress import Progress


def run_audit(args: argparse.Namespace) -> int:
    say: Say = Progress(quiet=args.quiet)  # the one progress view every long command uses
    start = time.perf_counter()
    plan = plan_audit(args.path, args.artifact, json=args.json)
    findings = Findings()
    vocab, tok = vocab_findings(plan, say)
    findings.extend(vocab)
    vocab_seconds = time.perf_counter() - start
    timings: dict[str, float] = {}
    if tok is None:
        findings.add(skipped_unicode("the artifact's merge list is broken"))
    elif findings.status("duplicate_bytes", "artifact") == "fail":
        findings.add(skipped_unicode("the artifact has duplicate token bytes, which the exports cannot hold"))
    elif not args.backends:
        findings.add(skipped_unicode("no backend selected (--backends none)"))
    else:
        unicode, timings = audit_unicode(tok, plan.artifact, args.backends, say)
        findings.extend(unicode)
    code = exit_code(findings.rows)
    seconds = time.perf_counter() - start
    print(render_human(findings, plan))
    print(verdict_line(code, seconds=seconds, vocab_seconds=vocab_seconds, timings=timings))
    if args.json:
        write_text_atomic(args.json, report_text(findings, plan, tok, code))
    return code


_names = comma_list(SCANNABLE, what="backend", none=True)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "path",
        nargs="?",
        type=Path,
        default=None,
        metavar="ARTIFACT_OR_DIR",
        help="artifact JSON, or a tokenizer directory or Hub id org/name[@rev] (then --artifact is "
        "audited too); default: the --artifact default",
    )
    add_artifact_flag(p)
    p.add_argument("--json", type=Path, default=None, help="write the findings as JSON")
    p.add_argument(
        "--backends",
        type=_names,
        default=list(DEFAULT_BACKENDS),
        help=f"comma list for unicode_tables, or 'none' (default: {','.join(DEFAULT_BACKENDS)})",
    )
    p.add_argument("--quiet", action="store_true", help="no progress lines")


def main(args: argparse.Namespace) -> int:
    return verdict_or_usage(lambda: run_audit(args), prog="stacktok audit")
