"""The command table: every ``stacktok`` command, in the order ``stacktok --help`` lists them.

One :class:`Command` per line -- its name, its one-line help, the function that adds its
flags and the function that runs it (``run(args) -> exit code``) -- imported plainly from
``stacktok_cli`` (the tokenizer's commands) and ``conformance`` (the suite's). Adding a
command is one import and one line here. :func:`build_parser` turns the table into the
``argparse`` parser.

Out of scope: what any command does (its own module) and the exit mapping
(``stacktok_cli.main``).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass

import conformance.audit as audit
import conformance.fuzz as fuzz
import conformance.gate as gate
from stacktok_cli import completion, export, importing, matrix, pack, retokenize, tokens, train
from stacktok_cli.args import Parser
from stacktok_export import __version__


@dataclass(frozen=True)
class Command:
    """One ``stacktok NAME`` subcommand."""

    name: str
    help: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]
    #: also show ``help`` at the top of ``stacktok NAME --help``
    described: bool = False


_GATE = "release gate: check a checkpoint/tokenizer directory before publishing"
_FUZZ = "differential fuzzing of a directory's exports, with shrinking"
_AUDIT = "audit a vocabulary: reachability, duplicates, Unicode tables"
_DEBUG = "print the full trace of an internal error (default: off)"


def _completion(args: argparse.Namespace) -> int:
    """``stacktok completion``: the script of the parser this table builds (``completion`` imports
    nothing of the table, so the two form no circle)."""
    return completion.main(args, build_parser())


COMMANDS: tuple[Command, ...] = (
    Command("train", train.HELP, train.add_arguments, train.main),
    Command("pack", pack.HELP, pack.add_arguments, pack.main),
    Command("info", tokens.INFO_HELP, tokens.add_info_arguments, tokens.info),
    Command("encode", tokens.ENCODE_HELP, tokens.add_encode_arguments, tokens.encode),
    Command("decode", tokens.DECODE_HELP, tokens.add_decode_arguments, tokens.decode),
    Command("retokenize", retokenize.HELP, retokenize.add_arguments, retokenize.main, described=True),
    Command("export", export.HELP, export.add_arguments, export.main),
    Command("import", importing.HELP, importing.add_arguments, importing.main),
    Command("gate", _GATE, gate.add_arguments, gate.main, described=True),
    Command("fuzz", _FUZZ, fuzz.add_arguments, fuzz.main, described=True),
    Command("audit", _AUDIT, audit.add_arguments, audit.main, described=True),
    Command("matrix", matrix.HELP, matrix.add_arguments, matrix.main),
    Command("completion", completion.HELP, completion.add_arguments, _completion),
)


def build_parser() -> argparse.ArgumentParser:
    """``stacktok`` with every command of :data:`COMMANDS`; ``args.func(args)`` runs the chosen one."""
    p = Parser(prog="stacktok", description="A frozen byte-level BPE, its exporters, and the release gate.")
    p.add_argument("--version", action="version", version=f"stacktok {__version__}")
    p.add_argument("--debug", action="store_true", help=_DEBUG)
    sub = p.add_subparsers(dest="command", required=True, parser_class=Parser, metavar="COMMAND")
    for command in COMMANDS:
        described = {"description": command.help} if command.described else {}
        cmd = sub.add_parser(command.name, help=command.help, **described)
        command.add_arguments(cmd)
        # after the subcommand too (`stacktok gate DIR --debug`); SUPPRESS keeps a --debug given before it
        cmd.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help=_DEBUG)
        cmd.set_defaults(func=command.run)
    return p
