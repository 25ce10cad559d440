"""``stacktok gate DIR``: the release gate run before a checkpoint is published.

Order of work, so that a verdict is only ever given on input that was read
correctly:

1. the arguments (``--backends`` not empty, ``--require`` within it, report
   paths writable and outside DIR), the artifact, the directory's layout;
2. every file the gate reads (``conformance.validate``) and every user file
   (``--probes/--text/--chats``, ``conformance.core.fixtures``): malformed input is
   exit 2 with one line naming the file, line or field, within seconds;
3. the rows: static checks (``gate_checks``), the vocabulary surface id by id
   (``surface``), every selected backend over the probes and chats
   (``runner.result_rows``), optionally the served path -- all as
   :class:`~conformance.core.rows.Row`, one exit rule (``rows.exit_code``).

Then a table (check, backend, result, detail -> fix), the verdict line naming
what was not checked, and ``--json`` / ``--junit`` / ``--markdown`` reports.
Exit 0 conforms (declared divergences and warnings allowed), 1 any failing
or error row, 2 usage error / malformed input / a required backend not run.
The gate never writes into DIR and never runs code from it.

Out of scope: fixing anything -- every failure says how, the engineer decides.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from xml.sax.saxutils import escape, quoteattr

from stacktok_export import StackTokenizer
from stacktok_export._atomic import write_text_atomic
from stacktok_export.bpe import shipped_artifact_path
from stacktok_export.progress import Progress

from conformance.backends import REGISTRY, backend_list, check_selection
from conformance.core.fixtures import FixtureSet
from conformance.static.checks import behaviour_proof, run_static
from conformance.report.html import grid_markdown, to_html
from conformance.core.layout import Exports
from conformance.core.rows import EXIT_USAGE, Row, exit_code, skip, verdict_line
from conformance.checks.runner import result_rows, run_suite
from conformance.static.surface import surface_rows
from conformance.validate import input_errors, validate_directory

MARK = {
    "pass": "PASS",
    "fail": "FAIL",
    "warn": "WARN",
    "missing": "MISSING",
    "skip": "SKIP",
    "error": "ERROR",
}


class GateUsageError(Exception):
    """Exit 2 with this one-line reason."""


# ------------------------------------------------------------------ inputs
def _check_outputs(directory: Path, outputs: dict[str, Path | None]) -> None:
    root = directory.resolve()
    for flag, p in outputs.items():
        if p is None:
            continue
        full = p.resolve()
        if full == root or root in full.parents:
            raise GateUsageError(
                f"{flag} {p} is inside {directory}: the gate never writes into the directory it checks"
            )
        if full.is_dir():
            raise GateUsageError(f"{flag} {p} is a directory; give a file path such as {p / 'gate-report'}")
        if not full.parent.is_dir():
            raise GateUsageError(f"{flag} {p}: directory {full.parent} does not exist; create it first")


def _plan(args: argparse.Namespace) -> tuple[StackTokenizer, Exports, FixtureSet]:
    """Everything the gate will read, checked before anything runs (errors -> exit 2)."""
    problem = check_selection(args.backends, args.require)
    if problem:
        raise GateUsageError(problem)
    if args.workers < 1:
        raise GateUsageError(f"--workers must be at least 1, got {args.workers}")
    directory: Path = args.dir
    if not directory.is_dir():
        raise GateUsageError(f"{directory} is not a directory; pass the checkpoint or tokenizer directory")
    _check_outputs(
        directory,
        {"--json": args.json, "--junit": args.junit, "--markdown": args.markdown, "--html": args.html},
    )
    ref = StackTokenizer.load(args.artifact or shipped_artifact_path())
    exports = Exports.discover(directory, artifact=args.artifact or shipped_artifact_path())
    if exports.hf_dir is None and exports.gguf is None and exports.tiktoken is None:
        raise GateUsageError(
            f"{directory} has no tokenizer.json, *.gguf or *.tiktoken to check; "
            "pass the directory `stacktok export` or save_pretrained wrote"
        )
    validate_directory(exports, directory=directory)
    fixtures = FixtureSet.load(
        probes=args.probes, chats=args.chats, texts=args.text, shipped=not args.only_user_data
    )
    if not fixtures.probes and not fixtures.chats:
        raise GateUsageError("no probes to run: drop --only-user-data or pass --probes/--text/--chats")
    return ref, exports, fixtures


# ------------------------------------------------------------------ rows
def _served_rows(exports: Exports, ref: StackTokenizer, fixtures: FixtureSet, say) -> list[Row]:
    """Opt-in: start vLLM's OpenAI server on 127.0.0.1 over DIR's tokenizer (conformance.served)."""
    if exports.hf_dir is None:
        return [skip("served", "no tokenizer.json to serve", backend="vllm-server")]
    from conformance.served import check_served

    say("served path: tiny random-weight Llama + vLLM OpenAI server on 127.0.0.1")
    return check_served(
        exports.hf_dir, ref, fixtures.probes, fixtures.chats, progress=say, divergences=fixtures.divergences
    )


def collect_rows(
    args: argparse.Namespace, ref: StackTokenizer, exports: Exports, fixtures: FixtureSet, say
) -> tuple[list[Row], list]:
    say("static checks")
    rows = run_static(exports, ref)
    rows += surface_rows(exports, ref)
    say(
        f"conformance: {len(fixtures.probes)} probes, {len(fixtures.chats)} chats, "
        f"backends {','.join(args.backends)}"
    )
    results, stale, _ = run_suite(exports, fixtures, args.backends, progress=say, workers=args.workers)
    suite = result_rows(results, stale=stale)
    rows = behaviour_proof(rows, suite) + suite
    if args.serve_vllm:
        rows += _served_rows(exports, ref, fixtures, say)
    return rows, results


def _required_not_run(args: argparse.Namespace, rows: Sequence[Row]) -> list[str]:
    absent = {r.backend for r in rows if r.check == "conformance" and r.status in ("missing", "skip")}
    out = [name for name in args.require if name in absent]
    if args.serve_vllm and any(r.check == "served" and r.status in ("missing", "skip") for r in rows):
        out.append("vllm-server")  # --serve-vllm asks for it explicitly
    return out


# ------------------------------------------------------------------ rendering
def _table(rows: Sequence[Row]) -> str:
    width = max((len(r.check) for r in rows), default=10)
    lines = [f"{'check':{width}s}  {'backend':20s} {'result':8s}  detail / fix"]
    for r in rows:
        detail = f"{r.message} -> {r.fix}" if r.fix and r.status not in ("pass", "skip") else r.message
        lines.append(f"{r.check:{width}s}  {r.backend:20s} {MARK[r.status]:8s}  {detail}")
    return "\n".join(lines)


def to_junit(rows: Sequence[Row], *, seconds: float) -> str:
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


def to_markdown(rows: Sequence[Row], *, verdict: str, versions: dict[str, str]) -> str:
    icon = {
        "pass": "✅ pass",
        "fail": "❌ fail",
        "warn": "⚠️ warn",
        "missing": "➖ missing",
        "skip": "➖ skip",
        "error": "💥 error",
    }
    lines = [
        f"### Tokenizer release gate: {verdict}",
        "",
        "Backends: " + ", ".join(f"{k} {v}" for k, v in sorted(versions.items()) if v),
        "",
        grid_markdown(rows),
        "",
        "| check | backend | result | detail |",
        "|---|---|---|---|",
    ]
    for r in rows:
        fix = f" — fix: {r.fix}" if r.fix and r.status in ("fail", "error", "warn", "missing") else ""
        detail = (r.message + fix).replace("|", "\\|").replace("\n", " ")
        lines.append(f"| {r.check} | {r.backend} | {icon[r.status]} | {detail} |")
    return "\n".join(lines) + "\n"


def _write_reports(args: argparse.Namespace, doc: dict, rows: Sequence[Row], seconds: float) -> None:
    if args.json:
        write_text_atomic(args.json, json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=True) + "\n")
    if args.junit:
        write_text_atomic(args.junit, to_junit(rows, seconds=seconds))
    if args.markdown:
        write_text_atomic(args.markdown, to_markdown(rows, verdict=doc["verdict"], versions=doc["versions"]))
    if args.html:
        page = to_html(rows, verdict=doc["verdict"], versions=doc["versions"], directory=doc["directory"])
        write_text_atomic(args.html, page)


# ------------------------------------------------------------------ the command
def run_gate(args: argparse.Namespace) -> int:
    start = time.perf_counter()
    ref, exports, fixtures = _plan(args)
    # one reporter: a live bar per running backend on a terminal, plain lines otherwise, or nothing
    with Progress(quiet=args.quiet) as say:
        rows, results = collect_rows(args, ref, exports, fixtures, say)
    missing_required = _required_not_run(args, rows)
    code = exit_code(rows, required_missing=missing_required)
    verdict = verdict_line(rows, code)
    seconds = time.perf_counter() - start
    versions = {r.name: r.version for r in results if r.version}
    print(_table(rows))
    timing = ", ".join(f"{r.name} {r.seconds:.1f}s" for r in results if r.status in ("ok", "diverged"))
    print(f"\nverdict: {verdict} in {seconds:.1f}s ({timing})")
    for name in missing_required:
        print(f"stacktok gate: error: required backend {name} did not run", file=sys.stderr)
    doc = {
        "verdict": verdict,
        "exit_code": code,
        "directory": str(args.dir),
        "artifact": str(args.artifact or shipped_artifact_path()),
        "fingerprint": ref.fingerprint,
        "versions": versions,
        "fixtures": fixtures.hashes,
        "generator_seeds": fixtures.generator_seeds(),
        "checks": [r.to_json() for r in rows],
    }
    _write_reports(args, doc, rows, seconds)
    return code


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("dir", type=Path, help="the checkpoint or tokenizer directory to check")
    p.add_argument("--artifact", type=Path, default=None, help="frozen artifact (default: the shipped one)")
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
        help="backends that must run: absent or without their export file -> exit 2 (default: none)",
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
    p.add_argument("--quiet", action="store_true", help="no progress lines")


def main(args: argparse.Namespace) -> int:
    """Entry for ``stacktok gate``; usage errors exit 2 (malformed files raise to the CLI, also 2)."""
    try:
        return run_gate(args)
    except (GateUsageError, *input_errors()) as exc:
        print(f"stacktok gate: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
