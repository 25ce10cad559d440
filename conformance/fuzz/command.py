"""``stacktok fuzz`` on the command line: its arguments, their checks, and the exit code.

``add_arguments(parser)`` and ``main(args) -> int`` are what ``stacktok_cli`` registers;
``cli(argv)`` is ``python -m conformance.fuzz``. Bad numbers, an ``--out`` inside DIR
(the shared rule, ``conformance.core.layout.refuse_outputs_inside``), a directory with
no export and no backend to fuzz are a :class:`conformance.core.errors.UsageError`:
one line on stderr, exit 2. Otherwise the exit code is the report's (0 / 1).

Out of scope: the run itself (``conformance.fuzz.engine``) and what it prints
(``conformance.fuzz.output``).
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable
from pathlib import Path

from conformance.backends import REGISTRY, backend_list
from conformance.core.errors import UsageError
from conformance.core.hub import resolve_target as resolve_hub
from conformance.core.layout import refuse_outputs_inside
from conformance.fuzz.config import DEFAULT_BACKENDS, DEFAULT_EXAMPLES, FuzzConfig
from conformance.fuzz.engine import run_fuzz
from conformance.fuzz.generators import GENERATORS
from conformance.fuzz.output import probes_jsonl, render
from conformance.report.entry import verdict_or_usage
from stacktok_export._atomic import write_text_atomic
from stacktok_export.bpe import shipped_artifact_path
from stacktok_export.progress import Progress

DESCRIPTION = "``stacktok fuzz DIR``: differential fuzzing of every backend against the reference."


def _backend_names(value: str) -> list[str]:
    names = list(dict.fromkeys(backend_list(value)))
    if not names:
        raise argparse.ArgumentTypeError(f"name at least one backend; choose from {', '.join(REGISTRY)}")
    return names


def _generator_names(value: str) -> list[str]:
    names = [n.strip() for n in value.split(",") if n.strip()]
    unknown = [n for n in names if n not in GENERATORS]
    if unknown or not names:
        choose = ", ".join(GENERATORS)
        raise argparse.ArgumentTypeError(f"unknown generator(s) {unknown}; choose from {choose}")
    return list(dict.fromkeys(names))


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "dir",
        metavar="DIR",
        help="the checkpoint or tokenizer directory whose exports to fuzz, or a Hub id org/name[@rev]",
    )
    p.add_argument(
        "--gguf", metavar="FILE", default=None, help="with a Hub id: also fetch this GGUF of the repository"
    )
    p.add_argument("--artifact", type=Path, default=None, help="frozen artifact (default: the shipped one)")
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
    directory = resolve_hub(args.dir, gguf=args.gguf).directory
    refuse_outputs_inside(directory, {"--out": args.out}, tool="fuzz")
    examples = args.examples if args.examples is not None or args.seconds is not None else DEFAULT_EXAMPLES
    return FuzzConfig(
        directory=directory,
        artifact=args.artifact or shipped_artifact_path(),
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
