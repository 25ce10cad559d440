"""What every importer shares: the refusal error, the GPT-2 split, and the id table builder.

- :class:`ImportRefused`: a source (or one component of it) that is not a byte-level BPE the
  reference can follow; its message is one line naming the file and the component.
- :data:`GPT2_PATTERN`: the split ByteLevel's ``use_regex=True`` means (GPT-2's ``encoder.py``);
  :data:`WHOLE_TEXT`: no split.
- :func:`dense_table`: ``{id: bytes}`` -> one entry per id, refusing holes in the id space.
- :func:`merge_pair`: one ``tokenizer.json`` merge entry (``"left right"`` or ``[left, right]``)
  -> its two token strings: the one parser of merge entries (the importers here, and the
  suite's validation and audit);
- :func:`merge_ids`: ``"left right"`` merge strings -> id pairs through a string -> id map.
- :func:`vocabulary`: the keyword dict of ``StackTokenizer.from_vocab``.
- reading a source as untrusted input (every source is a file from the internet):
  :func:`read_file` / :func:`load_json` (a regular file, within its size limit, ``limits``;
  a file found beside the one named only inside its folder, :func:`folder_roots`; JSON nested
  too deep for Python's parser is refused, not a ``RecursionError``), :func:`check_entries`
  (a vocabulary over ``limits.current().vocab_entries``), :func:`check_bytes` (a vocabulary
  whose byte tokens are missing, so ordinary text would encode to nothing) and
  :func:`malformed` (any other exception a reader or library raises on a malformed file, as
  one refusal line naming the file).

Out of scope: reading any particular file kind (one module per source).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..split.pretokenize import GPT2_PATTERN  # noqa: F401 -- re-exported for the readers
from ..util.limits import current
from ..util.untrusted import UntrustedFileError, escape, read_untrusted

#: GPT-2's pre-tokenizer (HF ByteLevel ``use_regex=True``; llama.cpp pre type ``gpt-2``)
#: no split at all (a source without a pre-tokenizer regex): the whole text is one piece
WHOLE_TEXT = r"(?s:.+)"


class ImportRefused(ValueError):
    """A source the reference cannot follow; one line: ``FILE: COMPONENT: why``."""

    def __init__(self, path: str | os.PathLike[str], component: str, why: str) -> None:
        message = f"{escape(os.fspath(path), limit=4096)}: {component}: {why}"
        super().__init__(escape(message, limit=1 << 20))  # always one line
        self.component = component


#: bytes every text is made of: a byte-level BPE must have a token for each. Real vocabularies
#: lack only bytes of control characters and of 4-byte sequences (Falcon: 28 such bytes, 0x03
#: ... 0xf2; StarCoder: 0xf1; DeepSeek, MPT: 0xc0, 0xc1, 0xf5-0xff, which no UTF-8 holds)
TEXT_BYTES = frozenset([0x09, 0x0A, 0x0D, *range(0x20, 0x7F), *range(0x80, 0xC0), *range(0xC2, 0xF1)])
_RAISE = "if it is real, raise the limit with --max-file-mb"


def read_file(path: str | os.PathLike[str], *, limit: int, roots: Sequence[Path] = ()) -> bytes:
    """The bytes of a source file, read bounded (``read_untrusted``); ``ImportRefused`` otherwise."""
    try:
        return read_untrusted(path, limit=limit, roots=roots)
    except UntrustedFileError as exc:
        raise ImportRefused(path, "file", f"{exc.what}; {exc.fix}") from None


def load_json(path: str | os.PathLike[str], *, limit: int, roots: Sequence[Path] = ()) -> Any:
    """A JSON source parsed, or ``ImportRefused`` naming why (deep nesting included)."""
    raw = read_file(path, limit=limit, roots=roots)
    try:
        return json.loads(raw.decode("utf-8"))
    except RecursionError:
        raise ImportRefused(
            path, "JSON", "nested deeper than Python's JSON parser follows; no tokenizer file nests so deep"
        ) from None
    except (UnicodeDecodeError, ValueError) as exc:  # JSONDecodeError, int digits, lone surrogates
        raise ImportRefused(path, "JSON", f"cannot read it: {escape(str(exc))}") from None


def folder_roots(folder: Path) -> tuple[Path, ...]:
    """Where a file found in ``folder`` (beside the one named) may point: the folder, and for a
    Hugging Face cache snapshot (``.../snapshots/REV``) its repository, whose ``blobs/`` hold the
    files the snapshot links to."""
    folder = Path(folder)
    if folder.parent.name == "snapshots":
        return (folder, folder.parent.parent)
    return (folder,)


def check_entries(path: str | os.PathLike[str], where: str, count: int) -> None:
    """A vocabulary (or merge list) of ``count`` entries is within ``limits.current()``."""
    limit = current().vocab_entries
    if count > limit:
        raise ImportRefused(
            path,
            where,
            f"{count:,} entries, over the {limit:,}-entry limit for a vocabulary (the largest real "
            f"one, XLM-V's, has 901,629); {_RAISE}",
        )


def check_bytes(path: str | os.PathLike[str], tokens: Sequence[bytes], specials: Mapping[str, int]) -> None:
    """Every byte of :data:`TEXT_BYTES` is an ordinary token (a byte-level BPE drops a byte it has
    no token for: without them text encodes to few ids or none)."""
    special_ids = set(specials.values())
    singles = {t[0] for i, t in enumerate(tokens) if len(t) == 1 and i not in special_ids}
    missing = sorted(TEXT_BYTES - singles)
    if missing:
        shown = ", ".join(f"0x{b:02x}" for b in missing[:8]) + (", ..." if len(missing) > 8 else "")
        raise ImportRefused(
            path,
            "vocabulary",
            f"no token for {len(missing)} of the single bytes text is made of ({shown}): a byte-level "
            "BPE drops such bytes, so text would encode to nothing; a byte-level BPE has a token for "
            "every byte of ASCII text and of 2- and 3-byte UTF-8 sequences (is this a byte-level BPE?)",
        )


#: the longest token a merge may make (real tokens are at most a few hundred bytes; a chain of
#: merges that doubles a token reaches 2**40 bytes in 40 lines of a minbpe file)
MAX_TOKEN_BYTES = 1 << 16


class TokenBytes:
    """Tokens built by concatenation (minbpe, seed 004: the file gives merges, not tokens), each
    at most :data:`MAX_TOKEN_BYTES` and all together at most ``limits.current().tokenizer_json``."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path, self.total, self.limit = path, 0, current().tokenizer_json

    def join(self, where: str, left: bytes, right: bytes) -> bytes:
        size = len(left) + len(right)
        if size > MAX_TOKEN_BYTES:
            what = f"makes a token of {size:,} bytes, over {MAX_TOKEN_BYTES:,} (no real one is)"
            raise ImportRefused(self.path, where, what)
        self.total += size
        if self.total > self.limit:
            raise ImportRefused(self.path, where, f"brings the tokens to over {self.limit:,} bytes; {_RAISE}")
        return left + right


def malformed(path: str | os.PathLike[str], kind: str, exc: BaseException) -> ImportRefused:
    """Any exception a reader raised on a malformed file, as one refusal line naming the file."""
    what = escape(str(exc).splitlines()[0] if str(exc) else "", limit=120)
    return ImportRefused(
        path,
        kind,
        f"malformed ({type(exc).__name__}: {what}); check that it is a whole, unmodified file of this kind",
    )


def dense_table(path: str | os.PathLike[str], by_id: Mapping[int, bytes]) -> list[bytes]:
    """One entry per id 0..max; a missing id is refused (every id must be a token)."""
    n = max(by_id) + 1 if by_id else 0
    if len(by_id) != n:
        hole = next(i for i in range(n) if i not in by_id)
        raise ImportRefused(
            path, "vocabulary", f"id {hole} has no token (ids must be 0..{n - 1} without holes)"
        )
    return [by_id[i] for i in range(n)]


def merge_pair(m: Any) -> tuple[str, str] | None:
    """A merge entry as its two token strings: ``"left right"`` (split at the one space) or a
    pair ``["left", "right"]``; None when it is neither (an empty part is the caller's to judge).

        >>> merge_pair("Ġ t"), merge_pair(["Ġ", "t"]), merge_pair("a b c"), merge_pair([1, 2])
        (('Ġ', 't'), ('Ġ', 't'), None, None)
    """
    if isinstance(m, str):
        parts = m.split(" ")
    elif isinstance(m, (list, tuple)):
        parts = list(m)
    else:
        return None
    if len(parts) != 2 or not all(isinstance(p, str) for p in parts):
        return None
    return parts[0], parts[1]


def merge_ids(
    path: str | os.PathLike[str], merges: Iterable[str | Sequence[str]], ids: Mapping[str, int]
) -> list[tuple[int, int]]:
    """``"a b"`` (or ``["a", "b"]``) merge entries -> ``(id(a), id(b))`` in rank order."""
    out: list[tuple[int, int]] = []
    for r, m in enumerate(merges):
        parts = merge_pair(m)
        if parts is None:
            shown = escape(repr(m), limit=60)
            raise ImportRefused(path, f"merges[{r}]", f"{shown} is not two tokens separated by one space")
        try:
            out.append((ids[parts[0]], ids[parts[1]]))
        except KeyError as exc:
            shown = escape(repr(exc.args[0]), limit=60)
            raise ImportRefused(path, f"merges[{r}]", f"{shown} is not a token of the vocabulary") from None
    return out


def vocabulary(
    *,
    specials: Mapping[str, int],
    roles: Mapping[str, int] | None = None,
    in_text: Iterable[str] = (),
    **fields: Any,
) -> dict[str, Any]:
    """The keyword arguments of ``StackTokenizer.from_vocab``: ``fields`` as given (``tokens``,
    ``merges``, ``patterns``, ``name``, flags), specials in id order, roles and ``in_text`` sorted."""
    return {
        **fields,
        "specials": dict(sorted(specials.items(), key=lambda kv: kv[1])),
        "roles": dict(sorted((roles or {}).items())),
        "in_text": sorted(set(in_text)),
    }


def role_ids(specials: Mapping[str, int], named: Mapping[str, str | None]) -> dict[str, int]:
    """``{"bos": "<s>", ...}`` -> ``{"bos": id}`` for the names that are specials."""
    return {role: specials[s] for role, s in named.items() if s is not None and s in specials}
