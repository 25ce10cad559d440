"""The ``stacktok`` command line: the tokenizer's commands and the suite's, above both packages.

``stacktok_export`` (the reference tokenizer and its exporters) knows nothing of
``conformance`` (the suite); this package is the only place that imports both. The layout:

- ``table``: the command table (every command, plain imports) and :func:`build_parser`;
- ``train``, ``tokens`` (info, encode, decode), ``pack``, ``retokenize``, ``export``: the
  tokenizer's commands, thin wrappers over ``stacktok_export``; ``gate``, ``fuzz`` and
  ``audit`` are ``conformance``'s;
- ``describe``: ``info`` on an HF directory, a GGUF or a ``.tiktoken``; ``matrix``: the shipped
  support matrix; ``completion``: the shell completion script (shtab);
- ``args``: the shared parser class and argument helpers; ``sigterm``: clean-up on ``kill``;
- here, :func:`main`: parse, run, and map what escapes to an exit code.

Exit codes, for every command: 0 success / conforms; 1 a check failed (the
verdict); 2 usage error or malformed input, with a one-line reason naming the
file and field; 3 an internal error of stacktok itself -- one line, the full
trace only with ``--debug`` -- so a bug can never be mistaken for a verdict;
4 INCOMPLETE: nothing failed, but a backend that reads a file in the directory did not run
and was not excluded by name (``--skip``), or a ``--require``d one cannot run; 130 interrupted.

Out of scope: the logic of any command (each is a thin wrapper).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from conformance.report.entry import run_main
from stacktok_cli.table import build_parser

__all__ = ["build_parser", "main"]


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``stacktok ARGV``; return its exit code (the command's own 0/1, or 2/3/130).

    The mapping of exceptions to 2/3/130 is :func:`conformance.report.entry.run_main`, shared
    with ``python -m conformance``; argparse's own exit 2 passes through it.
    """
    argv = list(sys.argv[1:] if argv is None else argv)

    def run() -> int:
        args = build_parser().parse_args(argv)
        return args.func(args)

    options = argv[: argv.index("--")] if "--" in argv else argv  # after `--` it is an operand
    return run_main(run, prog="stacktok", debug="--debug" in options)
