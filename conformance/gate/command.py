"""``stacktok gate DIR|org/name[@rev]``: the arguments, one run from plan to reports, the exit code.

:func:`run_gate` checks every input (``conformance.gate.plan``), collects the rows
(``conformance.gate.collect``), decides the exit code with the one rule
(``conformance.core.rows.exit_code``), prints the table and the verdict line
(``conformance.report.text``) and writes the ``--json`` / ``--junit`` / ``--markdown`` /
``--html`` reports (``conformance.report``); the JSON report follows the versioned schema
(``conformance/report/schema.json``) and names what was read (:mod:`conformance.gate.inputs`).
:func:`main` turns a usage error or malformed input into one line and exit 2; an internal error
reaches the ``stacktok`` entry point (exit 3).

Out of scope: the checks themselves (``conformance.static``, ``conformance.checks``).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from conformance.backends import REGISTRY, backend_list
from conformance.checks.runner import BackendResult
from conformance.core.arguments import add_artifact_flag
from conformance.core.errors import UsageError
from conformance.core.hub import Target, describe_inputs
from conformance.core.rows import (
    Row,
    excluded_by_name,
    exit_code,
    required_not_run,
    verdict_line,
)
from conformance.gate.collect import collect_rows
from conformance.gate.inputs import files_read
from conformance.gate.plan import plan
from conformance.plan import Plan
from conformance.report.entry import signals_deferred, verdict_or_usage
from conformance.report.html import to_html
from conformance.report.json import SCHEMA_VERSION, run_metadata, stacktok_version, to_json
from conformance.report.junit import to_junit
from conformance.report.markdown import to_markdown
from conformance.report.text import render_table, render_verdict
from stacktok_export.util import limits
from stacktok_export.util.atomic import write_report
from stacktok_export.util.progress import Progress


def gate_document(
    args: argparse.Namespace, run: Plan, rows: Sequence[Row], results: Sequence[BackendResult], *, code: int
) -> dict[str, Any]:
    """The ``--json`` report (``schema.json``): verdict, exit code, what was read (the target, every
    file's sha256, fixture hashes and seeds), every row. ``run`` (start, duration) is added last."""
    target = run.target or Target(directory=Path(args.dir))
    return {
        "schema_version": SCHEMA_VERSION,
        "stacktok_version": stacktok_version(),
        "verdict": verdict_line(rows, code),
        "exit_code": code,
        "directory": str(target.directory),
        "inputs": target.to_json(),
        "files": files_read(run.files, artifact=run.artifact),
        "artifact": str(run.artifact),
        "fingerprint": run.ref.fingerprint,
        "versions": {r.name: r.version for r in results if r.version},
        "fixtures": run.fixtures.hashes,
        "generator_seeds": run.fixtures.generator_seeds(),
        "excluded": list(run.excluded),
        "checks": [r.to_json() for r in rows],
    }


def write_reports(args: argparse.Namespace, doc: dict[str, Any], rows: Sequence[Row], seconds: float) -> None:
    checked = describe_inputs(doc["inputs"])
    reports = {
        "--json": (args.json, lambda: to_json(doc)),
        "--junit": (args.junit, lambda: to_junit(rows, seconds=seconds)),
        "--markdown": (
            args.markdown,
            lambda: to_markdown(rows, verdict=doc["verdict"], versions=doc["versions"], checked=checked),
        ),
        "--html": (
            args.html,
            lambda: to_html(rows, verdict=doc["verdict"], versions=doc["versions"], directory=checked),
        ),
    }
    for flag, (path, render) in reports.items():
        if path is None:
            continue
        try:
            write_report(path, render())
        except OSError as exc:  # checked writable before the run; a full disk or /dev/full says so here
            raise UsageError(f"{flag} {path}: cannot write the report ({exc.strerror or exc})") from None


def run_gate(args: argparse.Namespace) -> int:
    with limits.from_flag(args.max_file_mb):  # every file read below is bounded (util.limits)
        return _run_gate(args)


def _run_gate(args: argparse.Namespace) -> int:
    started, start = time.time(), time.perf_counter()
    run = plan(args)
    # one reporter: a live bar per running backend on a terminal, plain lines otherwise, or nothing
    with Progress(quiet=args.quiet) as say:
        if run.unavailable:
            names = ",".join(name for name, status, _ in run.unavailable if status == "missing")
            notes = "; ".join(f"{name} ({why})" for name, _, why in run.unavailable)
            hint = (
                f" -- the verdict will be INCOMPLETE unless you exclude them: --skip {names}" if names else ""
            )
            say(f"will not run: {notes}{hint}")
        rows, results = collect_rows(
            run, backends=list(run.backends), workers=args.workers, serve_vllm=args.serve_vllm, say=say
        )
    rows = excluded_by_name(rows, run.excluded)
    missing_required = required_not_run(rows, required=args.require, served=args.serve_vllm)
    code = exit_code(rows, required_missing=missing_required)
    doc = gate_document(args, run, rows, results, code=code)
    seconds = time.perf_counter() - start
    doc["run"] = run_metadata(started=started, seconds=seconds)
    if doc["inputs"]["kind"] == "hub":  # a typed path needs no echo; a Hub id names a commit
        print(f"checked: {describe_inputs(doc['inputs'])}")
    print(render_table(rows))
    timing = ", ".join(f"{r.name} {r.seconds:.1f}s" for r in results if r.status in ("ok", "diverged"))
    if run.excluded:
        print(f"\nnot run, excluded by name (--skip/--backends): {', '.join(run.excluded)}")
    print("\n" + render_verdict(doc["verdict"], seconds=seconds, timings=timing))
    for name in missing_required:
        print(f"stacktok gate: error: required backend {name} did not run", file=sys.stderr)
    with signals_deferred():  # a signal now takes effect once every report is whole
        write_reports(args, doc, rows, seconds)
    return code


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "dir",
        metavar="DIR",
        help="the checkpoint or tokenizer directory to check, or a Hub id org/name[@revision] "
        "(read from the Hugging Face cache; only tokenizer and config files are fetched; an "
        "existing local path always wins)",
    )
    p.add_argument(
        "--gguf",
        metavar="FILE",
        default=None,
        help="with a Hub id: also fetch and check this GGUF file of the repository (weights are "
        "never fetched otherwise)",
    )
    add_artifact_flag(p)
    p.add_argument("--probes", type=Path, action="append", default=[], help="extra probe JSONL (repeatable)")
    p.add_argument(
        "--text", type=Path, action="append", default=[], help="extra UTF-8 text file (repeatable)"
    )
    p.add_argument("--chats", type=Path, action="append", default=[], help="extra chats JSONL (repeatable)")
    p.add_argument(
        "--backends",
        type=backend_list,
        default=list(REGISTRY),
        help=f"comma list of backends to run (default: all: {','.join(REGISTRY)})",
    )
    p.add_argument(
        "--require",
        type=backend_list,
        default=[],
        help="backends that must run: absent or without their export file -> INCOMPLETE, exit 4, "
        "decided before any check runs (default: none)",
    )
    p.add_argument(
        "--skip",
        type=backend_list,
        default=[],
        help="backends to exclude by name, e.g. --skip vllm,trl (a backend that reads a file in DIR "
        "and did not run otherwise makes the verdict INCOMPLETE, exit 4)",
    )
    p.add_argument("--json", type=Path, default=None, help="write the JSON report here (default: none)")
    p.add_argument("--junit", type=Path, default=None, help="write a JUnit XML report here (default: none)")
    p.add_argument("--markdown", type=Path, default=None, help="write a Markdown report here (default: none)")
    p.add_argument(
        "--html",
        type=Path,
        default=None,
        help="write a self-contained HTML report (backend x check grid) here (default: none)",
    )
    p.add_argument(
        "--only-user-data",
        action="store_true",
        help="skip the shipped probes and chats; run only --probes/--text/--chats",
    )
    p.add_argument(
        "--serve-vllm",
        action="store_true",
        help="also start vLLM's OpenAI server on 127.0.0.1 and check /tokenize, /detokenize, eos "
        "(needs a CPU or GPU vLLM; see conformance/INSTALL-served.md)",
    )
    p.add_argument("--workers", type=int, default=2, help="backends run in parallel (default 2)")
    limits.add_flag(p)
    p.add_argument("--quiet", action="store_true", help="no progress lines")


def main(args: argparse.Namespace) -> int:
    """Entry for ``stacktok gate``; usage errors and malformed input exit 2 with one line."""
    return verdict_or_usage(lambda: run_gate(args), prog="stacktok gate")
