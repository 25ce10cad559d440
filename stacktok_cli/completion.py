"""``stacktok completion bash|zsh``: the shell completion script, generated from the parser by shtab.

Every command and flag of the parser the command table builds (:func:`stacktok_cli.table.build_parser`,
which hands it to :func:`main`) completes; nothing is kept by hand, so a new command completes as
soon as it is in the table. Install it with
``stacktok completion bash > ~/.local/share/bash-completion/completions/stacktok`` (bash) or
``stacktok completion zsh > "${fpath[1]}/_stacktok"`` (zsh).

Out of scope: other shells (shtab also writes tcsh; not offered until tested).
"""

from __future__ import annotations

import argparse

HELP = "print the shell completion script (bash or zsh)"
SHELLS = ("bash", "zsh")


def add_arguments(c: argparse.ArgumentParser) -> None:
    c.add_argument("shell", choices=SHELLS, help="the shell to complete for")


def main(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    """Print the completion script of ``parser`` (the whole ``stacktok`` command line)."""
    import shtab

    print(shtab.complete(parser, shell=args.shell), end="")
    return 0
