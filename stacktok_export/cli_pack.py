"""``stacktok pack``: the command line over :func:`stacktok_export.pack.pack` and :func:`check_pack`.

Kept out of ``cli.py`` (one registration line there) and out of the ``pack`` package,
which needs numpy: nothing heavy is imported until the command runs.

Out of scope: the logic (``pipeline``, ``reader``).
"""

from __future__ import annotations

import argparse
import sys


def add_pack(sub: argparse._SubParsersAction) -> None:
    k = sub.add_parser("pack", help="encode a corpus into verified uint16 shards (resumable)")
    k.add_argument("inputs", nargs="*", help="text / .jsonl / .parquet files or globs (.gz read too)")
    k.add_argument("--out", default=None, help="pack directory to write (or, with --check, to check)")
    k.add_argument("--artifact", default=None, help="artifact JSON (default: the shipped artifact)")
    from .cli import _add_corpus_arguments

    _add_corpus_arguments(k)
    k.add_argument(
        "--shard-tokens",
        type=int,
        default=100_000_000,
        help="close a shard at this many tokens (default: 1e8)",
    )
    k.add_argument(
        "--format", choices=("plain", "megatron"), default="plain", help="also write Megatron .idx"
    )
    k.add_argument("--keep-empty", action="store_true", help="keep empty documents as <|bos|><|eos|>")
    k.add_argument(
        "--verify", default="0.01", help="fraction re-encoded by the reference, or 'all' (default: 0.01)"
    )
    k.add_argument("--engine", choices=("local", "ray"), default="local", help="process pool or Ray Data")
    k.add_argument(
        "--workers",
        type=int,
        default=0,
        help="encoders (default: one per core; Ray: one per cluster CPU, less one)",
    )
    k.add_argument("--address", default=None, help="Ray cluster address (default: start a local Ray)")
    k.add_argument(
        "--check",
        action="store_true",
        help="stacktok pack --check DIR: re-hash every shard, re-encode a sample",
    )
    k.add_argument("--quiet", action="store_true", help="no progress bar")
    k.set_defaults(func=cmd_pack)


def cmd_pack(args: argparse.Namespace) -> int:
    from .cli import UsageError, _corpus_options, _inputs, _sigterm_as_exit
    from .corpus import CorpusError

    try:
        from .pack import EngineError, PackError, PackMismatch, PackOptions, check_pack, pack
    except ImportError as exc:
        raise UsageError(f"stacktok pack needs {exc.name}: pip install 'stacktok[pack]'") from None

    try:
        if args.check:
            dirs = [*args.inputs, *([args.out] if args.out else [])]
            if len(dirs) != 1:
                raise UsageError("--check takes one pack directory: stacktok pack --check DIR")
            return _report_check(
                check_pack(dirs[0], artifact=args.artifact, rate=_rate(args.verify)), dirs[0]
            )
        if not args.out:
            raise UsageError("--out DIR is required: the directory to write the shards into")
        options = PackOptions(
            corpus=_corpus_options(args),
            shard_tokens=args.shard_tokens,
            fmt=args.format,
            keep_empty=args.keep_empty,
            verify=_rate(args.verify),
            artifact=args.artifact,
            engine=args.engine,
            workers=args.workers,
            address=args.address,
            quiet=args.quiet,
        )
        with _sigterm_as_exit():
            manifest = pack(_inputs(args.inputs), args.out, options=options)
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
    from .cli import UsageError

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
