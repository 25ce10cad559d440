"""Read a GGUF whose tokenizer is a byte-level BPE (``tokenizer.ggml.model = gpt2``).

Token types (gguf-py ``TokenType``) decide what each id is, as llama.cpp reads them:

- normal: a GPT-2 byte-level string, decoded to its bytes (one that is not such a string --
  Command-R has 1,403 -- can never come out of the byte-level split: kept as a special that
  no text reaches, so the id exists and is never produced);
- control, unknown, unused: specials, never matched in ordinary text;
- user-defined: specials the source matches even in ordinary text (``in_text``), stored as
  their plain text (convert_hf_to_gguf writes them decoded).

Merges are ``"left right"`` byte-level strings. ``tokenizer.ggml.pre`` names the split
(:mod:`stacktok_export.gguf.pretypes`); ``--pattern`` overrides it. BOS/EOS/EOT/pad
ids are the roles; ``add_bos`` is the pre type's default unless ``tokenizer.ggml.add_bos_token``
says otherwise (llama.cpp's order); the chat template is ``tokenizer.chat_template``.

The header is walked with every declared count and length checked against the file
(:mod:`stacktok_export.gguf.header`: a 2**40-element array in 200 bytes is refused naming its
key); each field this reader uses is checked for its GGUF type before use (a token list that is
an int array, an id that is a string: refused naming the key).

Out of scope: every other tokenizer model (llama = SentencePiece, bert = WordPiece, t5 =
Unigram, ...: refused), the tensors.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ..gguf.header import GGUFHeaderError
from ..gguf.kv import GGUFFormatError, read_kv
from ..gguf.pretypes import pre_type
from ..split.bytelevel import from_chars
from .common import ImportRefused, merge_ids, vocabulary

_NORMAL, _UNKNOWN, _CONTROL, _USER, _UNUSED, _BYTE = 1, 2, 3, 4, 5, 6
_MODELS = {
    "llama": "SentencePiece",
    "t5": "Unigram",
    "bert": "WordPiece",
    "rwkv": "RWKV",
    "plamo2": "PLaMo-2",
}
_ROLE_KEYS = {"bos": "bos_token_id", "eos": "eos_token_id", "eot": "eot_token_id", "pad": "padding_token_id"}
_KEY = "tokenizer.ggml."
#: flags llama.cpp honours that change the text or add tokens the reference cannot express
_TEXT_FLAGS = {
    "add_space_prefix": "true: llama.cpp puts a space before the text (a normalizer); none imports",
    "add_sep_token": "true: llama.cpp appends a separator token; not representable",
}


def _text(path: Path, kv: dict[str, Any], key: str, default: str | None = None) -> str | None:
    value = kv.get(key)
    if not isinstance(value, bytes):
        return default
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ImportRefused(path, key, f"is not UTF-8 (byte {exc.start})") from None


def _strings(path: Path, kv: dict[str, Any], key: str) -> list[bytes]:
    """An array of strings (``[]`` when absent); anything else is refused naming the key."""
    value = kv.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, bytes) for v in value):
        raise ImportRefused(path, key, "is not an array of strings; rebuild the GGUF (convert_hf_to_gguf.py)")
    return value


def _int(path: Path, kv: dict[str, Any], key: str) -> int:
    value = kv[key]
    if type(value) is not int:  # struct gives int for every integer type, float/bool otherwise
        raise ImportRefused(path, key, f"is {type(value).__name__}, not an integer id")
    return value


def _flag(path: Path, kv: dict[str, Any], key: str, default: bool) -> bool:
    value = kv.get(key, default)
    if type(value) not in (bool, int):
        raise ImportRefused(path, key, f"is {type(value).__name__}, not a boolean")
    return bool(value)


def _model(path: Path, kv: dict[str, Any]) -> None:
    model = _text(path, kv, _KEY + "model")
    if model is None:
        raise ImportRefused(path, _KEY + "model", "missing: this GGUF carries no tokenizer")
    if model != "gpt2":
        kind = _MODELS.get(model, "not a byte-level BPE")
        raise ImportRefused(path, _KEY + "model", f"{model!r} ({kind}); only 'gpt2' (byte-level BPE) imports")


def _tokens(path: Path, kv: dict[str, Any]) -> tuple[list[bytes], dict[str, int], set[str], dict[str, int]]:
    """(bytes per id, specials, in_text specials, byte-level string -> id of plain tokens)."""
    texts = [t.decode("utf-8", errors="surrogateescape") for t in _strings(path, kv, _KEY + "tokens")]
    types = kv.get(_KEY + "token_type")
    if not texts:
        raise ImportRefused(path, _KEY + "tokens", "missing or empty")
    if types is not None and not (hasattr(types, "dtype") and types.dtype.kind in "iu"):
        raise ImportRefused(path, _KEY + "token_type", "is not an array of integers")
    kinds = [_NORMAL] * len(texts) if types is None else types.tolist()
    if len(kinds) != len(texts):
        raise ImportRefused(path, _KEY + "token_type", f"{len(kinds)} types for {len(texts)} tokens")
    table: list[bytes] = []
    specials: dict[str, int] = {}
    in_text: set[str] = set()
    plain: dict[str, int] = {}
    for i, (text, kind) in enumerate(zip(texts, kinds)):
        if kind in (_NORMAL, _BYTE):
            try:
                table.append(from_chars(text))
                plain[text] = i
                continue
            except KeyError:
                pass  # not a byte-level string: an id no text reaches (see the module docstring)
        if text in specials:
            raise ImportRefused(path, f"{_KEY}tokens[{i}]", f"{text!r} is also token {specials[text]}")
        specials[text] = i
        if kind == _USER:
            in_text.add(text)
        table.append(text.encode("utf-8", errors="surrogateescape"))
    return table, specials, in_text, plain


def read_gguf(
    path: str | os.PathLike[str], *, pattern: str | None = None, name: str | None = None
) -> dict[str, Any]:
    """The ``from_vocab`` keywords of a byte-level BPE GGUF (``ImportRefused`` otherwise)."""
    path = Path(path)
    try:
        kv = read_kv(path)
    except GGUFHeaderError as exc:
        raise ImportRefused(path, exc.where, f"{exc.what}; {exc.fix}") from None
    except (OSError, GGUFFormatError) as exc:
        raise ImportRefused(path, "GGUF header", str(exc)) from None
    _model(path, kv)
    for flag, why in _TEXT_FLAGS.items():
        if _flag(path, kv, _KEY + flag, False):
            raise ImportRefused(path, _KEY + flag, why)
    pre = _text(path, kv, _KEY + "pre", "default")
    pt = pre_type(pre)
    if pt is None and pattern is None:
        raise ImportRefused(
            path, _KEY + "pre", f"pre type {pre!r} has no regex here; pass --pattern REGEX (its split)"
        )
    table, specials, in_text, plain = _tokens(path, kv)
    merges = [m.decode("utf-8", errors="surrogateescape") for m in _strings(path, kv, _KEY + "merges")]
    roles = {r: _int(path, kv, _KEY + k) for r, k in _ROLE_KEYS.items() if _KEY + k in kv}
    add_bos = _flag(path, kv, _KEY + "add_bos_token", pt.add_bos if pt else False)
    return vocabulary(
        tokens=table,
        merges=merge_ids(path, merges, plain),
        specials=specials,
        patterns=[pattern] if pattern is not None else pt.patterns,  # type: ignore[union-attr]
        ignore_merges=pt.ignore_merges if pt else False,
        roles=roles,
        add_bos=add_bos,
        add_eos=_flag(path, kv, _KEY + "add_eos_token", False),
        chat_template=_text(path, kv, "tokenizer.chat_template"),
        in_text=in_text,
        name=name or _text(path, kv, "general.name") or path.stem,
    )
