"""The ``stacktok`` command line: train, pack, info, encode, decode, export (``stacktok_cli`` adds the suite).

Exit codes: 0 success, 1 a check failed (``export --check`` found stale files,
a pack's fast encoder differed from the reference), 2 usage error or
unreadable input -- always with a one-line reason.

Out of scope here: the logic itself; every subcommand is a thin wrapper over
the package API.
"""

from __future__ import annotations

import argparse
import json
import re
import signal
import sys
import threading
import time
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from .artifact import MAX_VOCAB, ArtifactError
from .bpe import SPECIAL_TOKENS, VOCAB_SIZE, StackTokenizer, load_tokenizer, shipped_artifact_path
from .cli_pack import add_pack
from .corpus import CorpusError, CorpusOptions, expand_inputs, training_texts


class UsageError(Exception):
    """Bad arguments or unreadable input: exit 2 with this message."""


def _inputs(items: Sequence[str]) -> list[str]:
    try:
        return expand_inputs(items)
    except CorpusError as exc:
        raise UsageError(str(exc)) from None


def _corpus_options(args: argparse.Namespace) -> CorpusOptions:
    try:
        return CorpusOptions(
            text_docs=args.text_docs, field=args.field, column=args.column, errors=args.errors
        )
    except CorpusError as exc:
        raise UsageError(str(exc)) from None


# ------------------------------------------------------------------ commands
def cmd_train(args: argparse.Namespace) -> int:
    if not 256 + len(SPECIAL_TOKENS) <= args.vocab_size <= MAX_VOCAB:
        raise UsageError(
            f"--vocab-size must be at least {256 + len(SPECIAL_TOKENS)} and at most {MAX_VOCAB} "
            "(ids are 16-bit)"
        )
    if args.workers is not None and args.workers < 1:
        raise UsageError(f"--workers must be at least 1, got {args.workers}")
    _check_out_file(Path(args.out), flag="--out")
    paths = _inputs(args.inputs)
    from .trainer import ProgressBar

    tok = StackTokenizer(name=Path(args.out).stem)
    start = time.perf_counter()
    texts = training_texts(paths, options=_corpus_options(args), max_bytes=args.max_bytes)
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
    for line in _special_lines(tok.special_to_id):
        print(line)
    print(f"pattern      {tok.pattern}")
    engine = tok.engine or {}
    print(
        f"engine       {engine.get('name', '?')} {engine.get('version', '?')} "
        f"(Unicode {engine.get('unicode_version', '?')})"
    )
    print(f"fingerprint  {tok.fingerprint}")
    return 0


_FILLER = re.compile(r"<\|unused_(\d+)\|>")


def _special_lines(special_to_id: dict[str, int]) -> list[str]:
    """One line per special token, except ``<|unused_N|>`` fillers: one line per contiguous run.

    A training shortfall can add thousands of fillers; ``--json`` still lists each one.
    """
    lines: list[str] = []
    run: list[tuple[int, int]] = []  # (N of <|unused_N|>, id), both consecutive

    def flush() -> None:
        if len(run) == 1:
            lines.append(f"  {run[0][1]:>6}  <|unused_{run[0][0]}|>  (training shortfall filler)")
        elif run:
            (n0, lo), (n1, hi) = run[0], run[-1]
            span = f"<|unused_{n0}|>..<|unused_{n1}|>"
            lines.append(f"  {len(run):,} fillers {span} at ids {lo}-{hi} (training shortfall)")
        run.clear()

    for text, token_id in sorted(special_to_id.items(), key=lambda kv: kv[1]):
        m = _FILLER.fullmatch(text)
        if m is None:
            flush()
            lines.append(f"  {token_id:>6}  {text}")
            continue
        n = int(m[1])
        if run and (n, token_id) != (run[-1][0] + 1, run[-1][1] + 1):
            flush()
        run.append((n, token_id))
    flush()
    return lines


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

    artifact, out = _export_paths(args.artifact, args.out, check=args.check)
    if args.check:
        print(f"using artifact {artifact}, exports in {out}")
        problems = check_exports(artifact, out)
        for p in problems:
            print(f"stale: {p}")
        if problems:
            print(f"run `stacktok export --artifact {artifact} --out {out}` and commit the result")
            return 1
        print(f"exports in {out} are exactly what {artifact} produces")
        return 0
    with _sigterm_as_exit():  # so a `kill` runs the temp-file clean-up too
        print(f"using artifact {artifact}, exports in {out}")
        written = export_all(artifact, out)
    for path in written:
        print(f"wrote {path}")
    return 0


@contextmanager
def _sigterm_as_exit() -> Iterator[None]:
    """Turn SIGTERM into ``SystemExit(143)`` so ``finally`` blocks run (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def _exit(signum: int, frame: object) -> None:
        print("stacktok: terminated", file=sys.stderr)
        raise SystemExit(128 + signum)

    previous = signal.signal(signal.SIGTERM, _exit)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


ARTIFACT_NAME = "stack100m-32768.json"
EXPORT_DIR = "tokenizer"


def project_root() -> Path | None:
    """The stacktok checkout this package runs from (its ``pyproject.toml`` says ``name = "stacktok"``).

    ``None`` for an installed package (site-packages has no such file beside it).
    """
    root = Path(__file__).resolve().parents[1]
    try:
        text = (root / "pyproject.toml").read_text(encoding="utf-8")
    except OSError:
        return None
    return root if re.search(r'(?m)^name\s*=\s*"stacktok"\s*$', text) else None


def _default_artifact() -> Path:
    root = project_root()
    local = root / EXPORT_DIR / ARTIFACT_NAME if root else None
    return local if local is not None and local.is_file() else shipped_artifact_path()


def _default_out(*, check: bool) -> Path:
    """The checkout's ``tokenizer/``; else ``./tokenizer`` (which ``--check`` needs to exist)."""
    root = project_root()
    if root is not None:
        return root / EXPORT_DIR
    here = Path(EXPORT_DIR)
    if check and not here.is_dir():
        raise UsageError(
            f"no export directory: not in a stacktok checkout and no ./{EXPORT_DIR}/ here; "
            "pass --out DIR (the directory holding the exports)"
        )
    return here


def _export_paths(artifact: str | None, out: str | None, *, check: bool) -> tuple[Path, Path]:
    """``--artifact`` / ``--out``, defaults resolved against the checkout, not the working directory."""
    artifact_path = Path(artifact) if artifact else _default_artifact()
    if not artifact_path.is_file():
        raise UsageError(f"--artifact {artifact_path}: no such file")
    out_path = Path(out) if out else _default_out(check=check)
    if check and not out_path.is_dir():
        raise UsageError(f"--out {out_path}: no such directory; run `stacktok export --out {out_path}` first")
    return artifact_path, out_path


# -------------------------------------------------------------------- parser
class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"stacktok: error: {message} (see `{self.prog} --help`)\n")


def add_commands(sub: argparse._SubParsersAction) -> None:
    """Register train, info, encode, decode and export on ``sub`` (the ``stacktok`` CLI's subparsers)."""
    t = sub.add_parser("train", help="train a tokenizer artifact from text files")
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
    _add_corpus_arguments(t)
    t.set_defaults(func=cmd_train)
    add_pack(sub)

    i = sub.add_parser("info", help="show an artifact's vocabulary, specials and fingerprint")
    i.add_argument("artifact", nargs="?", default=None, help="artifact JSON (default: the shipped artifact)")
    i.add_argument("--json", action="store_true", help="print JSON, every special listed (default: a table)")
    i.set_defaults(func=cmd_info)

    e = sub.add_parser("encode", help="encode text (argument or stdin, UTF-8) to ids")
    e.add_argument("text", nargs="?", default=None, help="text to encode (default: read standard input)")
    e.add_argument("--artifact", default=None, help="artifact JSON (default: the shipped artifact)")
    e.add_argument(
        "--allow-special",
        action="store_true",
        help="trusted text: parse specials (default: off, specials are plain text)",
    )
    e.add_argument("--json", action="store_true", help="print a JSON list (default: ids separated by spaces)")
    e.set_defaults(func=cmd_encode)

    d = sub.add_parser("decode", help="decode ids (arguments or stdin) to bytes")
    d.add_argument("ids", nargs="*", help="token ids (default: read them from standard input)")
    d.add_argument("--artifact", default=None, help="artifact JSON (default: the shipped artifact)")
    d.add_argument("--no-newline", action="store_true", help="no trailing newline (default: add one)")
    d.set_defaults(func=cmd_decode)

    from .cli_retokenize import add_retokenize  # a model GGUF with our tokenizer (issue 15)

    add_retokenize(sub)

    x = sub.add_parser("export", help="write tiktoken / HF / GGUF exports of an artifact")
    x.add_argument(
        "--artifact",
        default=None,
        help=f"artifact to export (default: {EXPORT_DIR}/{ARTIFACT_NAME} of the stacktok checkout, "
        "else the shipped artifact)",
    )
    x.add_argument(
        "--out",
        default=None,
        help=f"output directory (default: {EXPORT_DIR}/ of the stacktok checkout, else ./{EXPORT_DIR}/)",
    )
    x.add_argument(
        "--check", action="store_true", help="verify the exports on disk; write nothing (default: off)"
    )
    x.set_defaults(func=cmd_export)


def _add_corpus_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--field", default="text", help="JSON Lines: the document field (default: text)")
    p.add_argument("--column", default="text", help="Parquet: the document column (default: text)")
    p.add_argument(
        "--text-docs",
        choices=("file", "paragraph", "line"),
        default="file",
        help="text files: one document per file, per blank-line-separated paragraph, or per line "
        "(default: file)",
    )
    p.add_argument(
        "--errors",
        choices=("strict", "replace", "skip"),
        default="strict",
        help="invalid UTF-8: stop naming file and byte, U+FFFD, or drop the document (default: strict)",
    )


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
