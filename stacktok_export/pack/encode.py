"""The packer's worker: documents to ``<|bos|> ids <|eos|>`` as ``uint16``/``uint32``, fast and proven.

The fast path is the tiktoken export (what the conformance suite proves equal
to the reference). Two kinds of document go through the reference itself:
those holding a code point tiktoken's regex tables classify differently
(:class:`~stacktok_export.split.drift.DriftCache`, asked once per code point; under
Qwen2's or GPT-2's split also those holding a code point its shape cannot prove
agreeing, ``drift.UNPROVEN``; under any other split every document holding a
non-ASCII code point) or a token the source splits out of plain
text (``in_text``, which tiktoken has not), so the ids are the reference's by
construction; and the *verified* ones -- a deterministic sample chosen by
document number (``rate``), every document holding a special-token string or
a code point tiktoken encodes differently for a reason no Unicode table
explains, or all with ``rate=1`` -- are encoded by both and compared. A
difference is returned as a :class:`Mismatch`, never written.

Out of scope: which process runs this (``engines``) and where ids go (``writer``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..models.bpe.bpe import StackTokenizer, load_tokenizer
from ..split.drift import CLASS_SPLITS, DriftCache
from ..util.diff import first_difference
from .writer import token_dtype

_GOLDEN = 0x9E3779B97F4A7C15  # Fibonacci hashing: document number -> well-spread 64-bit value
_SCALE = 1 << 64


def sampled(source: int, number: int, rate: float) -> bool:
    """Whether document ``number`` of input ``source`` is in the verification sample.

    Fibonacci hashing of the position: the same documents for any engine or worker count.
    """
    return rate >= 1.0 or (((source << 40) + number) * _GOLDEN) % _SCALE < rate * _SCALE


@dataclass
class Mismatch:
    """The first document whose fast ids differ from the reference's."""

    number: int
    where: str
    position: int
    reference: list[int]
    fast: list[int]

    def message(self, backend: str) -> str:
        lo = max(self.position - 3, 0)
        ref, fast = self.reference[lo : self.position + 4], self.fast[lo : self.position + 4]
        return (
            f"{self.where}: {backend} and the reference differ at token {self.position} "
            f"(reference ...{ref}..., {backend} ...{fast}...); nothing of this document was written. "
            "Run `stacktok gate` on the export and report the document"
        )


@dataclass
class Batch:
    """Consecutive documents of input ``source``: ``(number, where, text or None, replaced)``."""

    source: int
    docs: list[tuple[int, str, str | None, int]]
    consumed: int = 0  # bytes of the input read once the last document is


#: per-document flags in :attr:`Encoded.flags`
VERIFIED, REFERENCE, EMPTY, SKIPPED = 1, 2, 4, 8
FLAG_NAMES = {
    VERIFIED: "verified",
    REFERENCE: "reference_encoded",
    EMPTY: "empty_dropped",
    SKIPPED: "invalid_skipped",
}


@dataclass
class Encoded:
    """One batch's result: the written documents' ids back to back, and per document (all of
    them, dropped ones with length 0) its number, length, flags and U+FFFD replacements."""

    source: int
    ids: np.ndarray
    numbers: np.ndarray
    lengths: np.ndarray
    flags: np.ndarray
    replaced: np.ndarray
    mismatch: Mismatch | None = None
    consumed: int = 0


@dataclass(frozen=True)
class EncoderSpec:
    """What a worker needs to build its encoder (small and picklable)."""

    artifact: str
    rate: float
    keep_empty: bool = False
    allow_engine_mismatch: bool = False


class DocEncoder:
    """Per-worker state: the reference, the tiktoken Encoding and a drift cache."""

    def __init__(self, spec: EncoderSpec) -> None:
        from ..export.tiktoken_fmt import tiktoken_unproven, to_tiktoken
        from ..gguf.pretypes import COVERING
        from ..split.drift import is_llama3

        self.ref: StackTokenizer = load_tokenizer(
            Path(spec.artifact), allow_engine_mismatch=spec.allow_engine_mismatch
        )
        # tiktoken is the fast path where its merges are proven equal and its findall is the whole
        # split (``COVERING`` in gguf/pretypes.py: else it drops the text between matches). The regex engines
        # differ in their Unicode tables, not in ASCII classes: the drift cache asks tiktoken about
        # each new non-ASCII code point under a split where only its class counts (``drift.
        # CLASS_SPLITS``; proven per code point except under Llama-3's, whose shape always tells);
        # under any other split only ASCII documents go the fast way.
        # Tokens the source splits out of plain text (``in_text``, e.g. Qwen3's ``<think>``):
        # tiktoken has none, so a document holding one goes to the reference, the rest may not.
        covering = len(self.ref.patterns) == 1 and self.ref.patterns[0] in COVERING
        proven = covering and tiktoken_unproven(self.ref, outside_in_text=True) is None
        self.in_text = _Strings(self.ref.in_text)
        self.fast = to_tiktoken(self.ref) if proven else None
        self.rate = spec.rate
        self.keep_empty = spec.keep_empty
        by_class = covering and self.ref.patterns[0] in CLASS_SPLITS
        prove = not is_llama3(self.ref.patterns)
        self.drift: DriftCache | None = None
        if proven and by_class:
            self.drift = DriftCache(self.ref, self.fast.encode_ordinary, prove=prove)
        self.ascii_only = proven and not by_class
        self.bos, self.eos = self.ref.bos_id, self.ref.eos_id
        self.specials = _Strings(frozenset(self.ref.special_to_id))
        self.dtype = np.dtype(token_dtype(self.ref.vocab_size))

    def _fast(self, text: str) -> np.ndarray:
        return self.fast.encode_to_numpy(text, allowed_special=set(), disallowed_special=())

    def encode_batch(self, batch: Batch) -> Encoded:
        parts: list[Any] = []
        numbers, lengths, flags, replaced = [], [], [], []
        encoded = self._documents(batch.source, [(number, text) for number, _, text, _ in batch.docs])
        for (number, where, _, fixed), (ids, flag) in zip(batch.docs, encoded):
            if isinstance(ids, Mismatch):
                ids.where = where
                return Encoded(batch.source, *_empty(self.dtype), mismatch=ids)
            if ids is not None:
                parts += ((self.bos,), ids, (self.eos,))
            numbers.append(number)
            lengths.append(0 if ids is None else len(ids) + 2)
            flags.append(flag)
            replaced.append(fixed)
        flat = (
            np.concatenate([np.asarray(p, dtype=self.dtype) for p in parts])
            if parts
            else _empty(self.dtype)[0]
        )
        return Encoded(
            batch.source,
            flat,
            np.asarray(numbers, dtype=np.int64),
            np.asarray(lengths, dtype=np.int64),
            np.asarray(flags, dtype=np.uint8),
            np.asarray(replaced, dtype=np.int64),
            consumed=batch.consumed,
        )

    def _route(self, source: int, number: int, text: str | None) -> int:
        """How a document is encoded: ``SKIPPED``/``EMPTY`` (not at all), ``REFERENCE``,
        ``VERIFIED`` (tiktoken, compared with the reference) or 0 (tiktoken)."""
        if text is None:
            return SKIPPED
        if not text and not self.keep_empty:
            return EMPTY
        if self.fast is None or (self.ascii_only and not text.isascii()) or self.in_text.found_in(text):
            return REFERENCE
        tables, other = (False, None) if self.drift is None else self.drift.scan(text)
        if tables and other is None:
            return REFERENCE
        if other is None and not (sampled(source, number, self.rate) or self.specials.found_in(text)):
            return 0
        return VERIFIED

    def _documents(self, source: int, docs: list[tuple[int, str | None]]) -> list[tuple[Any, int]]:
        """``(ids or None if dropped, flag)`` or ``(Mismatch, flag)`` for each ``(number, text)``.

        The documents the reference encodes go to it together (``encode_batch``: their new
        pre-tokens merge in one numpy batch, not a few dozen at a time in Python per document).
        """
        routes = [self._route(source, number, text) for number, text in docs]
        wanted = [text for (_, text), route in zip(docs, routes) if route in (REFERENCE, VERIFIED)]
        refs = iter(self.ref.encode_batch(wanted) if wanted else ())
        out: list[tuple[Any, int]] = []
        for (number, text), route in zip(docs, routes):
            if route in (SKIPPED, EMPTY):
                out.append((None, route))
            elif route == REFERENCE:
                out.append((next(refs), REFERENCE))
            elif route == 0:
                out.append((self._fast(text), 0))  # type: ignore[arg-type]
            else:
                ids, ref = self._fast(text), next(refs)  # type: ignore[arg-type]
                got = ids.tolist()
                if ref != got:
                    out.append((Mismatch(number, "", first_difference(ref, got), ref, got), VERIFIED))
                else:
                    out.append((ids, VERIFIED))
        return out


class _Strings:
    """Whether a text holds any of a set of strings: ``str.__contains__`` (C) for each string of
    a group whose common prefix the text holds. Strings are grouped by first character, and a
    group is asked for its longest common prefix first: llama.cpp's 290 ``[PAD151646]`` ...
    tokens cost one ``"[PAD1516" in text`` on code full of ``[`` (before: 290 searches of each
    such document, a fifth of a Qwen2 pack's time)."""

    def __init__(self, strings: frozenset[str]) -> None:
        by_first: dict[str, list[str]] = {}
        for s in sorted(filter(None, strings)):
            by_first.setdefault(s[0], []).append(s)
        self.groups = [(os.path.commonprefix(group), group) for group in by_first.values()]

    def found_in(self, text: str) -> bool:
        return any(prefix in text and any(s in text for s in group) for prefix, group in self.groups)


def _empty(dtype: np.dtype) -> tuple[np.ndarray, ...]:
    return (np.zeros(0, dtype), *(np.zeros(0, t) for t in (np.int64, np.int64, np.uint8, np.int64)))


# One encoder per worker process: built by the parent before it forks the workers (they inherit
# it, see engines.start_pool), or by a spawned pool's initializer. Spawned workers start before
# the parent has read the artifact, so a failure to build one is kept and raised with the first
# batch (through the future, as one error line in the parent) -- an initializer that raises
# would print a traceback and break the pool.
_WORKER: DocEncoder | Exception | None = None


def share_worker(spec: EncoderSpec) -> DocEncoder:
    """Build this process's encoder now, for the workers forked from it to inherit (raises here)."""
    global _WORKER
    _WORKER = None
    _WORKER = DocEncoder(spec)
    return _WORKER


def shared_worker() -> DocEncoder | None:
    """The encoder :func:`share_worker` built, if any."""
    return _WORKER if isinstance(_WORKER, DocEncoder) else None


def forget_worker() -> None:
    global _WORKER
    _WORKER = None


def init_worker(spec: EncoderSpec) -> None:
    global _WORKER
    try:
        _WORKER = DocEncoder(spec)
    except Exception as exc:  # noqa: BLE001 -- re-raised by encode_in_worker
        _WORKER = exc


def encode_in_worker(batch: Batch) -> Encoded:
    if _WORKER is None:
        raise RuntimeError("init_worker was not called in this process")
    if isinstance(_WORKER, Exception):
        raise _WORKER
    return _WORKER.encode_batch(batch)
