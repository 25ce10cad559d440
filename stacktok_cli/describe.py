"""What ``stacktok info`` says about a file that is not an artifact: an HF directory, a GGUF, a ``.tiktoken``.

Each ``describe_*`` reads the file as its format defines it and returns a flat dict with the
same keys where the formats share an idea -- ``format``, ``vocab_size``, ``special_tokens``
(content -> id), ``pattern`` / ``pre`` (how text is split), ``add_bos`` / ``add_eos``,
``chat_template`` (present or not) and ``fingerprint_label`` (the stacktok fingerprint a file
*claims*; a label, not a proof -- ``stacktok gate`` decides). A ``.tiktoken`` file holds only
ranks, so it reports their count and the largest rank.

Files are read as untrusted input (``stacktok_export.util``): bounded by their kind's size limit,
files inside a directory only when they are its own (no link out of it), a GGUF header checked
against its file's size before gguf-py builds anything (``stacktok_export.gguf.header``); any
refusal or malformed file is a usage error (exit 2) naming the file.

Out of scope: whether any of this is right (``stacktok gate``), the artifact's own view
(``stacktok_cli.tokens.info_dict``).
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from conformance.core.errors import UsageError
from conformance.core.layout import gguf_fields
from stacktok_export.export.hf import FINGERPRINT_KEY
from stacktok_export.gguf.header import GGUFHeaderError
from stacktok_export.importers.common import folder_roots
from stacktok_export.util.limits import current
from stacktok_export.util.untrusted import UntrustedFileError, read_untrusted


def describe(path: Path) -> dict[str, Any] | None:
    """The description of ``path`` by its kind; ``None`` for an artifact (the caller loads it).

    A field of an unexpected type (an id that is a string, a list where an object belongs) is a
    usage error naming the file, whatever the reader trips on."""
    if path.suffix in (".gguf", ".tiktoken") and not path.is_dir() and not path.exists():
        raise UsageError(f"{path}: no such file")
    kind = describe_hf if path.is_dir() else _READERS.get(path.suffix)
    if kind is None:
        return None
    try:
        return kind(path)
    except (KeyError, TypeError, AttributeError, IndexError, ValueError, RecursionError) as exc:
        what = str(exc).splitlines()[0][:120] if str(exc) else ""
        why = f"malformed ({type(exc).__name__}: {what})"
        raise UsageError(f"{path}: {why}; is it a whole, unmodified file of its kind?") from None


def _read(path: Path, *, limit: int, roots: Sequence[Path] = ()) -> bytes:
    try:
        return read_untrusted(path, limit=limit, roots=roots)
    except UntrustedFileError as exc:
        raise UsageError(str(exc)) from None


def _json(path: Path, *, limit: int, roots: Sequence[Path]) -> Any:
    try:
        return json.loads(_read(path, limit=limit, roots=roots).decode("utf-8"))
    except RecursionError:
        raise UsageError(f"{path}: JSON nested too deep to read; pass a Hugging Face directory") from None
    except (UnicodeDecodeError, ValueError) as exc:
        raise UsageError(
            f"{path}: not readable JSON ({exc}); pass a Hugging Face tokenizer directory"
        ) from None


def _split_patterns(pre: Any) -> list[str]:
    """Every ``Split`` regex of a ``pre_tokenizer``, in order (a ``Sequence`` is walked)."""
    if not isinstance(pre, dict):
        return []
    if pre.get("type") == "Sequence":
        return [p for sub in pre.get("pretokenizers") or [] for p in _split_patterns(sub)]
    pattern = pre.get("pattern") if pre.get("type") == "Split" else None
    if isinstance(pattern, dict):
        return [str(pattern.get("Regex", pattern.get("String", "")))]
    return []


def describe_hf(directory: Path) -> dict[str, Any]:
    """``tokenizer.json`` (+ ``tokenizer_config.json``, ``chat_template.jinja``) of a directory."""
    tj = directory / "tokenizer.json"
    if not tj.is_file():
        raise UsageError(f"{directory} has no tokenizer.json; pass a Hugging Face tokenizer directory")
    roots, limits = folder_roots(directory), current()
    data = _object(tj, _json(tj, limit=limits.tokenizer_json, roots=roots))
    config_path = directory / "tokenizer_config.json"
    config = _json(config_path, limit=limits.config_json, roots=roots) if config_path.is_file() else {}
    config = _object(config_path, config)
    model = data.get("model") or {}
    model = model if isinstance(model, dict) else {}
    vocab = model.get("vocab") if isinstance(model.get("vocab"), dict) else {}
    added = [t for t in data.get("added_tokens") or [] if isinstance(t, dict) and _is_id(t.get("id"))]
    ids = [i for i in vocab.values() if _is_id(i)] + [t["id"] for t in added]
    template = config.get("chat_template") or (directory / "chat_template.jinja").is_file()
    return {
        "format": "huggingface",
        "path": str(directory),
        "model": model.get("type"),
        "vocab_size": max(ids) + 1 if ids else 0,
        "merges": len(model.get("merges") or []),
        "special_tokens": {t["content"]: int(t["id"]) for t in added if t.get("special")},
        "added_not_special": sorted(t["content"] for t in added if not t.get("special")),
        "patterns": _split_patterns(data.get("pre_tokenizer")),
        "add_bos": bool(config.get("add_bos_token", False)),
        "add_eos": bool(config.get("add_eos_token", False)),
        "bos_token": _content(config.get("bos_token")),
        "eos_token": _content(config.get("eos_token")),
        "post_processor": (data.get("post_processor") or {}).get("type"),
        "chat_template": bool(template),
        "fingerprint_label": config.get(FINGERPRINT_KEY),
    }


def _object(path: Path, value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        kind = type(value).__name__
        raise UsageError(f"{path}: a JSON {kind}, not an object; pass a Hugging Face directory")
    return value


def _is_id(value: Any) -> bool:
    return type(value) is int and value >= 0


def _content(token: Any) -> str | None:
    return token.get("content") if isinstance(token, dict) else token


#: llama.cpp's token types (llama_token_type): which ids are specials
_CONTROL, _USER_DEFINED = 3, 4


def describe_gguf(path: Path) -> dict[str, Any]:
    """The ``tokenizer.*`` keys of a GGUF, read by gguf-py (without it: a usage error naming the extra)."""
    try:
        fields = gguf_fields(path)
    except ImportError:
        raise UsageError(f"{path}: reading a GGUF needs gguf-py: pip install 'stacktok[gguf]'") from None
    except (GGUFHeaderError, UntrustedFileError) as exc:  # the message names the file and the key
        raise UsageError(str(exc)) from None
    except (OSError, ValueError) as exc:
        raise UsageError(f"{path}: not a readable GGUF ({exc})") from None

    def get(key: str) -> Any:
        return fields.get(key, (None, ""))[0]

    tokens = list(get("tokenizer.ggml.tokens") or [])
    types = list(get("tokenizer.ggml.token_type") or [])
    specials = {t: i for i, (t, k) in enumerate(zip(tokens, types)) if k in (_CONTROL, _USER_DEFINED)}
    roles = {
        role: get(f"tokenizer.ggml.{key}_token_id")
        for role, key in (("bos", "bos"), ("eos", "eos"), ("eot", "eot"), ("pad", "padding"))
        if get(f"tokenizer.ggml.{key}_token_id") is not None
    }
    return {
        "format": "gguf",
        "path": str(path),
        "model": get("tokenizer.ggml.model"),
        "pre": get("tokenizer.ggml.pre"),
        "vocab_size": len(tokens),
        "merges": len(get("tokenizer.ggml.merges") or []),
        "special_tokens": specials,
        "roles": {k: int(v) for k, v in roles.items()},
        "add_bos": bool(get("tokenizer.ggml.add_bos_token")),
        "add_eos": bool(get("tokenizer.ggml.add_eos_token")),
        "chat_template": get("tokenizer.chat_template") is not None,
        "tensors": int(get("GGUF.tensor_count") or 0),
        "fingerprint_label": get("stacktok.fingerprint"),
    }


def describe_tiktoken(path: Path) -> dict[str, Any]:
    """A ``.tiktoken`` rank file: ``base64(token) rank`` per line; the count and the largest rank."""
    ranks: list[int] = []
    lines = _read(path, limit=current().tiktoken).splitlines()
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            token, rank = line.split()
            base64.b64decode(token, validate=True)
            ranks.append(int(rank))
        except (ValueError, binascii.Error):
            raise UsageError(
                f"{path} line {number}: not `base64-token rank`; pass a .tiktoken rank file"
            ) from None
    return {
        "format": "tiktoken",
        "path": str(path),
        "ranks": len(ranks),
        "max_rank": max(ranks) if ranks else None,
        "dense": sorted(ranks) == list(range(len(ranks))),
        "note": "a .tiktoken file holds ranks only: specials and the split pattern live in code",
    }


def describe_lines(info: dict[str, Any]) -> list[str]:
    """The table ``stacktok info`` prints: one ``key  value`` line, specials one per line."""
    lines = []
    for key, value in info.items():
        if key == "special_tokens":
            lines.append(f"{'specials':<18}{len(value)}")
            lines += [f"  {i:>6}  {text}" for text, i in sorted(value.items(), key=lambda kv: kv[1])]
        elif isinstance(value, (list, dict)):
            lines.append(f"{key:<18}{json.dumps(value, ensure_ascii=False)}")
        else:
            lines.append(f"{key:<18}{value}")
    return lines


_READERS = {".gguf": describe_gguf, ".tiktoken": describe_tiktoken}
