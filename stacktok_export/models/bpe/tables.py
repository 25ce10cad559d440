"""The vocabulary of a BPE tokenizer as tables: ids <-> bytes, specials and roles, and pair ranks.

:class:`BPETables` is the base of the BPE model (:class:`~.model.BPEModel`, the merge paths) and
so of :class:`~.bpe.StackTokenizer`. :meth:`~BPETables._build` turns an id table (the bytes of
every id) and each merge's result id into what every path reads: pair keys ``a << shift | b``
whose rank values are the merged id itself while result ids grow with the rank (v1, most
sources), else ``rank << 31 | id``; which id each byte is (bytes without a token are dropped,
as the source does). v1 builds them from its merges (:meth:`~BPETables._index`), v2 from a
validated vocabulary (``StackTokenizer._install``). Here too: what the vocabulary answers
without encoding -- its size, each id's bytes (decoding), the specials and roles (tiktoken's
``n_vocab``, ``eot_token``, ``decode_single_token_bytes``...).

Out of scope: validating a vocabulary (``artifact/vocab.py``), merging (``model.py``), text
(``bpe.py``).
"""

from __future__ import annotations

from collections.abc import Iterable

from ...artifact.artifact import FORMAT
from ...artifact.vocab import v1_roles

NUM_BYTES = 256


class BPETables:
    """Ids, their bytes, specials and roles, and the pair ranks; see the module docstring.

    The tokenizer sets ``merges``, ``special_to_id``, ``name`` and ``format`` before the tables are
    built (:meth:`_index`, ``StackTokenizer._install``).
    """

    name: str
    format: str
    merges: list[tuple[int, int]]
    special_to_id: dict[str, int]
    roles: dict[str, int]

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
        self.format = FORMAT
        self.roles = v1_roles(self.special_to_id)
        self._build(table, results)

    def _build(
        self, table: list[bytes], results: list[int], *, plain: dict[bytes, int] | None = None
    ) -> dict[bytes, int]:
        """The encoder's tables from the id table and each merge's result id; returns ``plain``
        (bytes -> id of every ordinary token: computed when not given).

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
        self._results = results  # the id each merge makes
        return plain

    # -------------------------------------------------------------- vocabulary
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
        if self.format != FORMAT:
            return list(self._table)
        return self._table[: NUM_BYTES + len(self.merges)]

    @property
    def n_vocab(self) -> int:
        """Number of ids (every id ``0 .. n_vocab - 1`` is a token)."""
        return self.vocab_size

    @property
    def max_token_value(self) -> int:
        return self.vocab_size - 1

    @property
    def special_tokens_set(self) -> set[str]:
        return set(self.special_to_id)

    @property
    def eot_token(self) -> int:
        """The end-of-text special's id (the ``eos`` role: ``<|eos|>`` in the shipped artifact).

        ``AttributeError`` (so ``hasattr`` is False) when the artifact names none.
        """
        try:
            return self.roles["eos"]
        except KeyError:
            raise AttributeError(
                f"{self.name}: the artifact names no end-of-text special (no 'eos' role; roles: "
                f"{sorted(self.roles)}); use special_token_id(...) with the special that ends documents"
            ) from None

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

    def decode_single_token_bytes(self, token: int) -> bytes:
        """The bytes of one id (a special: its UTF-8 string); ``ValueError`` when out of range.

        tiktoken raises ``KeyError`` for an unknown id; every id below ``n_vocab`` is a token here.
        """
        return self.decode_bytes([token])

    def decode_tokens_bytes(self, tokens: Iterable[int]) -> list[bytes]:
        """The bytes of each id, one item per id."""
        return [self.decode_single_token_bytes(t) for t in tokens]
