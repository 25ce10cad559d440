"""The reference's tables: from an id table and each merge's result id to everything encode reads.

A mixin of :class:`~stacktok_export.bpe.StackTokenizer`. v1 builds them from its merges
(``StackTokenizer._index``), v2 from a validated vocabulary (``vocab.build`` ->
``_set_vocab``). Pair keys are ``a << shift | b``; rank values are the merged id itself
while result ids grow with the rank (v1, most sources), else ``rank << 31 | id``.

Out of scope: validating a vocabulary (``vocab.py``), merging (``merging.py``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from . import vocab as _vocab
from .ascii_split import fast_split
from .merging import _ID
from .pretokenize import compile_pattern

if TYPE_CHECKING:
    import regex

    from .bpe_batch import PairRanks
    from .bpe_long import HardCuts

NUM_BYTES = 256


class VocabTables:
    """Table building; the tokenizer's public attributes are set here too (format, roles, ...)."""

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
        plain: dict[bytes, int],
    ) -> None:
        """Install a validated v2 vocabulary (see ``vocab.build``; ``plain``: its bytes -> id map)."""
        self.format = _vocab.FORMAT_V2
        self.merges = merges
        self.special_to_id = special_to_id
        self.patterns, self.pattern = patterns, patterns[0]
        self._split_res = tuple(compile_pattern(p) for p in patterns)
        self._split_re = self._split_res[0]
        self._fast_split = fast_split(patterns[0], self._split_re) if len(patterns) == 1 else None
        self.ignore_merges, self.roles, self.in_text = ignore_merges, roles, in_text
        self.add_bos, self.add_eos, self.chat_template = add_bos, add_eos, chat_template
        self._build(table, results, plain=plain)

    def _build(
        self, table: list[bytes], results: list[int], *, plain: dict[bytes, int] | None = None
    ) -> None:
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
        keys = [(a << sh) | b for a, b in self.merges]
        values = results if monotone else [(r << 31) | t for r, t in enumerate(results)]
        self._rank: dict[int, int] = dict(zip(keys, values))
        self._packed = not monotone
        if plain is None:  # bytes -> id of every ordinary token
            plain = {t: i for i, t in enumerate(table) if i not in self.id_to_special}
        self.byte_ids: list[int | None] = [plain.get(bytes([b])) for b in range(NUM_BYTES)]
        # bytes without a token: dropped from every pre-token before merging (the source's rule)
        self.missing_bytes = bytes(b for b, i in enumerate(self.byte_ids) if i is None)
        self._drop = self.missing_bytes or None
        identity = self.byte_ids == list(range(NUM_BYTES))
        self._byte_map = None if identity else self.byte_ids
        # the str passes' byte -> id character (missing bytes never reach them: see ``_bpe``)
        self._translate = (
            None
            if identity
            else {b: chr(i) for b, i in enumerate(self.byte_ids) if i is not None and i < 0x110000}
        )
        # bytes -> id answered without merging: the whole-token rule (``ignore_merges``), or (once
        # worth it) every token whose own BPE is itself (``_self_reachable``)
        self._reach: dict[bytes, int] | None = plain if self.ignore_merges else None
        self._batched = 0  # pre-tokens merged in numpy batches so far (see ``_self_reachable``)
        unsafe = _vocab.unsafe_ranks(self.merges, results, n)
        self._unsafe = frozenset(self._rank[(a << sh) | b] for a, b in (self.merges[r] for r in unsafe))
        self._wide = n > 0x110000  # ids past chr()'s range: no str passes
        # the same ranks keyed by two characters, for the str passes: built on the first long
        # pre-token (0.2 s for Llama-3's 280,147 merges, which most jobs never need)
        self._pair_rank: dict[str, int] | None = None
        self._rank_pair: dict[int, str] = {}
        # the cuts (ascii_split.LINE_CUT, WINDOW_CUT) are proven where the fast split serves: the
        # Llama-3 and Qwen2 splits alone
        self._line_cache_ok = self._fast_split is not None
        self._clear_caches()
        self._pair_ranks: PairRanks | None = None  # numpy form of _rank, built on first batch
        self._results = results  # the id each merge makes (for the hard cuts of _bpe_long)
        self._cuts: HardCuts | None = None  # built on the first long pre-token
        self._special_res: dict[frozenset[str], regex.Pattern[str]] = {}

    def _self_reachable(self) -> dict[bytes, int]:
        """Bytes -> id of every ordinary token whose BPE is that token alone.

        BPE is a function of a pre-token's bytes, so a new pre-token spelled like such a token
        is that token: the batch answers it from this table instead of merging it (on the
        held-out text a third of the distinct pre-tokens, the commonest words). A token whose
        own BPE is something else (unreachable, or spelled like an earlier token) is not in
        it. Built by merging every token once in one numpy batch (~0.09 s for 32,759 tokens),
        which the encoder does only after it has merged as many pre-tokens as the vocabulary
        holds, so a short job never pays for it. Merge-list BPE alone: an ``ignore_merges``
        source's whole-token rule is not asked (``vocab.self_reachable`` reads this too).
        """
        ids = [i for i in range(len(self._table)) if i not in self.id_to_special]
        got: dict[int, list[int]] = {}
        # merges only, and the batch below must not build this table again
        saved, self._reach = self._reach, {}
        try:
            self._bpe_keyed(ids, [self._table[i] for i in ids], got)
        finally:
            self._reach = saved
        return {self._table[i]: i for i in ids if got[i] == [i]}

    def _str_ranks(self) -> dict[str, int]:
        """Pair ranks keyed by two characters (one per id), and ``_rank_pair`` back (built once)."""
        if self._pair_rank is None:
            sh, mask = self._shift, (1 << self._shift) - 1
            self._pair_rank = {chr(k >> sh) + chr(k & mask): r for k, r in self._rank.items()}
            self._rank_pair = {r: q for q, r in self._pair_rank.items()}
        return self._pair_rank

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
