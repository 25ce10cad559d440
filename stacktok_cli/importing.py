"""``stacktok import SOURCE --out A.json``: any byte-level BPE source -> a reference artifact.

SOURCE is an HF ``tokenizer.json`` (or its folder), a GGUF with ``tokenizer.ggml.model =
gpt2``, a ``.tiktoken`` file (with ``--pattern`` and ``--special TOKEN=ID``, which the file
does not carry), a minbpe ``.model`` file, or a seed-004 JSON. The artifact is v1 when the
source is exactly our layout (importing our own exports gives our fingerprint), else v2.
Anything else -- a SentencePiece / WordPiece / Unigram model, a normalizer, another
pre-tokenizer, a GGUF pre type with no known regex -- exits 2 with one line naming the file
and the component. Prints one summary line (format, ids, fingerprint).

SOURCE is untrusted input: every file is read within the limits of
``stacktok_export.util.limits`` (a ``.tiktoken``, ``tokenizer.json``, a vocabulary's entries...),
which ``--max-file-mb MB`` raises; a malformed file of any kind exits 2 naming the file and the
field, never 3.

Out of scope: the readers (``stacktok_export.importers``), exports of the result
(``stacktok export --artifact A.json``).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from conformance.core.errors import UsageError
from stacktok_cli.args import check_out_file
from stacktok_export.util import limits

HELP = "import a byte-level BPE (tokenizer.json, GGUF, .tiktoken, minbpe, seed 004) as an artifact"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "source", help="tokenizer.json (or its folder), .gguf, .tiktoken, minbpe .model, or seed-004 .json"
    )
    p.add_argument("--out", required=True, help="artifact path to write (JSON); required, no default")
    p.add_argument(
        "--pattern", default=None, help="the split regex (required for .tiktoken; else replaces the source's)"
    )
    p.add_argument(
        "--special",
        action="append",
        default=[],
        metavar="TOKEN=ID",
        help=".tiktoken only: a special token and its id (repeatable)",
    )
    p.add_argument("--name", default=None, help="the artifact's name (default: from the source)")
    limits.add_flag(p)


def parse_special(text: str) -> tuple[str, int]:
    """``"<|endoftext|>=100257"`` -> ``("<|endoftext|>", 100257)`` (split at the last ``=``)."""
    token, sep, number = text.rpartition("=")
    if not sep or not token or not (number.isascii() and number.isdigit() and len(number) <= 10):
        raise UsageError(f"--special {text!r}: expected TOKEN=ID, e.g. --special '<|endoftext|>=100257'")
    return token, int(number)


def main(args: argparse.Namespace) -> int:
    from stacktok_export.importers import ImportRefused, import_tokenizer

    out = Path(args.out)
    check_out_file(out, flag="--out")
    specials = [parse_special(s) for s in args.special]
    try:
        with limits.from_flag(args.max_file_mb):
            tok = import_tokenizer(args.source, pattern=args.pattern, specials=specials, name=args.name)
    except ImportRefused as exc:
        raise UsageError(f"cannot import: {exc}") from None
    tok.save(out)
    print(f"wrote {out}: {tok.format}, {tok.vocab_size:,} ids, fingerprint {tok.fingerprint}")
    return 0


#: the names the brief asked for (``register(sub)`` / ``run(args)``), same functions
register, run = add_arguments, main
