"""The reference tokenizer: byte-level BPE encode/decode over a frozen merge list.

Id layout of our own artifacts (v1, fixed for the life of a model; an imported v2 reference
-- ``vocab.py`` -- has any byte-level BPE's layout instead)::

    0 .. 255                  raw byte values (id == byte)
    256 .. 256+M-1            learned merges in rank order (merge i -> id 256+i)
    256+M .. vocab_size-1     <|unused_N|> fillers (only on a training shortfall),
                              then the special tokens, always on the top ids

Encoding applies the lowest-id merge first inside each pre-token (leftmost
occurrence first), which is what tiktoken's rank merging and Hugging Face's
merge-list BPE compute for a self-reachable vocabulary. Special-token strings
in text are ordinary bytes unless the call site opts in.

How encode stays fast in pure Python (every path is checked against the
textbook rule by ``tests/test_bpe_paths.py``): long texts are cut into lines at
proven pre-token boundaries and repeated lines come from a line cache; each
distinct new pre-token is merged once (short ones together in numpy,
``bpe_batch.py``; long ones cut where no merge can join, ``bpe_long.py``, then
``str.replace`` passes or a heap) and cached.
``benchmarks/bench_encode.py`` profiles where the time goes.

One class, three files: ``tables.py`` builds what encode reads (v1 from its merges, v2 from
``vocab.build``), ``merging.py`` holds the merge paths, ``api.py`` the tiktoken-shaped public
surface; this module holds the id layout, training, splitting and the caches, decoding and
persistence. They are mixins of one class because they share one instance's tables and caches.

Out of scope: normalization (none is applied), BPE dropout, and streaming
decode -- ``decode_bytes`` is exact; holding back partial UTF-8 is the
caller's job.
"""

from __future__ import annotations

import bisect
import itertools
import os
import warnings
from collections.abc import Collection, Iterable, Sequence
from typing import Any

from . import artifact as _artifact
from . import vocab as _vocab
from ._gc import paused as _gc_paused
from .api import EncodingAPI
from .artifact import shipped_artifact_path  # re-exported here; its home is artifact.py
from .ascii_split import LINE_CUT, fast_split, windows
from .merging import _BATCH, _BATCH_BYTES, MergePaths, _fill
from .pretokenize import LLAMA3_PATTERN, compile_pattern, isolated_split
from .tables import VocabTables
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

_SHORT = 48  # single pre-tokens up to this many bytes merge in _bpe_short, longer in _bpe_long
_LINES_FROM = 1 << 16  # shorter texts skip the line cache (its bookkeeping costs ~5% there)
_MANY_CHARS = 1 << 22  # characters of a batch whose new pre-tokens are merged together
_LINE_MAX = 256  # longest line kept in the line cache
_LINES_HIT = 0.5  # share of a text's characters in cached lines below which it goes by pieces
_LINES_CHARS = 1 << 24  # characters of distinct lines remembered before the line cache starts over
_WINDOW_CHARS = 1 << 18  # characters of a long text encoded at a time (ascii_split.windows)


class StackTokenizer(EncodingAPI, VocabTables, MergePaths):
    """Byte-level BPE with a fixed id layout; see the module docstring."""

    def __init__(self, pattern: str = SPLIT_PATTERN, *, name: str = "stacktok") -> None:
        self.name = name
        self.format = _artifact.FORMAT
        self.pattern = pattern
        self.patterns: tuple[str, ...] = (pattern,)
        self._split_re = compile_pattern(pattern)
        self._split_res = (self._split_re,)
        self._fast_split = fast_split(pattern, self._split_re)
        self.merges: list[tuple[int, int]] = []
        self.special_to_id: dict[str, int] = {}
        self.in_text: frozenset[str] = frozenset()
        self.roles: dict[str, int] = {}
        self.add_bos = self.add_eos = self.ignore_merges = False
        self.chat_template: str | None = None
        self.engine: dict[str, object] = {}
        self._index()

    # ------------------------------------------------------------------ layout
    def _index(self, specials: Iterable[str] = ()) -> None:
        """Rebuild every derived table of the v1 layout from ``merges`` and ``specials``."""
        table = [bytes([i]) for i in range(NUM_BYTES)]
        for a, b in self.merges:
            table.append(table[a] + table[b])
        results = list(range(NUM_BYTES, len(table)))
        nid = len(table)
        self.special_to_id = {}
        for s in specials:
            self.special_to_id[s] = nid
            table.append(s.encode("utf-8"))
            nid += 1
        self.format = _artifact.FORMAT
        self.roles = _vocab.v1_roles(self.special_to_id)
        self._build(table, results)

    def _clear_caches(self) -> None:
        """Forget every cached encoding (pre-tokens, lines, lines seen once)."""
        self._cache: dict[str, list[int]] = {}
        self._lines: dict[str, list[int]] = {}  # line (without its newline) -> ids of line + "\n"
        self._seen_lines: set[str] = set()
        self._seen_chars = 0
        self._chunks: dict[bytes, list[int]] = {}  # chunk of a long pre-token (see _bpe_long) -> ids

    @property
    def vocab_size(self) -> int:
        return len(self._table)

    @property
    def merge_id(self) -> dict[tuple[int, int], int]:
        """``{(left, right): merged id}`` (built on demand)."""
        return {pair: self.merge_result(i) for i, pair in enumerate(self.merges)}

    def merge_result(self, rank: int) -> int:
        """The id merge ``rank`` produces."""
        return self._results[rank]

    def id_bytes(self) -> list[bytes]:
        """The bytes of every id, in id order (special ids: the special's UTF-8 string)."""
        return list(self._table)

    def special_token_id(self, token: str) -> int:
        """The id of special token ``token``; ``KeyError`` lists the known ones."""
        try:
            return self.special_to_id[token]
        except KeyError:
            known = ", ".join(self.special_to_id)
            raise KeyError(f"{token!r} is not a special token of this tokenizer ({known})") from None

    id = special_token_id

    def _role(self, role: str) -> int:
        try:
            return self.roles[role]
        except KeyError:
            raise KeyError(f"this tokenizer has no {role} token (its roles: {sorted(self.roles)})") from None

    @property
    def bos_id(self) -> int:
        return self._role("bos")

    @property
    def eos_id(self) -> int:
        return self._role("eos")

    @property
    def pad_id(self) -> int:
        return self._role("pad")

    def token_bytes(self) -> list[bytes]:
        """v1: the bytes of every non-special id (0 .. 256+len(merges)-1); v2: of every id."""
        if self.format != _artifact.FORMAT:
            return list(self._table)
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
        if vocab_size > _artifact.MAX_VOCAB:
            raise ValueError(f"vocab_size={vocab_size} is over {_artifact.MAX_VOCAB}: ids are 16-bit")
        _artifact.check_specials(list(special_tokens))
        counts = count_pretokens(docs, self.pattern, workers=workers or default_workers())
        word_counts = {s.encode("utf-8"): c for s, c in counts.items()}
        del counts
        self.merges = train_merges(word_counts, num_merges, progress=progress, consume=True)
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
        if self._reach is not None and data in self._reach:
            return [self._reach[data]]  # a whole token by the source's rule or by its own BPE
        if self._drop is not None:  # bytes without a token leave before any path sees the data
            data = data.translate(None, self._drop)
        if len(data) <= _SHORT:
            return self._bpe_short(self._ids(data))
        return self._bpe_long(data)

    def _ids(self, data: bytes) -> list[int]:
        """The ids of ``data``'s bytes (no byte of it is missing: ``_bpe`` dropped those)."""
        bm = self._byte_map
        return list(data) if bm is None else list(map(bm.__getitem__, data))

    def _bpe_merges(self, data: bytes) -> list[int]:
        """Merge-list BPE of bytes that are not a whole pre-token (no ``ignore_merges`` rule, no cuts)."""
        if len(data) <= _SHORT:
            return self._bpe_short(self._ids(data))
        if self._wide:
            return self._bpe_heap(self._ids(data))
        return self._bpe_passes(data)

    def _encode_ordinary(self, text: str, out: list[int]) -> None:
        """Encode through the line cache when the text is long enough to profit, else by pieces.

        A text of more than two windows goes a window at a time (cut where the Llama-3 or Qwen2
        split cuts anyway): every step's working set is bounded, so 10x the text costs 10x the time
        (a 10 MB base64 line split and merged whole cost 17x a 1 MB one).
        """
        if len(text) > 2 * _WINDOW_CHARS and self._line_cache_ok:
            for window in windows(text, _WINDOW_CHARS):
                self._encode_window(window, out)
            return
        self._encode_window(text, out)

    def _encode_window(self, text: str, out: list[int]) -> None:
        if len(text) < _LINES_FROM or not self._line_cache_ok:
            self._encode_pieces(text, out)
            return
        parts = LINE_CUT.split(text)
        seen = self._seen_lines
        if seen.isdisjoint(parts):
            self._encode_pieces(text, out)
        else:
            self._encode_lines(text, parts, out)
        fresh = set(parts).difference(seen)
        self._seen_chars += sum(map(len, fresh))
        if self._seen_chars > _LINES_CHARS:  # bound the memory: start over with this text's lines
            seen.clear()
            self._lines.clear()
            fresh = set(parts)
            self._seen_chars = sum(map(len, fresh))
        seen.update(fresh)

    def _encode_ordinary_many(self, texts: Sequence[str]) -> list[list[int]]:
        """``_encode_ordinary`` of each text, the new pre-tokens of a batch merged together.

        Texts are taken in groups of about ``_MANY_CHARS`` characters: each group is split, the
        pre-tokens the cache lacks are merged in one :meth:`_bpe_into` call (the numpy lock-step
        for short ones: one call per text would merge each text's few new pre-tokens one by
        one), and the ids are read from the cache. Texts long enough for the line cache take
        ``_encode_ordinary`` as they are.
        """
        outs: list[list[int]] = []
        group: list[str] = []

        def flush() -> None:
            split = {t: self._split(t) for t in dict.fromkeys(group)}
            cache = self._cached([piece for pieces in split.values() for piece in pieces])
            for t in group:
                out: list[int] = []
                for piece in split[t]:
                    out += cache[piece]
                outs.append(out)
            group.clear()

        size = 0
        for text in texts:
            if len(text) >= _LINES_FROM and self._line_cache_ok:
                flush()  # the order of the outputs is the order of the texts
                out: list[int] = []
                self._encode_ordinary(text, out)
                outs.append(out)
                size = 0
                continue
            group.append(text)
            size += len(text)
            if size >= _MANY_CHARS:
                flush()
                size = 0
        flush()
        return outs

    def _encode_lines(self, text: str, parts: list[str], out: list[int]) -> None:
        """Cached lines straight from the line cache; all other lines split in one pass.

        ``parts`` is the text cut by ``LINE_CUT``: every cut is a pre-token boundary of
        the Llama-3 and Qwen2 patterns (after a newline, the white space run that follows holds no
        newline and ends at a visible ASCII character), so each ``part + "\n"`` encodes on
        its own exactly as inside the text. A line is cached when it is seen again.
        """
        lines, seen = self._lines, self._seen_lines
        again = [p for p in dict.fromkeys(parts[:-1]) if p in seen and p not in lines and len(p) <= _LINE_MAX]
        if again:
            self._cache_lines(again)
        got = list(map(lines.get, parts[:-1]))
        got.append(None)  # the last part has no newline of its own: never cached
        if sum(len(p) for p, ids in zip(parts, got) if ids is not None) < _LINES_HIT * len(text):
            self._encode_pieces(text, out)  # mostly new lines: not worth the bookkeeping
            return
        pieces, cache, stops = self._line_pieces([p for p, ids in zip(parts, got) if ids is None])
        start = 0
        ranges = iter(stops)
        for ids in got:
            if ids is None:
                stop = next(ranges)
                for piece in pieces[start:stop]:
                    out += cache[piece]
                start = stop
            else:
                out += ids

    def _cache_lines(self, new_lines: list[str]) -> None:
        """Encode ``line + "\n"`` for every line in one pass and cache each line's ids."""
        pieces, cache, stops = self._line_pieces([*new_lines, ""])
        get = cache.__getitem__
        lines = self._lines
        for line, start, stop in zip(new_lines, [0, *stops], stops):
            lines[line] = list(itertools.chain.from_iterable(map(get, pieces[start:stop])))

    def _line_pieces(self, chunks: list[str]) -> tuple[list[str], dict[str, list[int]], list[int]]:
        """Pre-tokens of ``"\n".join(chunks)`` (all cached) and where each chunk's pre-tokens stop.

        Any selection of the cut lines, joined in order, splits exactly like the lines one
        by one (every joint is again a cut). Chunk ``i`` owns its newline; the pre-token
        ends are bisected at the chunk ends (always pre-token boundaries).
        """
        pieces = self._split("\n".join(chunks))
        cache = self._cached(pieces)
        piece_ends = list(itertools.accumulate(map(len, pieces)))
        chunk_ends = list(itertools.accumulate(map(len, chunks), lambda acc, n: acc + n + 1, initial=0))[1:]
        chunk_ends[-1] -= 1  # the last chunk has no newline after it
        stops = [i + 1 for i in map(bisect.bisect_left, itertools.repeat(piece_ends), chunk_ends)]
        return pieces, cache, stops

    def _encode_pieces(self, text: str, out: list[int]) -> None:
        """Split, BPE each distinct new pre-token once, then concatenate from the cache."""
        pieces = self._split(text)
        cache = self._cached(pieces)
        for piece in pieces:
            out += cache[piece]

    def _split(self, text: str) -> list[str]:
        """Pre-tokens: each pattern an isolated split (matches and the text between them)."""
        if self._fast_split is not None:  # the Llama-3 or Qwen2 pattern alone: ASCII stretches by ``re``
            return self._fast_split(text)
        pieces = [text]
        for split_re in self._split_res:
            out: list[str] = []
            covers = split_re.pattern == LLAMA3_PATTERN  # matches every character: findall is the split
            for piece in pieces:
                found = split_re.findall(piece)
                if not covers and sum(map(len, found)) != len(piece):  # text between matches
                    found = isolated_split(split_re, piece)
                out += found
            pieces = out
        return pieces

    def _cached(self, pieces: list[str]) -> dict[str, list[int]]:
        """The pre-token cache, holding every one of ``pieces`` (cleared first when full)."""
        with _gc_paused():  # a text with many new pre-tokens caches as many id lists
            _fill(self._cache, pieces, self._bpe_into)
        return self._cache

    def _bpe_into(self, pieces: Collection[str], cache: dict[str, list[int]]) -> None:
        """BPE of many distinct pre-tokens: short ones together in numpy when there are many."""
        keys = list(pieces)
        self._bpe_keyed(keys, [piece.encode("utf-8") for piece in keys], cache)

    def _bpe_keyed(self, keys: Sequence[Any], datas: Sequence[bytes], into: dict[Any, list[int]]) -> None:
        """``into[keys[j]] = _bpe(datas[j])`` for every ``j``, short ones together in numpy."""
        if len(keys) < _BATCH:
            for key, data in zip(keys, datas):
                into[key] = self._bpe(data)
            return
        from . import bpe_batch

        if self._pair_ranks is None:
            self._pair_ranks = self._batch_ranks(bpe_batch)
        self._batched += len(keys)
        if self._reach is None and self._batched >= len(self._table):
            self._reach = self._self_reachable()
        if self._reach is not None:  # whole tokens first, in C (a third of the pre-tokens)
            found = list(map(self._reach.get, datas))
            if found.count(None) < len(found):
                into.update((key, [t]) for key, t in zip(keys, found) if t is not None)
                rest = [t is None for t in found]
                keys, datas = list(itertools.compress(keys, rest)), list(itertools.compress(datas, rest))
        short, batch = keys, datas
        if self._drop is not None or (datas and max(map(len, datas)) > _BATCH_BYTES):
            short, batch = [], []
            for piece, data in zip(keys, datas):
                if self._drop is not None:
                    data = data.translate(None, self._drop)
                if not data:
                    into[piece] = []  # only bytes without a token
                elif len(data) <= _BATCH_BYTES:
                    short.append(piece)
                    batch.append(data)
                else:
                    into[piece] = self._bpe_long(data)
        bpe_batch.batch_bpe(short, batch, self._pair_ranks, into, finish=self._bpe_short)

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
    def from_vocab(cls, **vocabulary) -> StackTokenizer:  # noqa: ANN003 -- keyword-only, see vocab.build
        """Any byte-level BPE as a reference (``vocab.build``: tokens, merges, specials, patterns, ...).

        ``ArtifactError`` names whatever is inconsistent. Returns the v1 layout when the
        vocabulary is exactly ours, so its fingerprint is ours.
        """
        try:
            tok = _vocab.build(cls, **vocabulary)
        except _vocab.VocabError as exc:
            raise _artifact.ArtifactError(str(exc)) from None
        tok.engine = _artifact.current_engine()
        return tok

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


def load_tokenizer(
    path: str | os.PathLike[str] | None = None, *, allow_engine_mismatch: bool = False
) -> StackTokenizer:
    """Load ``path``, or the shipped ``stack100m-32768`` artifact when ``None``."""
    target = shipped_artifact_path() if path is None else path
    return StackTokenizer.load(target, allow_engine_mismatch=allow_engine_mismatch)
