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
    if args.workers is not None and args.workers < 1:
        raise UsageError(f"--workers must be at least 1, got {args.workers}")
    _check_out_file(Path(args.out), flag="--out")
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


def _check_out_file(path: Path, *, flag: str) -> None:
    """An output file path must not be a directory and its parent must exist."""
    if path.is_dir():
        raise UsageError(f"{flag} {path} is a directory; give a file path such as {path / 'out.json'}")
    if not path.parent.is_dir():
        raise UsageError(f"{flag} {path}: directory {path.parent} does not exist; create it first")


def _strict_utf8(data: bytes, *, where: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        bad = data[exc.start : exc.start + 1].hex()
        raise UsageError(
            f"{where} is not valid UTF-8: byte 0x{bad} at offset {exc.start} ({exc.reason}); "
            "convert the text to UTF-8 first"
        ) from None


def _text_argument(text: str) -> str:
    """Command-line text: undecodable bytes arrive as surrogate escapes; name the byte."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raw = text.encode("utf-8", "surrogateescape")
        return _strict_utf8(raw, where=f"the text argument (character {exc.start})")
    return text


def cmd_encode(args: argparse.Namespace) -> int:
    tok = _load(args.artifact)
    if args.text is not None:
        text = _text_argument(args.text)
    else:
        text = _strict_utf8(sys.stdin.buffer.read(), where="standard input")
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


def add_commands(sub: argparse._SubParsersAction) -> None:
    """Register train, info, encode, decode and export on ``sub`` (the ``stacktok`` CLI's subparsers)."""
    t = sub.add_parser("train", help="train a tokenizer artifact from text files")
    t.add_argument("inputs", nargs="+", help="files, globs, or - for stdin (UTF-8)")
    t.add_argument("--vocab-size", type=int, default=VOCAB_SIZE, help=f"ids in all (default {VOCAB_SIZE})")
    t.add_argument("--out", required=True, help="artifact path to write (JSON)")
    t.add_argument("--max-bytes", type=int, default=None, help="stop reading after B bytes (default: all)")
    t.add_argument("--workers", type=int, default=None, help="processes for pre-tokenizing (default: cores)")
    t.add_argument("--quiet", action="store_true", help="no progress bar")
    t.set_defaults(func=cmd_train)

    i = sub.add_parser("info", help="show an artifact's vocabulary, specials and fingerprint")
    i.add_argument("artifact", nargs="?", default=None, help="default: the shipped artifact")
    i.add_argument("--json", action="store_true", help="print JSON instead of a table")
    i.set_defaults(func=cmd_info)

    e = sub.add_parser("encode", help="encode text (argument or stdin, UTF-8) to ids")
    e.add_argument("text", nargs="?", default=None)
    e.add_argument("--artifact", default=None, help="default: the shipped artifact")
    e.add_argument("--allow-special", action="store_true", help="trusted text: parse specials")
    e.add_argument("--json", action="store_true", help="print a JSON list")
    e.set_defaults(func=cmd_encode)

    d = sub.add_parser("decode", help="decode ids (arguments or stdin) to bytes")
    d.add_argument("ids", nargs="*")
    d.add_argument("--artifact", default=None, help="default: the shipped artifact")
    d.add_argument("--no-newline", action="store_true", help="no trailing newline")
    d.set_defaults(func=cmd_decode)

    x = sub.add_parser("export", help="write tiktoken / HF / GGUF exports of an artifact")
    x.add_argument("--artifact", default=None, help="default: tokenizer/stack100m-32768.json")
    x.add_argument("--out", default="tokenizer", help="output directory (default: tokenizer/)")
    x.add_argument("--check", action="store_true", help="verify committed exports; write nothing")
    x.set_defaults(func=cmd_export)


def build_parser() -> argparse.ArgumentParser:
    """The tokenizer commands alone (``python -m stacktok_export.cli``); ``stacktok`` adds the suite's."""
    p = _Parser(prog="stacktok", description=__doc__.splitlines()[0])
    add_commands(p.add_subparsers(dest="command", required=True, parser_class=_Parser))
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except (UsageError, ArtifactError) as exc:
        print(f"stacktok: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
