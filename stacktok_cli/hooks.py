"""The pre-commit hook ``stacktok-gate``: gate every directory holding a changed tokenizer file.

pre-commit runs ``python -m stacktok_cli.hooks gate [OPTIONS] FILE...`` with the hook's
``args`` first and the changed files last (``.pre-commit-hooks.yaml``). The trailing
arguments that name tokenizer files (:data:`TOKENIZER_FILES`, the same pattern as the hook's
``files:``) are the changed files; everything before them is passed to ``stacktok gate``
unchanged. Each distinct parent directory is gated once, in sorted order; the exit code is the
largest of the runs (any failure or INCOMPLETE fails the commit).

Out of scope: the gate itself (``conformance.gate``); ``stacktok-export-check`` (it runs
``stacktok export --check`` directly, without file names).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Sequence
from pathlib import Path

from stacktok_cli import main as stacktok

#: the files the hook reacts to; keep equal to ``files:`` in .pre-commit-hooks.yaml (tests/test_hooks.py)
TOKENIZER_FILES = (
    r"(^|/)(tokenizer\.json|tokenizer_config\.json|special_tokens_map\.json|chat_template\.jinja"
    r"|[^/]+\.tiktoken|[^/]+\.gguf|tokenizer/[^/]+\.json)$"
)
_MATCH = re.compile(TOKENIZER_FILES)


def split_files(argv: Sequence[str]) -> tuple[list[str], list[str]]:
    """``(options, files)``: the trailing arguments that are tokenizer files, and what precedes them."""
    end = len(argv)
    while end > 0 and _MATCH.search(argv[end - 1].replace("\\", "/")) and Path(argv[end - 1]).is_file():
        end -= 1
    return list(argv[:end]), list(argv[end:])


def gate_changed(argv: Sequence[str]) -> int:
    options, files = split_files(argv)
    directories = sorted({str(Path(f).parent) for f in files})
    if not directories:
        print("stacktok-gate: no tokenizer file among the changed files; nothing to gate")
        return 0
    codes = []
    for directory in directories:
        print(f"stacktok-gate: stacktok gate {directory}", flush=True)
        codes.append(stacktok(["gate", directory, *options]))
    return max(codes)


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] != "gate":
        print("usage: python -m stacktok_cli.hooks gate [GATE OPTIONS] FILE...", file=sys.stderr)
        return 2
    return gate_changed(args[1:])


if __name__ == "__main__":
    sys.exit(main())
