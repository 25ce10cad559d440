"""The reference tokenizer: byte-level BPE encode/decode over a frozen merge list.

Id layout (fixed for the life of a model)::

    0 .. 255                  raw byte values (id == byte)
    256 .. 256+M-1            learned merges in rank order (merge i -> id 256+i)
    256+M .. vocab_size-1     <|unused_N|> fillers (only on a training shortfall),
                              then the special tokens, always on the top ids

Encoding applies the lowest-id merge first inside each pre-token (leftmost
occurrence first), which is what tiktoken's rank merging and Hugging Face's
merge-list BPE compute for a self-reachable vocabulary. Special-token strings
in text are ordinary bytes unless the call site opts in.

Out of scope: normalization (none is applied), BPE dropout, and streaming
decode -- ``decode_bytes`` is exact; holding back partial UTF-8 is the
caller's job.
"""

from __future__ import annotations

import heapq
import os
import warnings
from collections.abc import Collection, Iterable
from pathlib import Path
from typing import Literal

import regex

from . import artifact as _artifact
from .pretokenize import LLAMA3_PATTERN, compile_pattern
from .trainer import ProgressFn, count_pretokens, default_workers, train_merges

SPECIAL_TOKENS: tuple[str, ...] = (
    "<|bos|>",  # beginning of sequence / packed document
    "<|eos|>",  # end of sequence / document
    "<|pad|>",  # padding, never in the loss
    "<|system|>",  # chat role marker
    "<|user|>",  # chat role marker
    "<|assistant|>",  # chat role marker; loss starts after it
    "<|end|>",  # end of turn
    "<|tool_call|>",  # opens a tool invocation
    "<|tool_result|>",  # opens a tool's observation, never in the loss
)
VOCAB_SIZE = 32768
NUM_BYTES = 256
NUM_MERGES = VOCAB_SIZE - NUM_BYTES - len(SPECIAL_TOKENS)  # 32,503
SPLIT_PATTERN = LLAMA3_PATTERN

_SHORT = 48  # pre-tokens up to this many bytes use the simple rescan loop
_CACHE_MAX = 1 << 18  # cached pre-tokens before the cache is cleared

AllowedSpecial = Literal["all"] | Collection[str]


class StackTokenizer:
    """Byte-level BPE with a fixed id layout; see the module docstring."""

    def __init__(self, pattern: str = SPLIT_PATTERN, *, name: str = "stacktok") -> None:
        self.name = name
        self.pattern = pattern
        self._split_re = compile_pattern(pattern)
        self.merges: list[tuple[int, int]] = []
        self.special_to_id: dict[str, int] = {}
        self.engine: dict[str, object] = {}
        self._index()

    # ------------------------------------------------------------------ layout
    def _index(self, specials: Iterable[str] = ()) -> None:
        """Rebuild every derived table from ``merges`` and ``specials``."""
        self._rank: dict[int, int] = {}
        table = [bytes([i]) for i in range(NUM_BYTES)]
        for i, (a, b) in enumerate(self.merges):
            self._rank[(a << 16) | b] = NUM_BYTES + i
            table.append(table[a] + table[b])
        nid = len(table)
        self.special_to_id = {}
        for s in specials:
            self.special_to_id[s] = nid
            table.append(s.encode("utf-8"))
            nid += 1
        self.id_to_special = {i: s for s, i in self.special_to_id.items()}
        self._table = table
        self._cache: dict[str, list[int]] = {}
        self._special_res: dict[frozenset[str], regex.Pattern[str]] = {}

    @property
    def vocab_size(self) -> int:
        return NUM_BYTES + len(self.merges) + len(self.special_to_id)

    @property
    def merge_id(self) -> dict[tuple[int, int], int]:
        """``{(left, right): merged id}`` (built on demand)."""
        return {pair: NUM_BYTES + i for i, pair in enumerate(self.merges)}

    def special_token_id(self, token: str) -> int:
        """The id of special token ``token``; ``KeyError`` lists the known ones."""
        try:
            return self.special_to_id[token]
        except KeyError:
            known = ", ".join(self.special_to_id)
            raise KeyError(f"{token!r} is not a special token of this tokenizer ({known})") from None

    id = special_token_id

    @property
    def bos_id(self) -> int:
        return self.special_token_id("<|bos|>")

    @property
    def eos_id(self) -> int:
        return self.special_token_id("<|eos|>")

    @property
    def pad_id(self) -> int:
        return self.special_token_id("<|pad|>")

    def token_bytes(self) -> list[bytes]:
        """The bytes of every non-special id (0 .. 256+len(merges)-1), in id order."""
        return self._table[: NUM_BYTES + len(self.merges)]

    # ---------------------------------------------------------------- training
    def train_from_iterable(
        self,
        docs: Iterable[str],
        vocab_size: int = VOCAB_SIZE,
        special_tokens: tuple[str, ...] = SPECIAL_TOKENS,
        *,
        workers: int | None = None,
        progress: ProgressFn | None = None,
    ) -> int:
        """Train on a stream of documents; return the merge shortfall (0 is healthy).

        On a shortfall the missing ids are filled with ``<|unused_N|>`` tokens
        placed *before* the specials, so ``vocab_size`` is exact and the
        specials keep the top ids.
        """
        num_merges = vocab_size - NUM_BYTES - len(special_tokens)
        if num_merges < 0:
            raise ValueError(
                f"vocab_size={vocab_size} is too small: it must hold 256 bytes and "
                f"{len(special_tokens)} special tokens (at least {NUM_BYTES + len(special_tokens)})"
            )
        _artifact.check_specials(list(special_tokens))
        counts = count_pretokens(docs, self.pattern, workers=workers or default_workers())
        word_counts = {s.encode("utf-8"): c for s, c in counts.items()}
        del counts
        self.merges = train_merges(word_counts, num_merges, progress=progress)
        shortfall = num_merges - len(self.merges)
        if shortfall:
            warnings.warn(
                f"corpus exhausted after {len(self.merges)} merges ({shortfall} short of "
                f"{num_merges}); padding with {shortfall} <|unused_N|> tokens so "
                f"vocab_size == {vocab_size}. Use a larger sample for a real vocabulary.",
                stacklevel=2,
            )
        fillers = tuple(f"<|unused_{i}|>" for i in range(shortfall))
        self._index(fillers + tuple(special_tokens))
        self.engine = _artifact.current_engine()
        return shortfall

    def train(
        self,
        text: str,
        vocab_size: int = VOCAB_SIZE,
        special_tokens: tuple[str, ...] = SPECIAL_TOKENS,
    ) -> int:
        """Train on one in-memory string (tests, demos)."""
        return self.train_from_iterable([text], vocab_size, special_tokens, workers=1)

    # ---------------------------------------------------------------- encoding
    def _bpe(self, data: bytes) -> list[int]:
        """Merge-list BPE of one pre-token's bytes."""
        if len(data) <= _SHORT:
            return self._bpe_short(list(data))
        return self._bpe_long(data)

    def _bpe_short(self, ids: list[int]) -> list[int]:
        """Rescan loop: merge every occurrence of the lowest-rank pair, repeat."""
        rank = self._rank
        miss = 1 << 30
        while len(ids) > 1:
            keys = [(a << 16) | b for a, b in zip(ids, ids[1:])]
            best = min(rank.get(k, miss) for k in keys)
            if best == miss:
                break
            out: list[int] = []
            i, n = 0, len(ids)
            while i < n:
                if i + 1 < n and rank.get(keys[i]) == best:
                    out.append(best)
                    i += 2
                else:
                    out.append(ids[i])
                    i += 1
            ids = out
        return ids

    def _bpe_long(self, data: bytes) -> list[int]:
        """Heap + linked list: O(n log n) for pre-tokens of any length."""
        rank = self._rank
        n = len(data)
        sym = list(data)
        nxt = list(range(1, n + 1))
        prv = list(range(-1, n - 1))
        heap = [(r, i) for i in range(n - 1) if (r := rank.get((sym[i] << 16) | sym[i + 1]))]
        heapq.heapify(heap)
        while heap:
            r, i = heapq.heappop(heap)
            j = nxt[i]
            if sym[i] < 0 or j >= n or rank.get((sym[i] << 16) | sym[j]) != r:
                continue  # stale: node merged away or its pair changed
            sym[i] = r
            sym[j] = -1
            nxt[i] = k = nxt[j]
            if k < n:
                prv[k] = i
                nr = rank.get((r << 16) | sym[k])
                if nr:
                    heapq.heappush(heap, (nr, i))
            p = prv[i]
            if p >= 0:
                pr = rank.get((sym[p] << 16) | r)
                if pr:
                    heapq.heappush(heap, (pr, p))
        return [s for s in sym if s >= 0]

    def _encode_ordinary(self, text: str, out: list[int]) -> None:
        cache = self._cache
        for piece in self._split_re.findall(text):
            ids = cache.get(piece)
            if ids is None:
                ids = self._bpe(piece.encode("utf-8"))
                if len(cache) >= _CACHE_MAX:
                    cache.clear()
                cache[piece] = ids
            out += ids

    def _allowed(self, allowed_special: AllowedSpecial, add_special_tokens: bool) -> frozenset[str]:
        if add_special_tokens or allowed_special == "all":
            return frozenset(self.special_to_id)
        if isinstance(allowed_special, str):
            raise TypeError(
                f"allowed_special must be 'all' or a set of special tokens, got {allowed_special!r}; "
                f"wrap a single token in a set, e.g. allowed_special={{{allowed_special!r}}}"
            )
        allowed = frozenset(allowed_special)
        unknown = allowed - self.special_to_id.keys()
        if unknown:
            raise ValueError(
                f"allowed_special contains {sorted(unknown)}, which are not special tokens; "
                f"choose from {list(self.special_to_id)}"
            )
        return allowed

    def encode(
        self,
        text: str,
        allowed_special: AllowedSpecial = frozenset(),
        add_special_tokens: bool = False,
    ) -> list[int]:
        """Encode ``text``; special-token strings are ordinary bytes unless allowed.

        Opt in only at trusted call sites: ``allowed_special={"<|bos|>"}``,
        ``allowed_special="all"``, or ``add_special_tokens=True`` (all). Never
        adds BOS/EOS by itself.
        """
        if not isinstance(text, str):
            raise TypeError(f"encode() takes str, got {type(text).__name__}; decode bytes first")
        allowed = self._allowed(allowed_special, add_special_tokens)
        out: list[int] = []
        if not allowed:
            self._encode_ordinary(text, out)
            return out
        splitter = self._special_res.get(allowed)
        if splitter is None:
            alts = "|".join(regex.escape(s) for s in sorted(allowed, key=lambda s: (-len(s), s)))
            splitter = self._special_res[allowed] = regex.compile(f"({alts})")
        for i, seg in enumerate(splitter.split(text)):
            if i % 2:
                out.append(self.special_to_id[seg])
            elif seg:
                self._encode_ordinary(seg, out)
        return out

    def encode_ordinary(self, text: str) -> list[int]:
        """Encode untrusted text: every special string is plain bytes."""
        return self.encode(text)

    # ---------------------------------------------------------------- decoding
    def decode_bytes(self, ids: Iterable[int]) -> bytes:
        """The exact bytes of ``ids`` (specials as their UTF-8 strings)."""
        table = self._table
        ids = list(ids)
        try:
            if ids and (min(ids) < 0 or max(ids) >= len(table)):
                bad = next(i for i in ids if not 0 <= i < len(table))
                raise ValueError(f"token id {bad} is out of range: valid ids are 0..{len(table) - 1}")
            return b"".join([table[i] for i in ids])
        except TypeError:
            bad = next(i for i in ids if not isinstance(i, int))
            raise TypeError(f"token ids must be int, got {bad!r}") from None

    def decode(self, ids: Iterable[int]) -> str:
        """Decode to text; invalid UTF-8 becomes U+FFFD (use ``decode_bytes`` to be exact)."""
        return self.decode_bytes(ids).decode("utf-8", errors="replace")

    # ------------------------------------------------------------- persistence
    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the versioned JSON artifact atomically."""
        _artifact.save(self, path)

    @classmethod
    def load(cls, path: str | os.PathLike[str], *, allow_engine_mismatch: bool = False) -> StackTokenizer:
        """Load and validate an artifact; ``ArtifactError`` names any problem."""
        return _artifact.load(cls, path, allow_engine_mismatch=allow_engine_mismatch)

    @property
    def fingerprint(self) -> str:
        """sha256 of the canonical form (format, vocab, pattern, merges, specials)."""
        return _artifact.fingerprint(self)

    def __repr__(self) -> str:
        return (
            f"StackTokenizer(name={self.name!r}, vocab_size={self.vocab_size}, "
            f"merges={len(self.merges)}, specials={len(self.special_to_id)})"
        )


def shipped_artifact_path() -> Path:
    """The frozen artifact that ships inside the package."""
    return Path(__file__).resolve().parent / "data" / "stack100m-32768.json"


def load_tokenizer(
    path: str | os.PathLike[str] | None = None, *, allow_engine_mismatch: bool = False
) -> StackTokenizer:
    """Load ``path``, or the shipped ``stack100m-32768`` artifact when ``None``."""
    target = shipped_artifact_path() if path is None else path
    return StackTokenizer.load(target, allow_engine_mismatch=allow_engine_mismatch)
