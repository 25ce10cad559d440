"""``stacktok pack INPUT... --out DIR``: the command line over :func:`stacktok_export.pack.pack`.

Encodes a corpus into verified uint16 (uint32 past 65,536 ids) shards, in parts any engine runs
apart (resumable), or with ``--check DIR``
(``check_pack``) re-hashes every shard and re-encodes a sample. The ``pack`` package needs
numpy, so nothing of it is imported until the command runs (``stacktok --help`` stays fast;
a missing numpy is a usage error naming the extra to install). Exit 1 when the fast encoder
differed from the reference.

Inputs are read streaming with a bounded amount held per document: a document (a whole file
under ``--text-docs file``, a paragraph, a line, a JSON Lines record, a Parquet value) over
``limits.current().corpus_line`` (64 MiB) is refused (exit 2) naming the file and line;
``--max-file-mb MB`` raises that limit (and every other input limit,
``stacktok_export.util.limits``); it travels to the workers in ``CorpusOptions.max_document``.
A compressed input is never decompressed whole, so a zstd bomb is refused at its first
over-long document or streamed.

Out of scope: the logic (``stacktok_export.pack``: ``pipeline``, ``reader``).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys

from conformance.core.errors import UsageError
from stacktok_cli.args import (
    add_artifact_flag,
    add_corpus_arguments,
    artifact_path,
    corpus_options,
    input_paths,
)
from stacktok_cli.sigterm import sigterm_as_exit
from stacktok_export.corpus.corpus import CorpusError
from stacktok_export.util import limits

HELP = "encode a corpus into verified token shards (resumable, local or on a Ray cluster)"


def add_arguments(k: argparse.ArgumentParser) -> None:
    k.add_argument(
        "inputs", nargs="*", help="text / .jsonl / .parquet files or globs (.gz and .zst read too)"
    )
    k.add_argument("--out", default=None, help="pack directory to write (or, with --check, to check)")
    add_artifact_flag(k)
    add_corpus_arguments(k)
    k.add_argument(
        "--shard-tokens",
        type=int,
        default=100_000_000,
        help="close a shard at this many tokens (default: 1e8)",
    )
    k.add_argument(
        "--part-bytes",
        type=int,
        default=64 << 20,
        help="cut inputs into parts of about this many bytes, run in parallel; each part ends a shard "
        "(default: 64 MiB)",
    )
    k.add_argument(
        "--format", choices=("plain", "megatron"), default="plain", help="also write Megatron .idx"
    )
    k.add_argument("--keep-empty", action="store_true", help="keep empty documents as <|bos|><|eos|>")
    k.add_argument(
        "--verify", default="0.01", help="fraction re-encoded by the reference, or 'all' (default: 0.01)"
    )
    k.add_argument("--engine", choices=("local", "ray"), default="local", help="process pool or Ray tasks")
    k.add_argument(
        "--workers",
        type=int,
        default=0,
        help="encoders (default: one per core; Ray: one task per cluster CPU)",
    )
    k.add_argument("--address", default=None, help="Ray cluster address (default: start a local Ray)")
    k.add_argument(
        "--check",
        action="store_true",
        help="stacktok pack --check DIR: re-hash every shard, re-encode a sample",
    )
    limits.add_flag(
        k, what="the longest document (a line, a JSONL record, a whole file) and every input limit"
    )
    k.add_argument("--quiet", action="store_true", help="no progress bar")


def main(args: argparse.Namespace) -> int:
    with limits.from_flag(args.max_file_mb):
        return _main(args)


def _main(args: argparse.Namespace) -> int:
    try:
        from stacktok_export.pack import EngineError, PackError, PackMismatch, PackOptions, check_pack, pack
    except ImportError as exc:
        raise UsageError(f"stacktok pack needs {exc.name}: pip install 'stacktok[pack]'") from None

    try:
        if args.check:
            dirs = [*args.inputs, *([args.out] if args.out else [])]
            if len(dirs) != 1:
                raise UsageError("--check takes one pack directory: stacktok pack --check DIR")
            return _report_check(
                check_pack(dirs[0], artifact=str(artifact_path(args.artifact)), rate=_rate(args.verify)),
                dirs[0],
            )
        if not args.out:
            raise UsageError("--out DIR is required: the directory to write the shards into")
        # the limit travels with the options: spawned and Ray workers read with it too
        corpus = dataclasses.replace(corpus_options(args), max_document=limits.current().corpus_line)
        options = PackOptions(
            corpus=corpus,
            shard_tokens=args.shard_tokens,
            part_bytes=args.part_bytes,
            fmt=args.format,
            keep_empty=args.keep_empty,
            verify=_rate(args.verify),
            artifact=str(artifact_path(args.artifact)),
            engine=args.engine,
            workers=args.workers,
            address=args.address,
            quiet=args.quiet,
        )
        with sigterm_as_exit():
            manifest = pack(input_paths(args.inputs), args.out, options=options)
    except (PackError, CorpusError) as exc:
        raise UsageError(str(exc)) from None
    except (PackMismatch, EngineError) as exc:
        print(f"stacktok: pack stopped: {exc}", file=sys.stderr)
        return 1
    t = manifest["totals"]
    print(
        f"packed {t['documents']:,} documents, {t['tokens']:,} tokens, {t['shards']} shards in {args.out} "
        f"(verified {t['verified']:,}, reference-encoded {t['reference_encoded']:,}, "
        f"empty dropped {t['empty_dropped']:,}, invalid UTF-8 skipped {t['invalid_skipped']:,} / "
        f"replaced {t['invalid_utf8_replaced']:,})"
    )
    return 0


def _rate(text: str) -> float:
    if text == "all":
        return 1.0
    try:
        rate = float(text)
    except ValueError:
        rate = -1.0
    if not 0.0 <= rate <= 1.0:
        raise UsageError(f"--verify takes a fraction in [0, 1] or 'all', got {text!r}")
    return rate


def _report_check(problems: list[str], out: str) -> int:
    for p in problems:
        print(f"problem: {p}")
    print(f"{out}: {'FAIL' if problems else 'OK'} ({len(problems)} problem(s))")
    return 1 if problems else 0
