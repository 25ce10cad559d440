"""``stacktok train INPUT... --out PATH``: train a tokenizer artifact from text files.

A thin wrapper over :meth:`stacktok_export.StackTokenizer.train_from_iterable`: checks the
flags (vocabulary bounds, ``--workers``, the output path) before reading any text, trains
with a progress bar on standard error, saves the artifact and prints one summary line.

Out of scope: the training itself (``stacktok_export.trainer``) and reading corpora
(``stacktok_export.corpus``).
"""

from __future__ import annotations

import argparse
import time
import warnings
from pathlib import Path

from conformance.core.errors import UsageError
from stacktok_cli.args import add_corpus_arguments, check_out_file, check_workers, corpus_options, input_paths
from stacktok_export.artifact.artifact import MAX_VOCAB
from stacktok_export.corpus.corpus import CorpusError, training_texts
from stacktok_export.models.bpe.bpe import SPECIAL_TOKENS, VOCAB_SIZE, StackTokenizer
from stacktok_export.util import limits

HELP = "train a tokenizer artifact from text files"


def add_arguments(t: argparse.ArgumentParser) -> None:
    t.add_argument("inputs", nargs="+", help="files, globs, or - for stdin (UTF-8); required, no default")
    t.add_argument("--vocab-size", type=int, default=VOCAB_SIZE, help=f"ids in all (default: {VOCAB_SIZE})")
    t.add_argument("--out", required=True, help="artifact path to write (JSON); required, no default")
    t.add_argument(
        "--max-bytes", type=int, default=None, help="stop reading after B bytes (default: read all)"
    )
    t.add_argument(
        "--workers",
        type=int,
        default=None,
        help="processes for pre-tokenizing, at least 1 (default: one per core)",
    )
    t.add_argument("--quiet", action="store_true", help="no progress bar (default: show progress)")
    add_corpus_arguments(t)
    limits.add_flag(t, what="the longest document (a line, a JSONL record, a whole file)")


def main(args: argparse.Namespace) -> int:
    with limits.from_flag(args.max_file_mb):
        return _main(args)


def _main(args: argparse.Namespace) -> int:
    if not 256 + len(SPECIAL_TOKENS) <= args.vocab_size <= MAX_VOCAB:
        raise UsageError(
            f"--vocab-size must be at least {256 + len(SPECIAL_TOKENS)} and at most {MAX_VOCAB} "
            "(ids are 16-bit)"
        )
    check_workers(args.workers)
    check_out_file(Path(args.out), flag="--out")
    paths = input_paths(args.inputs)
    from stacktok_export.trainer.trainer import ProgressBar

    tok = StackTokenizer(name=Path(args.out).stem)
    start = time.perf_counter()
    texts = training_texts(paths, options=corpus_options(args), max_bytes=args.max_bytes)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            shortfall = tok.train_from_iterable(
                texts,
                vocab_size=args.vocab_size,
                workers=args.workers,
                progress=None if args.quiet else ProgressBar(),
            )
        except CorpusError as exc:
            raise UsageError(str(exc)) from None
    tok.save(args.out)
    took = time.perf_counter() - start
    print(
        f"wrote {args.out}: vocab {tok.vocab_size}, {len(tok.merges)} merges, "
        f"shortfall {shortfall}, {took:.1f}s, fingerprint {tok.fingerprint[:16]}"
    )
    if shortfall:
        print(f"warning: shortfall {shortfall}: padded with <|unused_N|>; train on more text")
    return 0
