"""The ``stacktok`` command line: train, info, encode, decode, export, gate.

Exit codes: 0 success, 1 a check failed (e.g. ``export --check`` found stale
files), 2 usage error or unreadable input -- always with a one-line reason.

Out of scope here: the logic itself; every subcommand is a thin wrapper over
the package API.
"""

from __future__ import annotations

import argparse
import glob
import json
import sys
import time
import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path

from .artifact import ArtifactError
from .bpe import SPECIAL_TOKENS, VOCAB_SIZE, StackTokenizer, load_tokenizer, shipped_artifact_path

_READ_CHUNK = 8 << 20


class UsageError(Exception):
    """Bad arguments or unreadable input: exit 2 with this message."""


# ------------------------------------------------------------------- inputs
def _expand_inputs(inputs: Sequence[str]) -> list[str]:
    paths: list[str] = []
    for item in inputs:
        if item == "-":
            paths.append("-")
            continue
        matches = sorted(glob.glob(item, recursive=True))
        if not matches and not any(ch in item for ch in "*?["):
            matches = [item]
        files = [m for m in matches if Path(m).is_file()]
        if not files:
            raise UsageError(f"input {item!r} matches no readable file; check the path or glob")
        paths.extend(files)
    return paths


def _safe_cut(text: str) -> int:
    """Index just after the last newline that is followed by a letter, or -1.

    Under the Llama-3 pattern a newline never joins a following letter, so a
    cut there splits no pre-token: streaming in blocks trains exactly as if
    the file had been read whole.
    """
    end = len(text)
    while (i := text.rfind("\n", 0, end)) >= 0:
        if i + 1 < len(text) and text[i + 1].isalpha():
            return i + 1
        end = i
    return -1


def _read_blocks(path: str) -> Iterator[str]:
    """Blocks of about 8 MiB, cut only at pre-token boundaries (see ``_safe_cut``)."""
    carry = ""
    for block in _raw_blocks(path):
        text = carry + block
        cut = _safe_cut(text)
        if cut <= 0:
            carry = text
            continue
        carry = text[cut:]
        yield text[:cut]
    if carry:
        yield carry


def _raw_blocks(path: str) -> Iterator[str]:
    if path == "-":
        while block := sys.stdin.read(_READ_CHUNK):
            yield block
        return
    try:
        with open(path, encoding="utf-8") as f:
            while block := f.read(_READ_CHUNK):
                yield block
    except UnicodeDecodeError as exc:
        raise UsageError(f"{path} is not valid UTF-8 ({exc.reason} at byte {exc.start})") from None
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror}") from None


def stream_sample(paths: Sequence[str], *, max_bytes: int | None = None) -> Iterator[str]:
    """Yield text blocks from ``paths`` in order, stopping at exactly ``max_bytes``.

    The last block is cut at the budget, backed off to the last space so no
    word is split, and a split UTF-8 sequence is dropped rather than replaced.
    """
    total = 0
    for path in paths:
        for block in _read_blocks(path):
            raw = block.encode("utf-8")
            if max_bytes is None or total + len(raw) <= max_bytes:
                total += len(raw)
                yield block
                continue
            keep = raw[: max_bytes - total]
            cut = keep.rfind(b" ")
            if cut > 0:
                keep = keep[:cut]
            yield keep.decode("utf-8", errors="ignore")
            return


# ------------------------------------------------------------------ commands
def cmd_train(args: argparse.Namespace) -> int:
    if args.vocab_size < 256 + len(SPECIAL_TOKENS):
        raise UsageError(f"--vocab-size must be at least {256 + len(SPECIAL_TOKENS)}")
    paths = _expand_inputs(args.inputs)
    from .trainer import ProgressBar

    tok = StackTokenizer(name=Path(args.out).stem)
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        shortfall = tok.train_from_iterable(
            stream_sample(paths, max_bytes=args.max_bytes),
            vocab_size=args.vocab_size,
            workers=args.workers,
            progress=None if args.quiet else ProgressBar(),
        )
    tok.save(args.out)
    took = time.perf_counter() - start
    print(
        f"wrote {args.out}: vocab {tok.vocab_size}, {len(tok.merges)} merges, "
        f"shortfall {shortfall}, {took:.1f}s, fingerprint {tok.fingerprint[:16]}"
    )
    if shortfall:
        print(f"warning: shortfall {shortfall}: padded with <|unused_N|>; train on more text")
    return 0


def _load(path: str | None) -> StackTokenizer:
    return load_tokenizer(path)


def info_dict(tok: StackTokenizer) -> dict[str, object]:
    return {
        "name": tok.name,
        "vocab_size": tok.vocab_size,
        "merges": len(tok.merges),
        "bytes": 256,
        "special_tokens": dict(tok.special_to_id),
        "pattern": tok.pattern,
        "engine": tok.engine,
        "fingerprint": tok.fingerprint,
    }


def cmd_info(args: argparse.Namespace) -> int:
    tok = _load(args.artifact)
    info = info_dict(tok)
    if args.json:
        print(json.dumps(info, indent=2, sort_keys=True, ensure_ascii=True))
        return 0
    print(f"artifact     {args.artifact or shipped_artifact_path()}")
    print(f"name         {tok.name}")
    print(f"vocab_size   {tok.vocab_size:,}")
    print(f"ids          0-255 bytes, 256-{255 + len(tok.merges)} merges ({len(tok.merges):,})")
    print("specials")
    for s, i in tok.special_to_id.items():
        print(f"  {i:>6}  {s}")
    print(f"pattern      {tok.pattern}")
    engine = tok.engine or {}
    print(
        f"engine       {engine.get('name', '?')} {engine.get('version', '?')} "
        f"(Unicode {engine.get('unicode_version', '?')})"
    )
    print(f"fingerprint  {tok.fingerprint}")
    return 0


def cmd_encode(args: argparse.Namespace) -> int:
    tok = _load(args.artifact)
    text = args.text if args.text is not None else sys.stdin.read()
    ids = tok.encode(text, allowed_special="all" if args.allow_special else frozenset())
    if args.json:
        print(json.dumps(ids))
    else:
        print(" ".join(map(str, ids)))
    return 0


def cmd_decode(args: argparse.Namespace) -> int:
    tok = _load(args.artifact)
    raw = " ".join(args.ids) if args.ids else sys.stdin.read()
    try:
        ids = [int(x) for x in raw.replace(",", " ").replace("[", " ").replace("]", " ").split()]
    except ValueError:
        raise UsageError("ids must be integers separated by spaces or commas") from None
    try:
        data = tok.decode_bytes(ids)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    sys.stdout.buffer.write(data + (b"" if args.no_newline else b"\n"))
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    from .export import check_exports, export_all

    artifact = Path(args.artifact) if args.artifact else _default_artifact()
    out = Path(args.out)
    if args.check:
        problems = check_exports(artifact, out)
        for p in problems:
            print(f"stale: {p}")
        if problems:
            print(f"run `stacktok export --artifact {artifact} --out {out}` and commit the result")
            return 1
        print(f"exports in {out} are exactly what {artifact} produces")
        return 0
    written = export_all(artifact, out)
    for path in written:
        print(f"wrote {path}")
    return 0


def _default_artifact() -> Path:
    local = Path("tokenizer") / "stack100m-32768.json"
    return local if local.is_file() else shipped_artifact_path()


# -------------------------------------------------------------------- parser
class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"stacktok: error: {message} (see `{self.prog} --help`)\n")


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="stacktok", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)

    t = sub.add_parser("train", help="train a tokenizer artifact from text files")
    t.add_argument("inputs", nargs="+", help="files, globs, or - for stdin (UTF-8)")
    t.add_argument("--vocab-size", type=int, default=VOCAB_SIZE)
    t.add_argument("--out", required=True, help="artifact path to write (JSON)")
    t.add_argument("--max-bytes", type=int, default=None, help="stop reading after B bytes")
    t.add_argument("--workers", type=int, default=None, help="processes for pre-tokenizing")
    t.add_argument("--quiet", action="store_true", help="no progress bar")
    t.set_defaults(func=cmd_train)

    i = sub.add_parser("info", help="show an artifact's vocabulary, specials and fingerprint")
    i.add_argument("artifact", nargs="?", default=None, help="default: the shipped artifact")
    i.add_argument("--json", action="store_true")
    i.set_defaults(func=cmd_info)

    e = sub.add_parser("encode", help="encode text (argument or stdin) to ids")
    e.add_argument("text", nargs="?", default=None)
    e.add_argument("--artifact", default=None)
    e.add_argument("--allow-special", action="store_true", help="trusted text: parse specials")
    e.add_argument("--json", action="store_true")
    e.set_defaults(func=cmd_encode)

    d = sub.add_parser("decode", help="decode ids (arguments or stdin) to bytes")
    d.add_argument("ids", nargs="*")
    d.add_argument("--artifact", default=None)
    d.add_argument("--no-newline", action="store_true")
    d.set_defaults(func=cmd_decode)

    x = sub.add_parser("export", help="write tiktoken / HF / GGUF exports of an artifact")
    x.add_argument("--artifact", default=None, help="default: tokenizer/stack100m-32768.json")
    x.add_argument("--out", default="tokenizer", help="output directory (default: tokenizer/)")
    x.add_argument("--check", action="store_true", help="verify committed exports; write nothing")
    x.set_defaults(func=cmd_export)

    for name, module, text in _SUITE_COMMANDS:
        _suite_command(sub, name, module, text)
    return p


# Commands implemented in the conformance package (shipped with stacktok),
# imported only when used so `stacktok info` stays light.
_SUITE_COMMANDS = (
    ("gate", "conformance.gate", "release gate: check a checkpoint/tokenizer directory"),
    ("fuzz", "conformance.fuzz", "differential fuzzing of a directory's exports, with shrinking"),
    ("audit", "conformance.audit", "audit a vocabulary: reachability, duplicates, Unicode tables"),
)


def _suite_command(sub, name: str, module: str, text: str) -> None:
    import importlib

    p = sub.add_parser(name, help=text)
    try:
        mod = importlib.import_module(module)
    except Exception as exc:  # a broken optional command must not break `stacktok info`
        p.set_defaults(func=lambda args, exc=exc: _missing_command(name, exc))
        return
    mod.add_arguments(p)
    p.set_defaults(func=mod.main)


def _missing_command(name: str, exc: Exception) -> int:
    raise UsageError(f"`stacktok {name}` is unavailable ({exc}); reinstall stacktok")


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except (UsageError, ArtifactError) as exc:
        print(f"stacktok: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("stacktok: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `stacktok info | head`
        sys.stderr.close()
        return 0


if __name__ == "__main__":
    sys.exit(main())
