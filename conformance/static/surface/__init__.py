"""The whole vocabulary surface, id by id: every token any file defines or implies vs the artifact.

The artifact's id layout is the truth: ids ``0 .. 256+M-1`` are ordinary tokens
(their bytes from :meth:`StackTokenizer.token_bytes`), the top ids are the
specials (``special_to_id``). One row per file, always emitted:

- ``surface.tokenizer_json``: ``model.vocab`` (GPT-2 byte-level strings) is the
  artifact's id -> bytes for every ordinary id and nothing else; ``added_tokens``
  hold each special at its id with its exact content and nothing else (an added
  ``<think>`` at 32768, or a second token at an existing id, fails).
- ``surface.tokenizer_config`` / ``surface.special_tokens_map``:
  every ``added_tokens_decoder`` entry (when present; transformers 5.x
  re-saves drop it) is the artifact's special at that id; every named ``*_token`` value and
  every ``additional_special_tokens`` / ``extra_special_tokens`` entry (list,
  or the name -> token object transformers 5.x writes) is an artifact special.
- ``surface.gguf_tokens``: ``tokenizer.ggml.tokens`` and ``token_type`` id by
  id (byte-level strings / NORMAL for ordinary ids, the special's text /
  CONTROL for specials), count included.
- ``surface.gguf_keys``: every ``tokenizer.ggml.*`` key is one ``stacktok
  export`` writes (others change what llama.cpp does: an ``eom_token_id`` adds
  an end-of-generation token, ``add_space_prefix`` strips or adds spaces), and every
  id-valued key points at an id the artifact defines.
- ``surface.tiktoken``: the ``.tiktoken`` file's rank -> bytes is the
  artifact's ordinary id -> bytes, rank by rank.

A row is ``skip`` when its file is absent and ``missing`` when the ``gguf``
package is not installed; a file of an unexpected shape is a ``fail`` row,
never an exception. Messages name the file, the first differing ids/keys and
the total count.

Out of scope: added-token flags (``special``, ``normalized``, ...), merges,
pre-tokenizer and the special ids' roles (bos/eos/pad) -- ``gate_checks``
checks those; behaviour (ids for text) is the conformance runner's job; GGUF
keys outside ``tokenizer.ggml.*``.
"""

from __future__ import annotations

import base64
import functools
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from stacktok_export import StackTokenizer
from stacktok_export.export.bytelevel import from_chars, to_chars
from stacktok_export.export.gguf_fmt import padding_tokens
from stacktok_export.export.gguf_model import embedding_rows

from conformance.core.layout import Exports, gguf_fields, gguf_tensors
from conformance.core.rows import FILES, Row, skip

T = TypeVar("T")
SHOWN = 5  # differences named in a message; the total is always given
REEXPORT = "re-export with `stacktok export`"
GGUF_INSTALL = "pip install 'stacktok[gguf]'"
GGUF_PREFIX = "tokenizer.ggml."
TOKEN_TYPE_NORMAL, TOKEN_TYPE_CONTROL = 1, 3
TOKEN_TYPE_NAMES = {1: "NORMAL", 2: "UNKNOWN", 3: "CONTROL", 4: "USER_DEFINED", 5: "UNUSED", 6: "BYTE"}
EXPORTED_GGUF_KEYS = frozenset(
    GGUF_PREFIX + k
    for k in (
        "model",
        "pre",
        "tokens",
        "token_type",
        "merges",
        "bos_token_id",
        "eos_token_id",
        "padding_token_id",
        "eot_token_id",
        "add_bos_token",
        "add_eos_token",
    )
)
_EOG = "llama.cpp adds that id to its end-of-generation set: generation stops there"
# What the llama.cpp vendored by llama-cpp-python 0.3.36 does with keys we never write (src/llama-vocab.cpp).
GGUF_KEY_EFFECTS = {
    "eom_token_id": _EOG,
    "fim_pad_token_id": _EOG,
    "fim_rep_token_id": _EOG,
    "fim_sep_token_id": _EOG,
    "fim_pre_token_id": "llama.cpp uses that id for fill-in-the-middle prompts",
    "fim_suf_token_id": "llama.cpp uses that id for fill-in-the-middle prompts",
    "fim_mid_token_id": "llama.cpp uses that id for fill-in-the-middle prompts",
    "prefix_token_id": "llama.cpp uses that id for fill-in-the-middle prompts",
    "suffix_token_id": "llama.cpp uses that id for fill-in-the-middle prompts",
    "middle_token_id": "llama.cpp uses that id for fill-in-the-middle prompts",
    "unknown_token_id": "llama.cpp substitutes that id for pieces missing from the vocabulary",
    "seperator_token_id": "llama.cpp appends that id to every input when add_sep_token is on",
    "sep_token_id": "not a key llama.cpp reads (it spells the separator key seperator_token_id)",
    "cls_token_id": "llama.cpp treats that id as BERT's classification token",
    "mask_token_id": "llama.cpp treats that id as the masked-LM token",
    "add_sep_token": "llama.cpp appends the separator token to every input tokenized with add_special",
    "add_space_prefix": "llama.cpp's detokenizer drops the first token's leading space, "
    "and SentencePiece-type vocabularies prepend a space to every input",
    "remove_extra_whitespaces": "llama.cpp collapses whitespace runs in SentencePiece-type inputs",
    "precompiled_charsmap": "llama.cpp normalizes every input through that map (UGM vocabularies)",
    "normalizer.lowercase": "llama.cpp lowercases every input (WordPiece vocabularies)",
    "normalizer.strip_accents": "llama.cpp strips accents from every input (WordPiece vocabularies)",
    "scores": "llama.cpp reads per-token scores (SentencePiece merge priorities)",
    "token_type_count": "llama.cpp reads a BERT-style segment type count",
    "suppress_tokens": "llama.cpp never samples those ids",
}


@dataclass(frozen=True)
class _Diff:
    text: str  # one difference, naming the id or key
    remove: str = ""  # what the file defines that the artifact does not (named in the fix)
    instead: str = ""  # the alternative to removing it


class _Expected:
    """The artifact's surface, computed once."""

    def __init__(self, ref: StackTokenizer) -> None:
        self.ordinary = list(ref.token_bytes())
        self.chars = [to_chars(b) for b in self.ordinary]
        self.specials = dict(ref.special_to_id)
        self.id_to_special = {i: s for s, i in self.specials.items()}
        self.vocab_size = ref.vocab_size
        top = range(len(self.ordinary), self.vocab_size)
        self.gguf_tokens = self.chars + [self.id_to_special.get(i, "") for i in top]
        self.gguf_types = [TOKEN_TYPE_NORMAL] * len(self.chars) + [TOKEN_TYPE_CONTROL] * len(top)

    def describe(self, token_id: int) -> str:
        """What the artifact has at ``token_id``."""
        if 0 <= token_id < len(self.ordinary):
            return f"{self.chars[token_id]!r} = {self.ordinary[token_id]!r}"
        if token_id in self.id_to_special:
            return f"special {self.id_to_special[token_id]!r}"
        return f"no id {token_id} (ids are 0..{self.vocab_size - 1})"

    def special_list(self) -> str:
        return ", ".join(self.specials)


# ---------------------------------------------------------------- shared helpers
def _short(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _show_chars(text: str) -> str:
    """A byte-level string and the bytes it stands for."""
    try:
        return f"{text!r} = {from_chars(text)!r}"
    except KeyError:
        return f"{text!r} (not a byte-level string)"


def _compare_ids(
    where: str,
    got: Mapping[int, list[T]],
    want: Mapping[int, T],
    *,
    show: Callable[[T], str],
    describe: Callable[[int], str],
    remove: str,
    partial: bool = False,
) -> list[_Diff]:
    """Id-by-id differences between ``got`` (id -> every value the file has there) and ``want``.

    ``where`` names the id space (``added_tokens id``, ``rank``); ``remove`` names what a value
    the artifact lacks is (``the added token``), for the fix; ``partial``: ids the file leaves
    out are not differences.
    """
    out: list[_Diff] = []
    for token_id in sorted(got.keys() | want.keys()):
        values = got.get(token_id, [])
        if (token_id in want and values == [want[token_id]]) or (partial and not values):
            continue
        found = " and ".join(show(v) for v in values) or "nothing"
        text = f"{where} {token_id}: file has {found}, artifact has {describe(token_id)}"
        extra = [v for v in values if token_id not in want or (v != want[token_id] and len(values) > 1)]
        what = f"{remove} {show(extra[0])} ({where} {token_id})" if extra else ""
        out.append(_Diff(text, remove=what))
    return out


def _verdict(check: str, name: str, diffs: list[_Diff], *, fix: str) -> Row:
    if not diffs:
        return Row(check, FILES, "pass", "ok")
    shown = "; ".join(d.text for d in diffs[:SHOWN])
    more = f"; ... ({len(diffs) - SHOWN} more)" if len(diffs) > SHOWN else ""
    message = f"{name}: {len(diffs)} difference(s) from the artifact: {shown}{more}"
    first = next((d for d in diffs if d.remove), None)
    if first is not None:
        instead = f" or {first.instead}" if first.instead else ""
        fix = (
            f"{REEXPORT}, or remove {first.remove} from {name}{instead}: "
            "the artifact does not define it, so the reference cannot certify it"
        )
    return Row(check, FILES, "fail", message, fix)


def _guarded(
    name: str, compare: Callable[[Any, _Expected], list[_Diff]], data: Any, exp: _Expected
) -> list[_Diff]:
    """``compare(data, exp)``; a value of a shape the comparison did not foresee is a difference."""
    try:
        return compare(data, exp)
    except (TypeError, ValueError, KeyError, AttributeError, IndexError, OverflowError) as exc:
        return [_Diff(f"{name} has an unexpected shape ({type(exc).__name__}: {exc})")]


# -------------------------------------------------------------- tokenizer.json
def _vocab_diffs(vocab: Any, exp: _Expected) -> list[_Diff]:
    if not isinstance(vocab, dict):
        return [_Diff(f"model.vocab is {_short(vocab)}, not a {{string: id}} object")]
    if vocab == dict(zip(exp.chars, range(len(exp.chars)))):
        return []
    out: list[_Diff] = []
    by_id: dict[int, list[str]] = {}
    for text, token_id in vocab.items():
        if not _is_int(token_id):
            out.append(_Diff(f"model.vocab[{text!r}] is {_short(token_id)}, not an integer id"))
            continue
        by_id.setdefault(token_id, []).append(text)
    want = dict(enumerate(exp.chars))
    out += _compare_ids(
        "model.vocab id", by_id, want, show=_show_chars, describe=exp.describe, remove="the vocab entry"
    )
    return out


def _added_token_diffs(added: Any, exp: _Expected) -> list[_Diff]:
    if added is None:
        added = []
    if not isinstance(added, list):
        return [_Diff(f"added_tokens is {_short(added)}, not a list")]
    out: list[_Diff] = []
    by_id: dict[int, list[str]] = {}
    for n, entry in enumerate(added):
        token_id = entry.get("id") if isinstance(entry, dict) else None
        content = entry.get("content") if isinstance(entry, dict) else None
        if not _is_int(token_id) or not isinstance(content, str):
            out.append(_Diff(f"added_tokens[{n}] is {_short(entry)}, not an {{id, content}} entry"))
            continue
        by_id.setdefault(token_id, []).append(content)
    out += _compare_ids(
        "added_tokens id",
        by_id,
        exp.id_to_special,
        show=repr,
        describe=exp.describe,
        remove="the added token",
    )
    return out


def _tokenizer_json_diffs(data: Any, exp: _Expected) -> list[_Diff]:
    if not isinstance(data, dict):
        return [_Diff(f"the top level is {_short(data)}, not an object")]
    model = data.get("model")
    if isinstance(model, dict):
        out = _vocab_diffs(model.get("vocab"), exp)
    else:
        out = [_Diff(f"model is {_short(model)}, not an object with a vocab")]
    return out + _added_token_diffs(data.get("added_tokens"), exp)


# ------------------------------------------- tokenizer_config / special_tokens_map
_NOT_A_TOKEN = object()


def _token_text(value: Any) -> Any:
    """A token's text from ``"<x>"`` or ``{"content": "<x>", ...}``; ``_NOT_A_TOKEN`` otherwise."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        return value.get("content")  # a dict without str content is a malformed token (None or odd)
    return _NOT_A_TOKEN


def _check_token(where: str, value: Any, exp: _Expected, *, hint: str = "") -> list[_Diff]:
    text = _token_text(value)
    if isinstance(text, str) and text in exp.specials:
        return []
    if not isinstance(text, str):
        return [_Diff(f"{where} is {_short(value)}, not a token string or {{content}}")]
    want = hint or f"no such special (its specials: {exp.special_list()})"
    instead = f"set it to {hint}" if hint else "use an artifact special"
    return [
        _Diff(
            f"{where}: file has {text!r}, artifact has {want}", remove=f"{where} = {text!r}", instead=instead
        )
    ]


def _named_hint(key: str, exp: _Expected) -> str:
    """``eos_token`` -> ``special '<|eos|>' (id 32760)`` when the artifact has that special."""
    guess = f"<|{key[: -len('_token')]}|>"
    return f"special {guess!r} (id {exp.specials[guess]})" if guess in exp.specials else ""


def _named_diffs(cfg: dict[str, Any], exp: _Expected) -> list[_Diff]:
    out: list[_Diff] = []
    for key, value in cfg.items():
        if isinstance(key, str) and key.endswith("_token") and _token_text(value) is not _NOT_A_TOKEN:
            out += _check_token(key, value, exp, hint=_named_hint(key, exp))
    return out


def _list_diffs(key: str, value: Any, exp: _Expected) -> list[_Diff]:
    if isinstance(value, dict):
        items = [(f"{key}.{name}", v) for name, v in value.items()]
    elif isinstance(value, list):
        items = [(f"{key}[{n}]", v) for n, v in enumerate(value)]
    else:
        return [_Diff(f"{key} is {_short(value)}, not a list or {{name: token}} object")]
    return [d for where, v in items for d in _check_token(where, v, exp)]


def _decoder_diffs(decoder: Any, exp: _Expected) -> list[_Diff]:
    if not isinstance(decoder, dict):
        return [_Diff(f"added_tokens_decoder is {_short(decoder)}, not an {{id: token}} object")]
    out: list[_Diff] = []
    by_id: dict[int, list[str]] = {}
    for key, value in decoder.items():
        text = _token_text(value)
        if not (isinstance(key, str) and key.isascii() and key.isdigit()) or not isinstance(text, str):
            out.append(_Diff(f"added_tokens_decoder[{key!r}] is {_short(value)}, not an id -> {{content}}"))
            continue
        by_id.setdefault(int(key), []).append(text)
    out += _compare_ids(
        "added_tokens_decoder id",
        by_id,
        exp.id_to_special,
        show=repr,
        describe=exp.describe,
        remove="the added token",
        partial=True,  # tokenizer.json's added_tokens define the specials; the decoder may list fewer
    )
    return out


def _config_diffs(cfg: Any, exp: _Expected) -> list[_Diff]:
    if not isinstance(cfg, dict):
        return [_Diff(f"the top level is {_short(cfg)}, not an object")]
    out: list[_Diff] = []
    if cfg.get("added_tokens_decoder") is not None:
        out += _decoder_diffs(cfg["added_tokens_decoder"], exp)
    out += _named_diffs(cfg, exp)
    for key in ("additional_special_tokens", "extra_special_tokens"):
        if cfg.get(key) is not None:
            out += _list_diffs(key, cfg[key], exp)
    return out


def _json_row(
    check: str,
    hf_dir: Path | None,
    name: str,
    exp: _Expected,
    compare: Callable[[Any, _Expected], list[_Diff]],
    *,
    fix: str,
) -> Row:
    if hf_dir is None:
        return skip(check, "no Hugging Face files (tokenizer.json) in the directory")
    path = hf_dir / name
    if not path.is_file():
        return skip(check, f"{name} is absent from {hf_dir}")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        return Row(check, FILES, "fail", f"{name} is not readable JSON ({exc})", f"{REEXPORT} ({name})")
    return _verdict(check, name, _guarded(name, compare, data, exp), fix=fix)


def _as_warning(r: Row, why: str) -> Row:
    """A difference no loader we run acts on: a warning that says why, not a failure."""
    if r.status != "fail":
        return r
    return Row(r.check, r.backend, "warn", f"{r.message} ({why})", r.fix)


def _added_tokens_json_diffs(data: Any, exp: _Expected) -> list[_Diff]:
    """``added_tokens.json`` (``{content: id}``, which transformers still loads and adds): every
    entry must be an artifact special at its id -- anything else becomes a token no export has."""
    if not isinstance(data, dict):
        return [_Diff(f"added_tokens.json is {_short(data)}, not a {{content: id}} object")]
    got: dict[int, list[str]] = {}
    for content, token_id in data.items():
        got.setdefault(token_id if _is_int(token_id) else -1, []).append(content)
    want = {i: s for s, i in exp.specials.items() if i in got}
    return _compare_ids(
        "added_tokens.json id",
        got,
        want,
        show=repr,
        describe=exp.describe,
        remove="the added token",
        partial=True,
    )


# ------------------------------------------------------------------------ GGUF
def _read_gguf(path: Path) -> dict[str, Any] | str:
    """``{key: value}`` of every GGUF field (the gate's shared read), or why it cannot be read."""
    try:
        return {name: value for name, (value, _) in gguf_fields(path).items()}
    except ImportError:
        raise  # the caller's "missing"
    except Exception as exc:  # gguf-py raises bare ValueError/struct/numpy errors on bad files
        return f"{path.name} is not a readable GGUF ({type(exc).__name__}: {exc})"


def _list_diffs_by_id(
    key: str, got: Any, want: list[T], kind: type, *, show: Callable[[int, T], str], exp: _Expected
) -> list[_Diff]:
    if not isinstance(got, list) or not all(isinstance(v, kind) and not isinstance(v, bool) for v in got):
        return [_Diff(f"{key} is {_short(got)}, not a list of {kind.__name__}")]
    if got == want:
        return []
    out = []
    if len(got) != len(want):
        out.append(_Diff(f"{key} count: file has {len(got)}, artifact has {len(want)}"))
    for token_id in range(max(len(got), len(want))):
        mine = got[token_id] if token_id < len(got) else None
        theirs = want[token_id] if token_id < len(want) else None
        if mine != theirs:
            found = "nothing" if mine is None else show(token_id, mine)
            target = exp.describe(token_id) if theirs is None else show(token_id, theirs)
            out.append(_Diff(f"{key} id {token_id}: file has {found}, artifact has {target}"))
    return out


def _gguf_token_diffs(fields: dict[str, Any], exp: _Expected, *, rows: int = 0) -> list[_Diff]:
    """Id by id; a model GGUF's ids past the artifact's (``rows``) must be ``[PAD{i}]`` (UNUSED)."""
    n = len(exp.chars)
    pad, pad_types = padding_tokens(len(exp.gguf_tokens), rows)

    def show_token(token_id: int, text: str) -> str:
        return _show_chars(text) if token_id < n else repr(text)

    def show_type(_: int, value: int) -> str:
        return f"{value} ({TOKEN_TYPE_NAMES.get(value, 'unknown type')})"

    tokens = fields.get(GGUF_PREFIX + "tokens")
    types = fields.get(GGUF_PREFIX + "token_type")
    want, want_types = exp.gguf_tokens + pad, exp.gguf_types + pad_types
    out = _list_diffs_by_id(GGUF_PREFIX + "tokens", tokens, want, str, show=show_token, exp=exp)
    out += _list_diffs_by_id(GGUF_PREFIX + "token_type", types, want_types, int, show=show_type, exp=exp)
    return out


def _id_values(short: str, value: Any) -> list[Any] | None:
    """The ids an id-valued key holds, or ``None`` when the key is not id-valued."""
    if not (short.endswith(("_id", "_ids")) or short == "suppress_tokens"):
        return None
    return value if isinstance(value, list) else [value]


#: keys whose value here is llama.cpp's own default for a gpt2 (BPE) vocabulary: behaviour-identical
GGUF_BENIGN = {"add_space_prefix": False, "add_sep_token": False, "remove_extra_whitespaces": False}


def _gguf_key_diffs(fields: dict[str, Any], exp: _Expected) -> list[_Diff]:
    out: list[_Diff] = []
    for key, value in fields.items():
        if not isinstance(key, str) or not key.startswith(GGUF_PREFIX):
            continue
        if key[len(GGUF_PREFIX) :] in GGUF_BENIGN and value is GGUF_BENIGN[key[len(GGUF_PREFIX) :]]:
            continue  # written by convert_hf_to_gguf with the default value: nothing changes
        short = key[len(GGUF_PREFIX) :]
        ids = _id_values(short, value)
        bad = [v for v in ids or [] if not (_is_int(v) and 0 <= v < exp.vocab_size)]
        target = f" ({exp.describe(value)})" if ids is not None and _is_int(value) and not bad else ""
        if key not in EXPORTED_GGUF_KEYS:
            effect = GGUF_KEY_EFFECTS.get(short, "not a key this llama.cpp reads")
            text = f"{key} = {_short(value)}{target}: {effect}; `stacktok export` never writes this key"
            out.append(_Diff(text, remove=key))
        if bad:
            text = (
                f"{key} = {_short(value)}: {_short(bad[0])} is not an id the artifact defines "
                f"(0..{exp.vocab_size - 1}); llama.cpp ignores it with a warning"
            )
            out.append(_Diff(text, remove=key, instead="point it at an artifact id"))
    return out


def gguf_fix(path: Path | None, *, model: bool) -> str:
    """The fix for a GGUF whose tokenizer metadata is wrong: ``stacktok export`` for the
    vocab-only export, ``stacktok retokenize`` for a model GGUF (it holds weights)."""
    name = path.name if path is not None else "the GGUF"
    if model:
        return (
            f"put the artifact's tokenizer into the model: `stacktok retokenize {name} --out NEW.gguf` "
            "(README: Shipping a GGUF)"
        )
    return f"rebuild {name} with `stacktok export`"


def _gguf_rows(path: Path | None, exp: _Expected) -> list[Row]:
    checks = ("surface.gguf_tokens", "surface.gguf_keys")
    if path is None:
        return [skip(c, "no .gguf file in or beside the directory") for c in checks]
    try:
        fields = _read_gguf(path)
    except ImportError:
        why = f"gguf is not installed, so {path.name} cannot be read"
        return [Row(c, FILES, "missing", why, GGUF_INSTALL) for c in checks]
    if isinstance(fields, str):
        return [Row(c, FILES, "fail", fields, f"rebuild {path.name} with `stacktok export`") for c in checks]
    rows = embedding_rows(gguf_tensors(path))  # a model GGUF: padded rows, and retokenize is the fix
    fix = gguf_fix(path, model=rows is not None)
    token_diffs = functools.partial(_gguf_token_diffs, rows=rows or 0)
    return [
        _verdict(checks[0], path.name, _guarded(path.name, token_diffs, fields, exp), fix=fix),
        _verdict(checks[1], path.name, _guarded(path.name, _gguf_key_diffs, fields, exp), fix=fix),
    ]


# -------------------------------------------------------------------- tiktoken
def _tiktoken_diffs(data: bytes, exp: _Expected) -> list[_Diff]:
    out: list[_Diff] = []
    by_rank: dict[int, list[bytes]] = {}
    for lineno, line in enumerate(data.splitlines(), start=1):
        if not line.strip():
            continue
        parts = line.split()
        try:
            if len(parts) != 2:
                raise ValueError("want 2 fields")
            token, rank = base64.b64decode(parts[0], validate=True), int(parts[1])
        except ValueError:  # binascii.Error is a ValueError
            out.append(_Diff(f"line {lineno} is not 'base64 rank': {_short(line)}"))
            continue
        by_rank.setdefault(rank, []).append(token)
    want = dict(enumerate(exp.ordinary))
    if len(by_rank) != len(want):
        out.append(_Diff(f"count: file has {len(by_rank)} ranks, artifact has {len(want)} ordinary tokens"))

    def describe(rank: int) -> str:
        return repr(want[rank]) if rank in want else exp.describe(rank)

    out += _compare_ids("rank", by_rank, want, show=repr, describe=describe, remove="the line for")
    return out


def _tiktoken_row(path: Path | None, exp: _Expected) -> Row:
    check = "surface.tiktoken"
    if path is None:
        return skip(check, "no .tiktoken file in or beside the directory")
    try:
        data = path.read_bytes()
    except OSError as exc:
        return Row(check, FILES, "fail", f"{path.name} is not readable ({exc})", f"{REEXPORT} ({path.name})")
    fix = f"{REEXPORT}: rank r of {path.name} must be the bytes of id r"
    return _verdict(check, path.name, _guarded(path.name, _tiktoken_diffs, data, exp), fix=fix)


# ------------------------------------------------------------------------ entry
def surface_rows(exports: Exports, ref: StackTokenizer) -> list[Row]:
    """One row per vocabulary surface (seven rows, always), comparing each file with ``ref`` id by id."""
    exp = _Expected(ref)
    hf = exports.hf_dir
    config_fix = f"{REEXPORT}, or name only the artifact's specials ({exp.special_list()}) at their ids"
    return [
        _json_row(
            "surface.tokenizer_json",
            hf,
            "tokenizer.json",
            exp,
            _tokenizer_json_diffs,
            fix=f"{REEXPORT}: model.vocab must map ids 0..{len(exp.chars) - 1} to the artifact's bytes "
            "and added_tokens must be exactly its specials",
        ),
        _json_row(
            "surface.tokenizer_config", hf, "tokenizer_config.json", exp, _config_diffs, fix=config_fix
        ),
        _json_row(
            "surface.special_tokens_map", hf, "special_tokens_map.json", exp, _config_diffs, fix=config_fix
        ),
        _as_warning(
            _json_row(
                "surface.added_tokens_json",
                hf,
                "added_tokens.json",
                exp,
                _added_tokens_json_diffs,
                fix=f"{REEXPORT}, or delete added_tokens.json",
            ),
            "transformers' fast tokenizer ignores added_tokens.json beside tokenizer.json (measured on "
            "4.57.6 and 5.24.0), so ids are unchanged there; a slow tokenizer or another tool would add it",
        ),
        *_gguf_rows(exports.gguf, exp),
        _tiktoken_row(exports.tiktoken, exp),
    ]
