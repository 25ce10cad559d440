"""``python -m conformance``: run every installed backend over the shared probes.

    python -m conformance [DIR] [--artifact PATH] [--backends LIST] [--require LIST]
                          [--probes F.jsonl]... [--chats F.jsonl]... [--text F]...
                          [--json PATH] [--matrix PATH]

DIR defaults to ``tokenizer/stack100m-32768-hf`` (with the ``.tiktoken`` and
``.gguf`` beside it). Exit 0: every backend conforms (declared divergences
allowed); 1: an undeclared divergence or a stale declaration; 2: usage
error, unreadable input, or a ``--require``d backend missing.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from stacktok_export._atomic import write_text_atomic

from conformance.backends import REGISTRY, backend_list, check_selection
from conformance.core.environment import environment_versions
from conformance.core.fixtures import FixtureSet
from conformance.core.layout import Exports, LayoutError
from conformance.report import matrix_row, render_text, to_json
from conformance.core.rows import exit_code, verdict_line
from conformance.checks.runner import result_rows, run_suite
from conformance.validate import input_errors, validate_directory

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_DIR = ROOT / "tokenizer" / "stack100m-32768-hf"
DEFAULT_ARTIFACT = ROOT / "tokenizer" / "stack100m-32768.json"


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m conformance", description=__doc__.splitlines()[0])
    p.add_argument("dir", nargs="?", type=Path, default=DEFAULT_DIR)
    p.add_argument("--artifact", type=Path, default=DEFAULT_ARTIFACT)
    p.add_argument("--backends", type=backend_list, default=list(REGISTRY))
    p.add_argument("--require", type=backend_list, default=[])
    p.add_argument("--probes", type=Path, action="append", default=[])
    p.add_argument("--chats", type=Path, action="append", default=[])
    p.add_argument("--text", type=Path, action="append", default=[])
    p.add_argument("--json", type=Path, default=None, help="write the JSON report here")
    p.add_argument("--matrix", type=Path, default=None, help="write support-matrix rows (JSONL)")
    p.add_argument("--quiet", action="store_true", help="no progress lines")
    p.add_argument("--debug", action="store_true", help="show the trace of an internal error")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    progress = None if args.quiet else (lambda msg: print(f"  .. {msg}", file=sys.stderr, flush=True))
    try:
        problem = check_selection(args.backends, args.require)
        if problem:
            raise LayoutError(problem)
        exports = Exports.discover(args.dir, artifact=args.artifact)
        validate_directory(exports, directory=args.dir)
        fixtures = FixtureSet.load(probes=args.probes, chats=args.chats, texts=args.text)
        results, stale, _ = run_suite(exports, fixtures, args.backends, progress=progress)
    except input_errors() as exc:
        print(f"conformance: error: {exc}", file=sys.stderr)
        return 2
    rows = result_rows(results, stale=stale)
    print(render_text(results, stale=stale))
    required_missing = [r.name for r in results if r.status in ("missing", "skip") and r.name in args.require]
    for name in required_missing:
        print(f"conformance: error: required backend {name} is missing", file=sys.stderr)
    meta = {
        "generator_seeds": fixtures.generator_seeds(),
        "fixtures": fixtures.hashes,
        "probes": len(fixtures.probes),
        "chats": len(fixtures.chats),
        "artifact": args.artifact.name,
        "versions": {r.name: r.version for r in results},
    }
    if args.json:
        write_text_atomic(args.json, to_json(results, meta=meta, stale=stale))
    if args.matrix:
        env = environment_versions()
        owner = {d.id: d.backend for d in fixtures.divergences}
        lines = [
            json.dumps(
                matrix_row(r, env=env, stale=[s for s in stale if owner.get(s) == r.name]), sort_keys=True
            )
            for r in results
        ]
        write_text_atomic(args.matrix, "\n".join(lines) + "\n")
    code = exit_code(rows, required_missing=required_missing)
    print(f"verdict: {verdict_line(rows, code)}")
    return code


def _main_or_exit_3() -> int:
    """An unexpected error is one line and exit 3 (never 0 or 1, which carry the verdict)."""
    try:
        return main()
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # noqa: BLE001
        if "--debug" in sys.argv:
            raise
        print(
            f"conformance: internal error: {type(exc).__name__}: {str(exc)[:300]} "
            "(rerun with --debug for the trace); this is a bug in stacktok, not a verdict",
            file=sys.stderr,
        )
        return 3


if __name__ == "__main__":
    sys.exit(_main_or_exit_3())
