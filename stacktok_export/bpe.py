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

How encode stays fast in pure Python (every path is checked against the
textbook rule by ``tests/test_bpe_paths.py``): long texts are cut into lines at
proven pre-token boundaries and repeated lines come from a line cache; each
distinct new pre-token is merged once (short ones together in numpy,
``bpe_batch.py``; long ones in ``str.replace`` passes, then a heap) and cached.
``benchmarks/bench_encode.py`` profiles where the time goes.

Why this one module runs past 500 lines (the house limit): it is one class, ``StackTokenizer``,
banner-split like tiktoken's ``core.py`` (encoding / decoding / the fast paths / private), and
its fast paths share the caches and tables of one instance; split across files they would
reach into each other's private state. The pieces that stand alone already live elsewhere
(``bpe_batch.py``, ``pretokenize.py``, ``artifact.py``, ``textbook.py``).

Out of scope: normalization (none is applied), BPE dropout, and streaming
decode -- ``decode_bytes`` is exact; holding back partial UTF-8 is the
caller's job.
"""

from __future__ import annotations

import bisect
import heapq
import itertools
import operator
import os
import re
import warnings
from collections.abc import Callable, Collection, Iterable
from typing import TYPE_CHECKING

import regex

from . import artifact as _artifact
from . import vocab as _vocab
from .api import EncodingAPI
from .artifact import shipped_artifact_path  # re-exported here; its home is artifact.py
from .pretokenize import LLAMA3_PATTERN, compile_pattern, isolated_split
from .trainer import ProgressFn, count_pretokens, default_workers, train_merges

if TYPE_CHECKING:
    from .bpe_batch import PairRanks
    from .bpe_long import HardCuts

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
_CACHE_MAX = 1 << 18  # cached pre-tokens before the cache is cleared
_MISS = 1 << 62  # rank of a pair that never merges (above every packed rank, see _set_vocab)
_ID = (1 << 31) - 1  # a rank value's low 31 bits are the merged id
_BATCH = 200  # distinct new pre-tokens from which encode() merges short ones in numpy (bpe_batch)
_WINDOW = 1 << 17  # chunks of a long pre-token (see _bpe_long) looked up and merged at once
_BATCH_BYTES = 256  # longest pre-token merged in the numpy batch (one round per distinct rank)
_LINE_END = re.compile(r"\n(?=[ \t]*[!-~])")  # cuts that are pre-token boundaries (see _encode_lines)
_LINES_FROM = 1 << 16  # shorter texts skip the line cache (its bookkeeping costs ~5% there)
_LINE_MAX = 256  # longest line kept in the line cache
_LINES_HIT = 0.5  # share of a text's characters in cached lines below which it goes by pieces
_LINES_CHARS = 1 << 24  # characters of distinct lines remembered before the line cache starts over


class StackTokenizer(EncodingAPI):
    """Byte-level BPE with a fixed id layout; see the module docstring."""

    def __init__(self, pattern: str = SPLIT_PATTERN, *, name: str = "stacktok") -> None:
        self.name = name
        self.format = _artifact.FORMAT
        self.pattern = pattern
        self.patterns: tuple[str, ...] = (pattern,)
        self._split_re = compile_pattern(pattern)
        self._split_res = (self._split_re,)
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

    def _set_vocab(
        self,
        *,
        table: list[bytes],
        merges: list[tuple[int, int]],
        results: list[int],
        special_to_id: dict[str, int],
        patterns: tuple[str, ...],
        ignore_merges: bool,
        roles: dict[str, int],
        add_bos: bool,
        add_eos: bool,
        chat_template: str | None,
        in_text: frozenset[str],
    ) -> None:
        """Install a validated v2 vocabulary (see ``vocab.build``)."""
        self.format = _vocab.FORMAT_V2
        self.merges = merges
        self.special_to_id = special_to_id
        self.patterns, self.pattern = patterns, patterns[0]
        self._split_res = tuple(compile_pattern(p) for p in patterns)
        self._split_re = self._split_res[0]
        self.ignore_merges, self.roles, self.in_text = ignore_merges, roles, in_text
        self.add_bos, self.add_eos, self.chat_template = add_bos, add_eos, chat_template
        self._build(table, results)

    def _build(self, table: list[bytes], results: list[int]) -> None:
        """The encoder's tables from the id table and each merge's result id.

        A pair's rank value is the merged id itself while result ids grow with the rank (v1,
        and most sources), else ``rank << 31 | id``: either way the lowest value is the
        lowest rank and ``value & _ID`` is the id. Pair keys are ``a << shift | b``.
        """
        self._table = table
        self.id_to_special = {i: s for s, i in self.special_to_id.items()}
        n = len(table)
        self._shift = sh = max(16, (n - 1).bit_length())
        monotone = n <= 1 << 30 and all(x < y for x, y in zip(results, results[1:]))
        self._rank: dict[int, int] = {}
        for r, ((a, b), t) in enumerate(zip(self.merges, results)):
            self._rank[(a << sh) | b] = t if monotone else (r << 31) | t
        self._packed = not monotone
        plain = {t: i for i, t in enumerate(table) if i not in self.id_to_special}
        self.byte_ids: list[int | None] = [plain.get(bytes([b])) for b in range(NUM_BYTES)]
        # bytes without a token: dropped from every pre-token before merging (the source's rule)
        self.missing_bytes = bytes(b for b, i in enumerate(self.byte_ids) if i is None)
        self._drop = self.missing_bytes or None
        identity = self.byte_ids == list(range(NUM_BYTES))
        self._byte_map = None if identity else self.byte_ids
        self._translate = (
            None
            if identity
            else {
                b: None if i is None else chr(i)
                for b, i in enumerate(self.byte_ids)
                if i is None or i < 0x110000
            }
        )
        self._whole = plain if self.ignore_merges else None
        unsafe = _vocab.unsafe_ranks(self.merges, results, n)
        self._unsafe = frozenset(self._rank[(a << sh) | b] for a, b in (self.merges[r] for r in unsafe))
        self._wide = n > 0x110000  # ids past chr()'s range: no str passes
        # the same ranks keyed by two characters (one per id), for the str passes of _bpe_long
        if self._wide:
            self._pair_rank, self._rank_pair = {}, {}
        else:
            mask = (1 << sh) - 1
            self._pair_rank = {chr(k >> sh) + chr(k & mask): r for k, r in self._rank.items()}
            self._rank_pair = {r: q for q, r in self._pair_rank.items()}
        self._line_cache_ok = _vocab.is_llama3(self.patterns)  # the cuts are proven for this split only
        self._clear_caches()
        self._pair_ranks: PairRanks | None = None  # numpy form of _rank, built on first batch
        self._results = results  # the id each merge makes (for the hard cuts of _bpe_long)
        self._cuts: HardCuts | None = None  # built on the first long pre-token
        self._special_res: dict[frozenset[str], regex.Pattern[str]] = {}

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
        a, b = self.merges[rank]
        return self._rank[(a << self._shift) | b] & _ID

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
        if self._whole is not None and data in self._whole:
            return [self._whole[data]]  # ignore_merges: a whole-token pre-token is that token
        if len(data) <= _SHORT:
            return self._bpe_short(self._ids(data))
        return self._bpe_long(data)

    def _ids(self, data: bytes) -> list[int]:
        if self._drop is not None:
            data = data.translate(None, self._drop)
        bm = self._byte_map
        return list(data) if bm is None else list(map(bm.__getitem__, data))

    def _bpe_merges(self, data: bytes) -> list[int]:
        """Merge-list BPE of bytes that are not a whole pre-token (no ``ignore_merges`` rule, no cuts)."""
        if len(data) <= _SHORT:
            return self._bpe_short(self._ids(data))
        if self._wide:
            return self._bpe_heap(self._ids(data))
        return self._bpe_passes(data)

    def _bpe_short(self, ids: list[int]) -> list[int]:
        """Merge the leftmost lowest-rank pair, one at a time; ``min``/``index`` run in C.

        Keeps one rank per adjacent pair and updates only the two pairs around
        each merge: O(n) C work per merge, cheapest for short pre-tokens.
        """
        get = self._rank.get
        miss = _MISS
        sh = self._shift
        ranks = [get((a << sh) | b, miss) for a, b in zip(ids, ids[1:])]
        while ranks:
            r = min(ranks)
            if r == miss:
                break
            i = ranks.index(r)
            ids[i] = t = r & _ID
            del ids[i + 1]
            del ranks[i]
            if i < len(ranks):
                ranks[i] = get((t << sh) | ids[i + 1], miss)
            if i:
                ranks[i - 1] = get((ids[i - 1] << sh) | t, miss)
        return ids

    def _bpe_long(self, data: bytes) -> list[int]:
        """Long pre-tokens: cut where no merge can join (:mod:`.bpe_long`), each chunk merged once.

        Chunks are cached by their bytes; many new ones merge together in numpy. A
        pre-token without a cut goes to :meth:`_bpe_merges` whole.
        """
        if self._cuts is None:
            from .bpe_long import HardCuts

            self._cuts = HardCuts(self._table[t] for t in self._results)
        chunks = self._cuts.split(data)
        if len(chunks) == 1:
            return self._bpe_merges(data)
        cache = self._chunks
        out: list[int] = []
        for at in range(0, len(chunks), _WINDOW):  # bounded working sets keep the cost linear
            part = chunks[at : at + _WINDOW]
            _fill(cache, part, self._merge_chunks)
            out += itertools.chain.from_iterable(map(cache.__getitem__, part))
        return out

    def _merge_chunks(self, chunks: Collection[bytes], cache: dict[bytes, list[int]]) -> None:
        """BPE of distinct chunks into ``cache``: the short ones in one numpy batch when there are many."""
        if len(chunks) < _BATCH:
            for data in chunks:
                cache[data] = self._bpe_merges(data)
            return
        from . import bpe_batch

        if self._pair_ranks is None:
            self._pair_ranks = self._batch_ranks(bpe_batch)
        short = [data for data in chunks if len(data) <= _BATCH_BYTES]
        for data in chunks:
            if len(data) > _BATCH_BYTES:
                cache[data] = self._bpe_merges(data)
        bpe_batch.batch_bpe(short, short, self._pair_ranks, cache, finish=self._bpe_short)

    def _bpe_passes(self, data: bytes, *, batch_work: int | None = None) -> list[int]:
        """Long sequences without a cut: whole-string passes while they are cheap, then the heap.

        Each id is one character of a ``str``; the lowest-rank pair present is
        merged everywhere at once by ``str.replace`` (leftmost, non-overlapping:
        the BPE rule) and the new pairs around the merged id are found with
        ``str.split``. A pass costs O(length) in C, so once the passes have
        read ``batch_work`` characters (default 32 per input byte) the rest is
        finished by :meth:`_bpe_heap`; the total stays O(n log n).
        """
        s = data.decode("latin-1")
        if self._translate is not None:
            s = s.translate(self._translate)
        budget = 32 * len(s) if batch_work is None else batch_work
        pair_rank, rank_pair, unsafe = self._pair_rank, self._rank_pair, self._unsafe
        get = pair_rank.get
        heap = list(set(map(get, map(operator.add, s, s[1:]))) - {None})
        heapq.heapify(heap)
        while heap:
            if budget < len(s):
                return self._bpe_heap(list(map(ord, s)))
            r = heapq.heappop(heap)
            pair = rank_pair[r]
            budget -= len(s)
            if pair not in s:
                continue  # stale: an earlier merge consumed every occurrence
            if r in unsafe:  # may make a lower-rank pair: one occurrence at a time from here
                return self._bpe_heap(list(map(ord, s)))
            c = chr(r & _ID)
            s = s.replace(pair, c)
            budget -= 2 * len(s)
            for q in _pairs_around(s, c):
                nr = get(q)
                if nr is not None:
                    heapq.heappush(heap, nr)
        return list(map(ord, s))

    def _bpe_heap(self, sym: list[int]) -> list[int]:
        """Heap + linked list: O(n log n) for sequences of any length."""
        rank = self._rank
        sh = self._shift
        n = len(sym)
        nxt = list(range(1, n + 1))
        prv = list(range(-1, n - 1))
        heap = [(r, i) for i in range(n - 1) if (r := rank.get((sym[i] << sh) | sym[i + 1])) is not None]
        heapq.heapify(heap)
        while heap:
            r, i = heapq.heappop(heap)
            j = nxt[i]
            if sym[i] < 0 or j >= n or rank.get((sym[i] << sh) | sym[j]) != r:
                continue  # stale: node merged away or its pair changed
            sym[i] = t = r & _ID
            sym[j] = -1
            nxt[i] = k = nxt[j]
            if k < n:
                prv[k] = i
                nr = rank.get((t << sh) | sym[k])
                if nr is not None:
                    heapq.heappush(heap, (nr, i))
            p = prv[i]
            if p >= 0:
                pr = rank.get((sym[p] << sh) | t)
                if pr is not None:
                    heapq.heappush(heap, (pr, p))
        return [s for s in sym if s >= 0]

    def _encode_ordinary(self, text: str, out: list[int]) -> None:
        """Encode through the line cache when the text is long enough to profit, else by pieces."""
        if len(text) < _LINES_FROM or not self._line_cache_ok:
            self._encode_pieces(text, out)
            return
        parts = _LINE_END.split(text)
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

    def _encode_lines(self, text: str, parts: list[str], out: list[int]) -> None:
        """Cached lines straight from the line cache; all other lines split in one pass.

        ``parts`` is the text cut by ``_LINE_END``: every cut is a pre-token boundary of
        the Llama-3 pattern (after a newline, the white space run that follows holds no
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
        _fill(self._cache, pieces, self._bpe_into)
        return self._cache

    def _bpe_into(self, pieces: Collection[str], cache: dict[str, list[int]]) -> None:
        """BPE of many distinct pre-tokens: short ones together in numpy when there are many."""
        bpe = self._bpe
        if len(pieces) < _BATCH:
            for piece in pieces:
                cache[piece] = bpe(piece.encode("utf-8"))
            return
        from . import bpe_batch

        if self._pair_ranks is None:
            self._pair_ranks = self._batch_ranks(bpe_batch)
        whole = self._whole
        short: list[str] = []
        datas: list[bytes] = []
        for piece in pieces:
            data = piece.encode("utf-8")
            if whole is not None and data in whole:
                cache[piece] = [whole[data]]
            elif self._drop is not None and len(data.translate(None, self._drop)) != len(data):
                cache[piece] = bpe(data)  # a byte without a token: dropped on the one-piece path
            elif len(data) <= _BATCH_BYTES:
                short.append(piece)
                datas.append(data)
            else:
                cache[piece] = bpe(data)
        bpe_batch.batch_bpe(short, datas, self._pair_ranks, cache, finish=self._bpe_short)

    def _batch_ranks(self, bpe_batch):  # noqa: ANN001, ANN202 -- the lazily imported module
        """The numpy pair table: rank values as they are, or ranks + result ids when packed."""
        import numpy as np

        n = len(self._rank)
        keys = np.fromiter(self._rank.keys(), dtype=np.int64, count=n)
        values = np.fromiter(self._rank.values(), dtype=np.int64, count=n)
        unsafe = np.fromiter(self._unsafe, dtype=np.int64, count=len(self._unsafe))
        results = None
        if self._packed:
            ranks = values >> 31
            results = np.empty(n, dtype=np.int64)
            results[ranks] = values & _ID
            values, unsafe = ranks, unsafe >> 31
        return bpe_batch.PairRanks(
            keys,
            values,
            shift=self._shift,
            byte_ids=None if self._byte_map is None else [-1 if i is None else i for i in self._byte_map],
            results=results,
            unsafe=unsafe,
        )

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


def _fill(cache: dict, keys: list, merge: Callable[[set, dict], None]) -> None:
    """Add the ``keys`` missing from ``cache`` by ``merge(new, cache)``; clear it first when full."""
    new = set(keys).difference(cache)
    if new:
        if len(cache) + len(new) > _CACHE_MAX:
            cache.clear()
            new = set(keys)
        merge(new, cache)


def _pairs_around(s: str, c: str) -> set[str]:
    """Every two-character pair of ``s`` that contains ``c`` (C-speed, via ``str.split``)."""
    parts = s.split(c)
    n = len(parts) - 1
    pairs = set(map(operator.add, map(_LAST, filter(None, parts[:-1])), itertools.repeat(c, n)))
    pairs.update(map(operator.add, itertools.repeat(c, n), map(_FIRST, filter(None, parts[1:]))))
    if c + c in s:
        pairs.add(c + c)
    return pairs


_FIRST, _LAST = operator.itemgetter(0), operator.itemgetter(-1)


def load_tokenizer(
    path: str | os.PathLike[str] | None = None, *, allow_engine_mismatch: bool = False
) -> StackTokenizer:
    """Load ``path``, or the shipped ``stack100m-32768`` artifact when ``None``."""
    target = shipped_artifact_path() if path is None else path
    return StackTokenizer.load(target, allow_engine_mismatch=allow_engine_mismatch)
