"""The versioned JSON artifact: canonical form, fingerprint, save and validating load.

Layout (keys sorted, one merge per line so diffs stay readable)::

    {"engine": {...}, "fingerprint": "<sha256>", "format": "stacktok-bpe-v1",
     "merges": [[a, b], ...], "name": "...", "pattern": "...",
     "special_tokens": [...], "vocab_size": N}

The fingerprint is the sha256 of the canonical JSON of ``format``,
``vocab_size``, ``pattern``, ``merges`` and ``special_tokens`` -- everything
that decides ids, nothing else (not the name, not the engine record). Files in
the seed's ``stacklm-bpe-v1`` format (no engine, no fingerprint) still load.

Format ``stacktok-bpe-v2`` (any byte-level BPE: ids in any order, specials anywhere, roles,
BOS behaviour, a sequence of splits, ``ignore_merges``, the source's template) has its home in
``vocab.py``; this module dispatches on ``format`` and keeps the fingerprint and engine checks
for both.

Data in, data out: :func:`read` validates a file and returns its :class:`Contents` (the model
builds its tokenizer from them: ``StackTokenizer.load``); :func:`dumps` / :func:`save` /
:func:`fingerprint` read what the :class:`Saved` protocol names off a tokenizer. Nothing here
builds a tokenizer or writes its state.

Where the artifact lives (the one home of the default path, used by the CLI, the suite and
the tests): :func:`shipped_artifact_path` is the copy packaged inside ``stacktok_export``;
:func:`default_artifact_path` is the checkout's ``tokenizer/stack100m-32768.json`` when this
package runs from a stacktok checkout (and that file exists), else the packaged copy.

Out of scope: building a tokenizer (``models/bpe``); migrating artifacts between formats (an
artifact is frozen).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

from ..split.pretokenize import check_engine, compile_pattern, engine_info
from ..util import limits
from ..util.atomic import write_text_atomic
from ..util.untrusted import UntrustedFileError, escape, read_untrusted
from . import vocab as _vocab

FORMAT = "stacktok-bpe-v1"
LEGACY_FORMATS = ("stacklm-bpe-v1",)
MAX_VOCAB = 1 << 16  # ids are 16-bit: pair keys (a << 16 | b) and uint16 packs
_REQUIRED = ("format", "vocab_size", "pattern", "merges", "special_tokens")
ARTIFACT_NAME = "stack100m-32768.json"  # the frozen artifact's file name, packaged and in a checkout
EXPORT_DIR = "tokenizer"  # a checkout's folder of the artifact and its exports


class ArtifactError(ValueError):
    """The artifact file is unreadable or inconsistent; the message says how to fix it."""


class Saved(_vocab.Layout, Protocol):
    """What saving reads off a tokenizer (every ``StackTokenizer`` has it; v1 reads ``pattern``,
    ``merges`` and ``special_to_id``, v2 the whole :class:`~.vocab.Layout`)."""

    name: str
    format: str
    engine: dict[str, Any]
    pattern: str


@dataclass(frozen=True)
class Contents:
    """A validated artifact file (:func:`read`): v1's split, merges and specials, or v2's
    :class:`~.vocab.Vocabulary`; its name and the engine it records (``{}`` when none)."""

    name: str
    pattern: str = ""
    merges: list[tuple[int, int]] = field(default_factory=list)
    special_tokens: list[str] = field(default_factory=list)
    vocabulary: _vocab.Vocabulary | None = None
    engine: dict[str, Any] = field(default_factory=dict)


# ------------------------------------------------------------ where it lives
def shipped_artifact_path() -> Path:
    """The frozen artifact that ships inside the package."""
    return Path(__file__).resolve().parents[1] / "data" / ARTIFACT_NAME


def project_root() -> Path | None:
    """The stacktok checkout this package runs from (its ``pyproject.toml`` says ``name = "stacktok"``).

    ``None`` for an installed package (site-packages has no such file beside it).
    """
    root = Path(__file__).resolve().parents[2]
    try:
        text = (root / "pyproject.toml").read_text(encoding="utf-8")
    except OSError:
        return None
    return root if re.search(r'(?m)^name\s*=\s*"stacktok"\s*$', text) else None


def default_artifact_path() -> Path:
    """The checkout's ``tokenizer/stack100m-32768.json`` if it exists, else the shipped artifact."""
    root = project_root()
    local = root / EXPORT_DIR / ARTIFACT_NAME if root else None
    return local if local is not None and local.is_file() else shipped_artifact_path()


# ------------------------------------------------------------------- format
def current_engine() -> dict[str, Any]:
    return engine_info()


def canonical(tok: Saved) -> dict[str, Any]:
    """Everything that decides ids (the fingerprint's input)."""
    if tok.format == _vocab.FORMAT_V2:
        return _vocab.canonical(tok)
    return _v1_canonical(tok.pattern, tok.merges, list(tok.special_to_id))


def _v1_canonical(pattern: str, merges: list[tuple[int, int]], specials: list[str]) -> dict[str, Any]:
    return {
        "format": FORMAT,
        "vocab_size": 256 + len(merges) + len(specials),
        "pattern": pattern,
        "merges": [[a, b] for a, b in merges],
        "special_tokens": specials,
    }


def _digest(canonical_form: dict[str, Any]) -> str:
    text = json.dumps(canonical_form, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(text.encode("ascii")).hexdigest()


def fingerprint(tok: Saved) -> str:
    """sha256 of :func:`canonical`."""
    return _digest(canonical(tok))


def dumps(tok: Saved) -> str:
    """The artifact's exact text: deterministic, ASCII, one merge per line."""
    payload = canonical(tok)
    payload["name"] = tok.name
    payload["engine"] = tok.engine or current_engine()
    payload["fingerprint"] = fingerprint(tok)
    if tok.format == _vocab.FORMAT_V2:
        return _vocab.dumps(payload)
    parts = []
    for key in sorted(payload):
        if key == "merges":
            body = ",\n    ".join(f"[{a}, {b}]" for a, b in tok.merges)
            value = f"[\n    {body}\n  ]" if body else "[]"
        else:
            value = json.dumps(payload[key], sort_keys=True, ensure_ascii=True)
        parts.append(f"  {json.dumps(key)}: {value}")
    return "{\n" + ",\n".join(parts) + "\n}\n"


def save(tok: Saved, path: str | os.PathLike[str]) -> None:
    write_text_atomic(path, dumps(tok))


def check_specials(specials: list[Any]) -> None:
    """Special tokens: a non-empty list of distinct, non-empty strings."""
    if not isinstance(specials, list) or not specials:
        raise ArtifactError("special_tokens is missing or empty; the artifact must list them")
    seen: set[str] = set()
    for s in specials:
        if not isinstance(s, str) or not s:
            raise ArtifactError(f"special token {s!r} is not a non-empty string")
        if s in seen:
            raise ArtifactError(f"special token {s!r} is listed twice; each must be unique")
        seen.add(s)


def _check_merges(merges: Any) -> list[tuple[int, int]]:
    if not isinstance(merges, list):
        raise ArtifactError("merges must be a list of [left, right] id pairs")
    out: list[tuple[int, int]] = []
    seen: dict[tuple[int, int], int] = {}
    for i, m in enumerate(merges):
        new_id = 256 + i
        ok = isinstance(m, list) and len(m) == 2 and all(type(x) is int for x in m)
        if not ok:
            raise ArtifactError(f"merge #{i} (id {new_id}) is {m!r}, not a [left, right] pair of ints")
        a, b = m
        if not (0 <= a < new_id and 0 <= b < new_id):
            raise ArtifactError(
                f"merge #{i} (id {new_id}) = {m!r} references an id that is not below its own "
                f"id {new_id}; merges must only combine earlier tokens"
            )
        pair = (a, b)
        if pair in seen:
            raise ArtifactError(
                f"merge #{i} (id {new_id}) = {m!r} duplicates merge #{seen[pair]}; "
                "each pair may be merged once"
            )
        seen[pair] = i
        out.append(pair)
    return out


def _read(path: Path) -> dict[str, Any]:
    if not os.path.lexists(path):
        raise ArtifactError(f"{escape(str(path))}: no such artifact; check the path")
    try:  # a regular file of bounded size (a FIFO or /dev/zero as --artifact never hangs)
        text = read_untrusted(path, limit=limits.current().tokenizer_json).decode("utf-8")
    except (UntrustedFileError, UnicodeDecodeError) as exc:
        raise ArtifactError(f"cannot read artifact: {exc}") from None
    try:
        payload = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ArtifactError(
            f"{escape(str(path))}: malformed JSON at line {exc.lineno} column {exc.colno} ({exc.msg}); "
            "restore the file from version control"
        ) from None
    except (RecursionError, ValueError) as exc:  # nested too deeply; a number of over 4,300 digits
        raise ArtifactError(
            f"{escape(str(path))}: unreadable JSON ({str(exc)[:120]}); restore the file"
        ) from None
    if not isinstance(payload, dict):
        raise ArtifactError(f"{path}: the artifact must be a JSON object")
    return payload


def _validate(payload: dict[str, Any], path: Path) -> None:
    fmt = payload.get("format")
    if fmt != FORMAT and fmt not in LEGACY_FORMATS and fmt != _vocab.FORMAT_V2:
        known = ", ".join((FORMAT, _vocab.FORMAT_V2, *LEGACY_FORMATS))
        if fmt is None:
            raise ArtifactError(f"{path}: no 'format' key; not a stacktok artifact")
        raise ArtifactError(
            f"{path}: unknown format {fmt!r}; this stacktok reads {known} -- "
            "upgrade stacktok to read newer artifacts"
        )
    if fmt == _vocab.FORMAT_V2:
        return
    missing = [k for k in _REQUIRED if k not in payload]
    if missing:
        raise ArtifactError(f"{path}: missing key(s) {missing}; not a stacktok artifact")
    if not isinstance(payload["pattern"], str):
        raise ArtifactError(f"{path}: pattern must be a string")
    if type(payload["vocab_size"]) is not int:
        raise ArtifactError(f"{path}: vocab_size must be an integer")
    if payload["vocab_size"] > MAX_VOCAB:
        raise ArtifactError(
            f"{path}: vocab_size {payload['vocab_size']:,} is over {MAX_VOCAB:,}; stacktok ids are 16-bit "
            "(merge tables, uint16 packs): train with --vocab-size at most 65536"
        )


def read(path: str | os.PathLike[str], *, allow_engine_mismatch: bool) -> Contents:
    """Read and validate an artifact file; ``ArtifactError`` names any problem."""
    path = Path(path)
    payload = _read(path)
    _validate(payload, path)
    name = str(payload.get("name") or path.stem)
    if payload["format"] == _vocab.FORMAT_V2:
        try:
            vocabulary = _vocab.read_payload(payload)
        except ValueError as exc:
            raise ArtifactError(f"{path}: {exc}") from None
        contents, canonical_form = Contents(name, vocabulary=vocabulary), _vocab.canonical(vocabulary)
    else:
        contents = _read_v1(payload, path, name)
        canonical_form = _v1_canonical(contents.pattern, contents.merges, contents.special_tokens)
    engine = _check_recorded(
        _digest(canonical_form), payload, path, allow_engine_mismatch=allow_engine_mismatch
    )
    return replace(contents, engine=engine)


def _read_v1(payload: dict[str, Any], path: Path, name: str) -> Contents:
    try:
        merges = _check_merges(payload["merges"])
        check_specials(payload["special_tokens"])
        compile_pattern(payload["pattern"])
    except ValueError as exc:  # ArtifactError included
        raise ArtifactError(f"{path}: {exc}") from None
    expected = 256 + len(merges) + len(payload["special_tokens"])
    if payload["vocab_size"] != expected:
        raise ArtifactError(
            f"{path}: vocab_size is {payload['vocab_size']} but 256 bytes + {len(merges)} merges "
            f"+ {len(payload['special_tokens'])} specials = {expected}; the file was edited or truncated"
        )
    return Contents(name, payload["pattern"], merges, list(payload["special_tokens"]))


def _check_recorded(
    actual: str, payload: dict[str, Any], path: Path, *, allow_engine_mismatch: bool
) -> dict[str, Any]:
    """The engine the file records (``{}`` if none), once its fingerprint matches ``actual``."""
    recorded = payload.get("fingerprint")
    if recorded is not None and recorded != actual:
        raise ArtifactError(
            f"{path}: fingerprint {recorded[:12]}... does not match the contents "
            f"({actual[:12]}...); the file was edited after it was written -- "
            "restore it from version control"
        )
    engine = payload.get("engine")
    if engine is None:
        return {}
    if not isinstance(engine, dict):
        raise ArtifactError(f"{path}: engine must be an object")
    problem = check_engine(engine)
    if problem and not allow_engine_mismatch:
        raise ArtifactError(f"{path}: {problem}")
    return dict(engine)
