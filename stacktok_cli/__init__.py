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
and was not excluded by name (``--skip``), or a ``--require``d one cannot run; 130 interrupted
(SIGINT, Ctrl-C) and 143 terminated (SIGTERM), at any moment, from the first import on: one line
on stderr, no traceback; the gate's backend children are ended and reaped and no report is
written (:func:`conformance.report.entry.ending_on_signals`).

Out of scope: the logic of any command (each is a thin wrapper).
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Sequence


def _is_the_command() -> bool:
    """Whether this process was started as ``stacktok`` (``python -m stacktok``, ``python -m
    stacktok_cli``, the console script), not a program that imports this package."""
    argv = list(getattr(sys, "orig_argv", ()))
    if "-m" in argv:
        return argv[argv.index("-m") + 1 : argv.index("-m") + 2] in (["stacktok"], ["stacktok_cli"])
    return len(argv) > 1 and os.path.basename(argv[1]) == "stacktok"


def _end_early(signum: int, frame: object) -> None:
    """A signal while the command is still importing: nothing to clean up yet; one line, 130/143."""
    os.write(2, f"stacktok: {'interrupted' if signum == signal.SIGINT else 'terminated'}\n".encode())
    os._exit(128 + signum)


if _is_the_command():  # before the imports below (~0.3 s): a Ctrl-C there is one line, no traceback
    for _sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(_sig, _end_early)

from conformance.report.entry import run_main  # noqa: E402 -- after the early handlers, on purpose
from stacktok_cli.table import build_parser  # noqa: E402

__all__ = ["build_parser", "main"]


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``stacktok ARGV``; return its exit code (the command's own 0/1, or 2/3/4/130/143).

    The mapping of exceptions and signals to 2/3/4/130/143 is
    :func:`conformance.report.entry.run_main`, shared with ``python -m conformance``; argparse's
    own exit 2 passes through it (parsing runs inside, so a Ctrl-C there is one line too).
    """
    argv = list(sys.argv[1:] if argv is None else argv)

    def run() -> int:
        args = build_parser().parse_args(argv)
        return args.func(args)

    options = argv[: argv.index("--")] if "--" in argv else argv  # after `--` it is an operand
    return run_main(run, prog="stacktok", debug="--debug" in options)
