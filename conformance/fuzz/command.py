"""``stacktok fuzz`` on the command line: its arguments, their checks, and the exit code.

``add_arguments(parser)`` and ``main(args) -> int`` are what ``stacktok_cli`` registers;
``cli(argv)`` is ``python -m conformance.fuzz``. Bad numbers, an ``--out`` inside DIR or
over an input (the shared rule, ``conformance.core.outputs.check_outputs``, applied when the
inputs are planned: ``conformance.fuzz.load``), a directory with no export and no backend to
fuzz are a :class:`conformance.core.errors.UsageError`: one line on stderr, exit 2. Otherwise
the exit code is the report's (0 / 1).

Out of scope: the run itself (``conformance.fuzz.engine``) and what it prints
(``conformance.fuzz.output``).
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable
from pathlib import Path

from conformance.backends import REGISTRY
from conformance.core.arguments import add_artifact_flag, artifact_path, comma_list
from conformance.core.errors import UsageError
from conformance.core.hub import resolve_target
from conformance.fuzz.config import DEFAULT_BACKENDS, DEFAULT_EXAMPLES, FuzzConfig
from conformance.fuzz.engine import run_fuzz
from conformance.fuzz.generators import GENERATORS
from conformance.fuzz.output import probes_jsonl, render
from conformance.report.entry import verdict_or_usage
from stacktok_export.util.atomic import write_text_atomic
from stacktok_export.util.progress import Progress

DESCRIPTION = "``stacktok fuzz DIR``: differential fuzzing of every backend against the reference."


_backend_names = comma_list(tuple(REGISTRY), what="backend", at_least_one=True)
_generator_names = comma_list(tuple(GENERATORS), what="generator", at_least_one=True)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "dir",
        metavar="DIR",
        help="the checkpoint or tokenizer directory whose exports to fuzz, or a Hub id org/name[@rev]",
    )
    p.add_argument(
        "--gguf", metavar="FILE", default=None, help="with a Hub id: also fetch this GGUF of the repository"
    )
    add_artifact_flag(p)
    p.add_argument(
        "--backends",
        type=_backend_names,
        default=list(DEFAULT_BACKENDS),
        help="comma list (default: every backend but the reference)",
    )
    budget = p.add_mutually_exclusive_group()
    budget.add_argument("--seconds", type=float, default=None, help="generate inputs for this long")
    budget.add_argument(
        "--examples",
        type=int,
        default=None,
        help=f"check exactly this many inputs (default {DEFAULT_EXAMPLES}; deterministic)",
    )
    p.add_argument("--seed", type=int, default=0, help="the input stream's seed (default 0)")
    p.add_argument("--out", type=Path, default=None, help="write minimal counterexamples here as probe JSONL")
    p.add_argument(
        "--generators",
        type=_generator_names,
        default=list(GENERATORS),
        help="comma list (default: all): " + ", ".join(GENERATORS),
    )
    p.add_argument(
        "--keep",
        type=int,
        default=1,
        help="divergent inputs shrunk per backend, mode and generator (default 1)",
    )
    p.add_argument("--quiet", action="store_true", help="no progress lines")


def config_from_args(args: argparse.Namespace) -> FuzzConfig:
    if args.seconds is not None and not args.seconds > 0:
        raise UsageError(f"--seconds must be positive, got {args.seconds}")
    if args.examples is not None and args.examples <= 0:
        raise UsageError(f"--examples must be positive, got {args.examples}")
    if args.keep <= 0:
        raise UsageError(f"--keep must be positive, got {args.keep}")
    target = resolve_target(args.dir, gguf=args.gguf)
    examples = args.examples if args.examples is not None or args.seconds is not None else DEFAULT_EXAMPLES
    return FuzzConfig(
        directory=target.directory,
        target=target if target.repo is not None else None,
        artifact=artifact_path(args.artifact),
        backends=args.backends,
        seed=args.seed,
        examples=examples,
        seconds=args.seconds,
        generators=args.generators,
        keep=args.keep,
        out=args.out,
    )


def main(args: argparse.Namespace) -> int:
    return verdict_or_usage(lambda: _run(args), prog="stacktok fuzz")


def _run(args: argparse.Namespace) -> int:
    config = config_from_args(args)
    with Progress(quiet=args.quiet) as say:  # the one progress view every long command uses
        report = run_fuzz(config, say)
    print(render(report), flush=True)
    if config.out is not None:
        write_text_atomic(config.out, probes_jsonl(report))
    return report.exit_code


def cli(argv: Iterable[str] | None = None) -> int:
    """``python -m conformance.fuzz DIR ...`` (what ``stacktok fuzz`` runs)."""
    p = argparse.ArgumentParser(prog="stacktok fuzz", description=DESCRIPTION)
    add_arguments(p)
    return main(p.parse_args(None if argv is None else list(argv)))
