"""The reference tokenizer: byte-level BPE encode/decode over a frozen merge list.

Id layout of our own artifacts (v1, fixed for the life of a model; an imported v2 reference
-- ``artifact/vocab.py`` -- has any byte-level BPE's layout instead)::

    0 .. 255                  raw byte values (id == byte)
    256 .. 256+M-1            learned merges in rank order (merge i -> id 256+i)
    256+M .. vocab_size-1     <|unused_N|> fillers (only on a training shortfall),
                              then the special tokens, always on the top ids

Encoding applies the lowest-id merge first inside each pre-token (leftmost occurrence first),
which is what tiktoken's rank merging and Hugging Face's merge-list BPE compute for a
self-reachable vocabulary. Special-token strings in text are ordinary bytes unless the call
site opts in (:mod:`.specials`). The public surface is tiktoken's ``Encoding`` (``encode``,
``encode_batch``, ``decode_single_token_bytes``, ``n_vocab``, ``eot_token``...), so code
written for tiktoken runs unchanged.

``encode(text)`` reads top to bottom in this file: the specials split out, then the text to
pre-tokens -- long texts cut into windows and lines at proven pre-token boundaries, repeated
lines from a line cache -- and each distinct new pre-token merged once and cached, by the
model this class is built on (:class:`~.model.BPEModel`: short pre-tokens together in numpy,
long ones cut where no merge can join, then ``str.replace`` passes or a heap). Every path is
checked against the textbook rule by ``tests/test_bpe_paths.py``;
``benchmarks/bench_encode.py`` profiles where the time goes. The tokenizer also builds itself
from an artifact's data (:meth:`StackTokenizer.load`, :meth:`StackTokenizer.from_vocab`) and
trains itself through the trainer (:meth:`StackTokenizer.train_from_iterable`).

Out of scope: normalization (none is applied), BPE dropout, streaming decode --
``decode_bytes`` is exact; holding back partial UTF-8 is the caller's job -- and tiktoken's
``decode_with_offsets`` / ``encode_with_unstable`` / ``encode_to_numpy``.
"""

from __future__ import annotations

import bisect
import itertools
import os
import warnings
from collections.abc import Collection, Iterable, Sequence

import regex

from ...artifact import artifact as _artifact
from ...artifact.artifact import ArtifactError, shipped_artifact_path
from ...artifact.vocab import FORMAT_V2, VocabError, Vocabulary, check
from ...chat.chat import CHAT_TEMPLATE
from ...split.ascii_split import LINE_CUT, fast_split, windows
from ...split.pretokenize import LLAMA3_PATTERN, compile_pattern, split_sequence
from ...trainer.trainer import ProgressFn, learn_merges
from ...util.gc import paused as _gc_paused
from . import specials as _specials
from .model import BPEModel, _fill, self_reachable
from .specials import NO_CHECK, NONE, SpecialSet
from .tables import NUM_BYTES

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
NUM_MERGES = VOCAB_SIZE - NUM_BYTES - len(SPECIAL_TOKENS)  # 32,503
SPLIT_PATTERN = LLAMA3_PATTERN

_LINES_FROM = 1 << 16  # shorter texts skip the line cache (its bookkeeping costs ~5% there)
_MANY_CHARS = 1 << 22  # characters of a batch whose new pre-tokens are merged together
_LINE_MAX = 256  # longest line kept in the line cache
_LINES_HIT = 0.5  # share of a text's characters in cached lines below which it goes by pieces
_LINES_CHARS = 1 << 24  # characters of distinct lines remembered before the line cache starts over
_WINDOW_CHARS = 1 << 18  # characters of a long text encoded at a time (ascii_split.windows)


class StackTokenizer(BPEModel):
    """Byte-level BPE with a fixed id layout; see the module docstring."""

    def __init__(self, pattern: str = SPLIT_PATTERN, *, name: str = "stacktok") -> None:
        self.name = name
        self.format = _artifact.FORMAT
        self._set_split((pattern,))
        self.merges: list[tuple[int, int]] = []
        self.special_to_id: dict[str, int] = {}
        self.in_text: frozenset[str] = frozenset()
        self.roles: dict[str, int] = {}
        self.add_bos = self.add_eos = self.ignore_merges = False
        self.chat_template: str | None = None
        self.engine: dict[str, object] = {}
        self._index()

    def _set_split(self, patterns: tuple[str, ...]) -> None:
        """The pre-tokenizer: each pattern an isolated split, in order (``regex``)."""
        self.patterns, self.pattern = patterns, patterns[0]
        self._split_res = tuple(compile_pattern(p) for p in patterns)
        self._split_re = self._split_res[0]
        self._fast_split = fast_split(patterns[0], self._split_re) if len(patterns) == 1 else None
        # the cuts (ascii_split.LINE_CUT, windows) are proven where the fast split serves: the
        # Llama-3 and Qwen2 splits alone
        self._line_cache_ok = self._fast_split is not None

    def _clear_caches(self) -> None:
        """Forget every cached encoding (pre-tokens, chunks, lines, lines seen once)."""
        super()._clear_caches()
        self._lines: dict[str, list[int]] = {}  # line (without its newline) -> ids of line + "\n"
        self._seen_lines: set[str] = set()
        self._seen_chars = 0
        self._special_res: dict[frozenset[str], regex.Pattern[str]] = {}  # see specials.splitter

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
        self.merges = learn_merges(docs, self.pattern, num_merges, workers=workers, progress=progress)
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
    def encode(
        self,
        text: str,
        *,
        allowed_special: SpecialSet = NONE,
        disallowed_special: SpecialSet = NO_CHECK,
        parse_special: bool = False,
        **removed: object,
    ) -> list[int]:
        """Encode ``text``; special-token strings are ordinary bytes unless allowed.

        Opt in only at trusted call sites: ``allowed_special={"<|bos|>"}``,
        ``allowed_special="all"`` or ``parse_special=True`` (all). ``disallowed_special=`` (a set,
        or ``"all"``: every special not allowed) raises ``ValueError`` when the text holds a
        listed special string, as tiktoken does -- a check for text that should carry none.
        Never adds BOS/EOS.
        """
        if removed:
            _specials.reject(removed)
        if not isinstance(text, str):
            raise TypeError(f"encode() takes str, got {type(text).__name__}; decode bytes first")
        split, banned = self._plan(allowed_special, disallowed_special, parse_special)
        _specials.refuse_banned(self._special_res, text, banned)
        out: list[int] = []
        if not split:
            self._encode_ordinary(text, out)
            return out
        for i, seg in enumerate(_specials.splitter(self._special_res, split).split(text)):
            if i % 2:
                out.append(self.special_to_id[seg])
            elif seg:
                self._encode_ordinary(seg, out)
        return out

    def encode_ordinary(self, text: str) -> list[int]:
        """Encode untrusted text: every special string is plain bytes (``in_text`` ones excepted)."""
        return self.encode(text)

    def encode_batch(
        self,
        texts: Sequence[str],
        *,
        num_threads: int = 8,
        allowed_special: SpecialSet = NONE,
        disallowed_special: SpecialSet = NO_CHECK,
        parse_special: bool = False,
    ) -> list[list[int]]:
        """``[encode(t, ...) for t in texts]``, the options checked once, the texts' new
        pre-tokens merged together (:meth:`_encode_ordinary_many`).

        ``num_threads`` is accepted for tiktoken's signature and must be a positive int, but
        the texts are encoded in this thread, in order: the encoder is pure Python (threads
        would share one GIL) and its caches belong to the instance, not to a thread.
        """
        _specials.check_threads(num_threads)
        split, banned = self._plan(allowed_special, disallowed_special, parse_special)
        texts = list(texts)
        for i, text in enumerate(texts):
            if not isinstance(text, str):
                raise TypeError(f"encode_batch() takes str items, got {type(text).__name__} at index {i}")
        for text in texts:
            _specials.refuse_banned(self._special_res, text, banned)
        cut = _specials.splitter(self._special_res, split).split if split else None
        segments = [cut(t) if cut else [t] for t in texts]
        encoded = iter(self._encode_ordinary_many([seg for segs in segments for seg in segs[::2] if seg]))
        outs = []
        for segs in segments:
            out: list[int] = []
            for i, seg in enumerate(segs):
                if i % 2:
                    out.append(self.special_to_id[seg])
                elif seg:
                    out += next(encoded)
            outs.append(out)
        return outs

    def encode_ordinary_batch(self, texts: Sequence[str], *, num_threads: int = 8) -> list[list[int]]:
        """``[encode_ordinary(t) for t in texts]`` (``num_threads`` as in :meth:`encode_batch`)."""
        return self.encode_batch(texts, num_threads=num_threads)

    def _plan(
        self, allowed_special: SpecialSet, disallowed_special: SpecialSet, parse_special: bool
    ) -> tuple[frozenset[str], frozenset[str]]:
        """The specials to split out of the text, and those whose presence raises (:mod:`.specials`)."""
        return _specials.plan(
            self.special_to_id, self.in_text, allowed_special, disallowed_special, parse_special
        )

    # -------------------------------------------------------------------- text
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
        """Pre-tokens: the Llama-3 or Qwen2 pattern alone by its fast split (ASCII stretches by
        ``re``), any other patterns each an isolated split in turn."""
        if self._fast_split is not None:
            return self._fast_split(text)
        return split_sequence(self._split_res, text)

    def _cached(self, pieces: list[str]) -> dict[str, list[int]]:
        """The pre-token cache, holding every one of ``pieces`` (cleared first when full)."""
        with _gc_paused():  # a text with many new pre-tokens caches as many id lists
            _fill(self._cache, pieces, self._bpe_into)
        return self._cache

    def _bpe_into(self, pieces: Collection[str], cache: dict[str, list[int]]) -> None:
        """BPE of many distinct pre-tokens: short ones together in numpy when there are many."""
        keys = list(pieces)
        self._bpe_keyed(keys, [piece.encode("utf-8") for piece in keys], cache)

    # ------------------------------------------------------------- persistence
    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the versioned JSON artifact atomically."""
        _artifact.save(self, path)

    @classmethod
    def from_vocab(cls, *, name: str = "imported", **vocabulary) -> StackTokenizer:  # noqa: ANN003 -- see vocab.check
        """Any byte-level BPE as a reference (``artifact.vocab.check``: tokens, merges, specials,
        patterns, ...). ``ArtifactError`` names whatever is inconsistent. Returns the v1 layout when
        the vocabulary is exactly ours, so its fingerprint is ours.
        """
        try:
            checked = check(**vocabulary)
        except VocabError as exc:
            raise ArtifactError(str(exc)) from None
        tok = cls._from_vocabulary(checked, name=name, as_v1=True)
        tok.engine = _artifact.current_engine()
        return tok

    @classmethod
    def load(cls, path: str | os.PathLike[str], *, allow_engine_mismatch: bool = False) -> StackTokenizer:
        """Load and validate an artifact; ``ArtifactError`` names any problem."""
        contents = _artifact.read(path, allow_engine_mismatch=allow_engine_mismatch)
        if contents.vocabulary is not None:
            tok = cls._from_vocabulary(contents.vocabulary, name=contents.name, as_v1=False)
        else:
            tok = cls(contents.pattern, name=contents.name)
            tok.merges = contents.merges
            tok._index(contents.special_tokens)
        tok.engine = dict(contents.engine)
        return tok

    @classmethod
    def _from_vocabulary(cls, vocab: Vocabulary, *, name: str, as_v1: bool) -> StackTokenizer:
        """The tokenizer of a validated vocabulary; with ``as_v1``, the v1 layout when its ids are
        v1's and it behaves as v1 does (same roles, our template or none, no BOS, ``ignore_merges``
        moot), so importing our own export gives our fingerprint."""
        tok = cls(vocab.patterns[0], name=name)
        if (
            as_v1
            and vocab.v1_layout()
            and vocab.v1_behaviour()
            and vocab.chat_template in (None, CHAT_TEMPLATE)
        ):
            tok.merges = list(vocab.merges)
            tok._index(list(vocab.special_to_id))
            if not vocab.ignore_merges or self_reachable(tok):
                return tok
            tok = cls(vocab.patterns[0], name=name)
        tok._install(vocab)
        return tok

    def _install(self, vocab: Vocabulary) -> None:
        """Take a validated v2 vocabulary: its split, flags and tables."""
        self.format = FORMAT_V2
        self.merges = vocab.merges
        self.special_to_id = vocab.special_to_id
        self._set_split(vocab.patterns)
        self.ignore_merges, self.roles, self.in_text = vocab.ignore_merges, vocab.roles, vocab.in_text
        self.add_bos, self.add_eos, self.chat_template = vocab.add_bos, vocab.add_eos, vocab.chat_template
        self._build(vocab.table, vocab.results, plain=vocab.plain)

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
