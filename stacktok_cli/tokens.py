"""``stacktok info``, ``encode`` and ``decode``: look at an artifact and turn text into ids and back.

- ``info [PATH] [--json]``: name, vocabulary, id layout, specials (training-shortfall fillers
  summarised as one line per run), pattern, engine and fingerprint; PATH may also be a Hugging
  Face directory, a GGUF or a ``.tiktoken`` file (``stacktok_cli.describe``).
- ``encode [TEXT]``: text from the argument or standard input, strict UTF-8 (an undecodable
  byte is named with its offset); specials are plain text unless ``--allow-special``.
- ``decode [IDS...]``: ids separated by spaces or commas (a JSON list works) to exact bytes.

Out of scope: the tokenizer itself (``stacktok_export.models.bpe.bpe``).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

from conformance.core.errors import UsageError
from stacktok_cli.args import add_artifact_flag, artifact_path
from stacktok_cli.describe import describe, describe_lines
from stacktok_export.artifact.artifact import FORMAT as V1_FORMAT
from stacktok_export.models.bpe.bpe import StackTokenizer, load_tokenizer

INFO_HELP = "show the vocabulary, specials and fingerprint of an artifact, HF directory, GGUF or .tiktoken"
ENCODE_HELP = "encode text (argument or stdin, UTF-8) to ids"
DECODE_HELP = "decode ids (arguments or stdin) to bytes"


# ---------------------------------------------------------------------- info
def add_info_arguments(i: argparse.ArgumentParser) -> None:
    i.add_argument(
        "artifact",
        nargs="?",
        default=None,
        help="artifact JSON, Hugging Face directory, .gguf or .tiktoken (default: as for --artifact: "
        "tokenizer/stack100m-32768.json of the stacktok checkout, else the one shipped in the package)",
    )
    i.add_argument("--json", action="store_true", help="print JSON, every special listed (default: a table)")


def info_dict(tok: StackTokenizer) -> dict[str, object]:
    return {
        "name": tok.name,
        "vocab_size": tok.vocab_size,
        "merges": len(tok.merges),
        "bytes": 256,
        "special_tokens": dict(tok.special_to_id),
        "pattern": tok.pattern,
        "patterns": list(tok.patterns),
        "format": tok.format,
        "roles": dict(tok.roles),
        "add_bos": tok.add_bos,
        "add_eos": tok.add_eos,
        "chat_template": tok.chat_template is not None,
        "engine": tok.engine,
        "fingerprint": tok.fingerprint,
    }


def info(args: argparse.Namespace) -> int:
    other = describe(Path(args.artifact)) if args.artifact else None
    if other is not None:
        text = json.dumps(other, indent=2, sort_keys=True, ensure_ascii=True) if args.json else None
        print(text or "\n".join(describe_lines(other)))
        return 0
    path = artifact_path(args.artifact)
    tok = load_tokenizer(path)
    if args.json:
        print(json.dumps(info_dict(tok), indent=2, sort_keys=True, ensure_ascii=True))
        return 0
    print(f"artifact     {path}")
    print(f"name         {tok.name}")
    print(f"vocab_size   {tok.vocab_size:,}")
    print(f"format       {tok.format}")
    if tok.format == V1_FORMAT:
        print(f"ids          0-255 bytes, 256-{255 + len(tok.merges)} merges ({len(tok.merges):,})")
    else:
        print(f"ids          0-{tok.vocab_size - 1} ({len(tok.merges):,} merges)")
    print("specials")
    for line in special_lines(tok.special_to_id):
        print(line)
    for pattern in tok.patterns:
        print(f"pattern      {pattern}")
    roles = ", ".join(f"{role}={i}" for role, i in sorted(tok.roles.items()))
    print(f"roles        {roles or 'none'}; adds BOS {tok.add_bos}, EOS {tok.add_eos}")
    template = (
        "the source's (stored)"
        if tok.chat_template is not None
        else "none stored (ChatML, stacktok_export.chat)"
    )
    print(f"template     {template}")
    engine = tok.engine or {}
    print(
        f"engine       {engine.get('name', '?')} {engine.get('version', '?')} "
        f"(Unicode {engine.get('unicode_version', '?')})"
    )
    print(f"fingerprint  {tok.fingerprint}")
    return 0


_FILLER = re.compile(r"<\|unused_(\d+)\|>")


def special_lines(special_to_id: dict[str, int]) -> list[str]:
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


# -------------------------------------------------------------------- encode
def add_encode_arguments(e: argparse.ArgumentParser) -> None:
    e.add_argument("text", nargs="?", default=None, help="text to encode (default: read standard input)")
    add_artifact_flag(e)
    e.add_argument(
        "--allow-special",
        action="store_true",
        help="trusted text: parse specials (default: off, specials are plain text)",
    )
    e.add_argument("--json", action="store_true", help="print a JSON list (default: ids separated by spaces)")


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


def encode(args: argparse.Namespace) -> int:
    tok = load_tokenizer(artifact_path(args.artifact))
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


# -------------------------------------------------------------------- decode
def add_decode_arguments(d: argparse.ArgumentParser) -> None:
    d.add_argument("ids", nargs="*", help="token ids (default: read them from standard input)")
    add_artifact_flag(d)
    d.add_argument("--no-newline", action="store_true", help="no trailing newline (default: add one)")


def decode(args: argparse.Namespace) -> int:
    tok = load_tokenizer(artifact_path(args.artifact))
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
