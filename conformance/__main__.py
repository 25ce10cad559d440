"""``python -m conformance``: run every installed backend over the shared probes, judge the rows.

    python -m conformance [DIR] [--artifact PATH] [--backends LIST] [--require LIST]
                          [--probes F.jsonl]... [--chats F.jsonl]... [--text F]...
                          [--json PATH] [--matrix PATH] [--quiet] [--debug]

DIR (or a Hub id ``org/name[@revision]``) defaults to ``tokenizer/stack100m-32768-hf`` (with the
``.tiktoken`` and ``.gguf`` beside it), the artifact to the one default
(``conformance.core.arguments.artifact_path``). What the run reads is planned as every tool plans
it (``conformance.plan``: report paths checked, every file validated once, the reference loaded
once, a ``--require``d backend that cannot run is INCOMPLETE before any check). The backends'
results become rows
(``conformance.checks.runner.result_rows``), printed through ``conformance.report.text`` as the
gate prints its own, with the first differences; ``--json`` writes the rows and each backend's
detail, ``--matrix`` one support-matrix row per backend (``conformance.matrix.changes`` reads them).

Exit (``conformance.core.rows.exit_code``): 0 every backend conforms (declared divergences
allowed); 1 an undeclared divergence or a stale declaration; 2 usage error, unreadable input, or
a ``--require``d backend that did not run; 3 an internal error (``conformance.report.run_main``).

Out of scope: the gate's static checks and reports (``stacktok gate``).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from conformance.backends import REGISTRY, backend_list
from conformance.checks.causes import explain
from conformance.checks.runner import BackendResult, result_rows, run_suite
from conformance.core.arguments import add_artifact_flag
from conformance.core.environment import environment_versions
from conformance.core.fixtures import FixtureSet
from conformance.core.rows import excluded_by_name, exit_code, required_not_run, verdict_line
from conformance.plan import FixtureFiles, Plan, plan_inputs, select_backends
from conformance.report.entry import run_main
from conformance.report.json import results_document, to_json
from conformance.report.matrix import matrix_row
from conformance.report.text import render_table, render_verdict
from stacktok_export.artifact.artifact import EXPORT_DIR, project_root
from stacktok_export.util.atomic import write_text_atomic

PROG = "conformance"
#: the checkout's exported directory (``python -m conformance`` runs from a checkout)
DEFAULT_DIR = (project_root() or Path.cwd()) / EXPORT_DIR / "stack100m-32768-hf"


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m conformance", description=__doc__.splitlines()[0])
    p.add_argument("dir", nargs="?", type=Path, default=DEFAULT_DIR)
    add_artifact_flag(p)
    p.add_argument("--backends", type=backend_list, default=list(REGISTRY))
    p.add_argument("--require", type=backend_list, default=[])
    p.add_argument("--skip", type=backend_list, default=[])
    p.add_argument("--probes", type=Path, action="append", default=[])
    p.add_argument("--chats", type=Path, action="append", default=[])
    p.add_argument("--text", type=Path, action="append", default=[])
    p.add_argument("--only-user-data", action="store_true", help="run only --probes/--text/--chats")
    p.add_argument("--json", type=Path, default=None, help="write the JSON report here")
    p.add_argument("--matrix", type=Path, default=None, help="write support-matrix rows (JSONL)")
    p.add_argument("--quiet", action="store_true", help="no progress lines")
    p.add_argument("--debug", action="store_true", help="show the trace of an internal error")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Parse ``argv`` and run; every exception is an exit code and one line (:func:`run_main`)."""
    args = build_parser().parse_args(argv)
    return run_main(lambda: run(args), prog=PROG, debug=args.debug)


def plan(args: argparse.Namespace) -> Plan:
    """The one input plan (``conformance.plan``): a ``--require``d backend that cannot run is
    INCOMPLETE here, before any check."""
    selection = select_backends(args.backends, require=args.require, skip=args.skip)
    return plan_inputs(
        args.dir,
        tool="conformance run",
        artifact=args.artifact,
        outputs={"--json": args.json, "--matrix": args.matrix},
        fixtures=FixtureFiles(
            probes=args.probes, chats=args.chats, texts=args.text, shipped=not args.only_user_data
        ),
        selection=selection,
    )


def run(args: argparse.Namespace) -> int:
    progress = None if args.quiet else (lambda msg: print(f"  .. {msg}", file=sys.stderr, flush=True))
    inputs = plan(args)
    fixtures = inputs.fixtures
    results, stale, _ = run_suite(inputs.exports, fixtures, list(inputs.backends), progress=progress)
    versions = {r.name: r.version for r in results if r.version}
    rows = explain(result_rows(results, stale=stale), versions=versions)
    rows = excluded_by_name(rows, inputs.excluded)
    required_missing = required_not_run(rows, required=args.require)
    code = exit_code(rows, required_missing=required_missing)
    verdict = verdict_line(rows, code)
    print(render_table(rows))
    for name in required_missing:
        print(f"{PROG}: error: required backend {name} did not run", file=sys.stderr)
    if args.json:
        meta = _meta(inputs.artifact, fixtures, results)
        doc = results_document(results, rows, verdict=verdict, code=code, meta=meta, stale=stale)
        write_text_atomic(args.json, to_json(doc))
    if args.matrix:
        write_text_atomic(args.matrix, _matrix_lines(results, fixtures, stale))
    print("\n" + render_verdict(verdict))
    return code


def _meta(artifact: Path, fixtures: FixtureSet, results: Sequence[BackendResult]) -> dict[str, Any]:
    return {
        "generator_seeds": fixtures.generator_seeds(),
        "fixtures": fixtures.hashes,
        "probes": len(fixtures.probes),
        "chats": len(fixtures.chats),
        "artifact": artifact.name,
        "versions": {r.name: r.version for r in results},
    }


def _matrix_lines(results: Sequence[BackendResult], fixtures: FixtureSet, stale: Sequence[str]) -> str:
    """One JSON line per backend; each carries the stale declarations that name it."""
    env = environment_versions()
    owner = {d.id: d.backend for d in fixtures.divergences}
    rows = [matrix_row(r, env=env, stale=[s for s in stale if owner.get(s) == r.name]) for r in results]
    return "\n".join(json.dumps(r, sort_keys=True) for r in rows) + "\n"


if __name__ == "__main__":
    sys.exit(main())
