"""The ``stacktok`` command line: the tokenizer's commands and the suite's, above both packages.

``stacktok_export`` (the reference tokenizer and its exporters) knows nothing of
``conformance`` (the suite); this package is the only place that imports both:
``train``, ``info``, ``encode``, ``decode`` and ``export`` come from
``stacktok_export.cli``; ``gate``, ``fuzz`` and ``audit`` from ``conformance``.

Exit codes, for every command: 0 success / conforms; 1 a check failed (the
verdict); 2 usage error or malformed input, with a one-line reason naming the
file and field; 3 an internal error of stacktok itself -- one line, the full
trace only with ``--debug`` -- so a bug can never be mistaken for a verdict;
130 interrupted.

Out of scope: the logic of any command (each is a thin wrapper).
"""

from __future__ import annotations

import argparse
import sys
import traceback
from collections.abc import Sequence

from stacktok_export import __version__
from stacktok_export.cli import UsageError, _Parser, add_commands

EXIT_USAGE, EXIT_INTERNAL = 2, 3

#: name -> (module, help); each module has ``add_arguments(parser)`` and ``main(args) -> int``.
SUITE_COMMANDS = {
    "gate": ("conformance.gate", "release gate: check a checkpoint/tokenizer directory before publishing"),
    "fuzz": ("conformance.fuzz", "differential fuzzing of a directory's exports, with shrinking"),
    "audit": ("conformance.audit", "audit a vocabulary: reachability, duplicates, Unicode tables"),
}


def build_parser() -> argparse.ArgumentParser:
    import importlib

    p = _Parser(prog="stacktok", description="A frozen byte-level BPE, its exporters, and the release gate.")
    p.add_argument("--version", action="version", version=f"stacktok {__version__}")
    p.add_argument("--debug", action="store_true", help="print the full trace of an internal error")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser, metavar="COMMAND")
    add_commands(sub)
    for name, (module, text) in SUITE_COMMANDS.items():
        mod = importlib.import_module(module)
        cmd = sub.add_parser(name, help=text, description=text)
        mod.add_arguments(cmd)
        cmd.set_defaults(func=mod.main)
    return p


def _usage_errors() -> tuple[type[BaseException], ...]:
    """Every exception class that means "bad input" (exit 2), from both packages."""
    from conformance.validate import input_errors

    return (UsageError, *input_errors())


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in argv
    try:
        args = build_parser().parse_args(argv)
        return args.func(args)
    except KeyboardInterrupt:
        print("stacktok: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `stacktok info | head`
        sys.stderr.close()
        return 0
    except SystemExit:
        raise
    except Exception as exc:  # noqa: BLE001 -- the one place that turns anything into one line
        if isinstance(exc, _usage_errors()):
            print(f"stacktok: error: {exc}", file=sys.stderr)
            return EXIT_USAGE
        if debug:
            traceback.print_exc()
        where = "" if debug else " (rerun with --debug for the full trace)"
        print(
            f"stacktok: internal error: {type(exc).__name__}: {str(exc)[:300]}{where}; "
            "this is a bug in stacktok, not a verdict on your files -- please report it",
            file=sys.stderr,
        )
        return EXIT_INTERNAL
