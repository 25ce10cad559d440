"""The textbook merge-list BPE rule, written plainly: an oracle for the fast code, not an encoder.

The rule, for one pre-token's ids and a ranked merge list: while some adjacent pair has a rank,
take the pair of lowest rank and replace its leftmost occurrence by the merge's result id
(:class:`MergeListBPE`), as Hugging Face ``tokenizers`` and tiktoken do. Training replaces every
non-overlapping occurrence of its chosen pair at once, left to right (:func:`merge_pair`). The
two agree when no merge makes a token that a lower-rank merge uses (every list stacktok trains);
on imported lists that do (``unsafe_ranks`` in ``artifact/vocab.py``), the pair a merge creates
can outrank the next occurrence, so one occurrence at a time is the rule::

    >>> merge_pair([97, 97, 97], (97, 97), 256)      # "aaa": one merge, then a lone "a"
    [256, 97]
    >>> bpe = MergeListBPE({97: 97, 98: 98}, [(97, 98, 256), (256, 256, 257)])
    >>> bpe(b"ababa")
    [257, 97]
    >>> MergeListBPE({97: 0, 98: 1}, [(2, 0, 3), (0, 1, 2)])(b"abab")  # "ab"+"a" outranks the 2nd "ab"
    [3, 1]

Its readers: ``stacktok audit`` (self-reachability of a ``tokenizer.json`` vocabulary, whose ids
need not follow the stacktok layout), the tiktoken proof (``export/tiktoken_proof.py``: where a
token's own bytes stop), ``tests/test_bpe_paths.py`` (the encoder on imported lists) and
``tests/test_bpe.py`` (the trainer against a full-rescan trainer built on :func:`merge_pair`).

Out of scope: speed -- each step rescans the whole word, O(n^2) in its length; encode text with
``StackTokenizer`` (rank-ordered, cached). Also pre-tokenization, special tokens and training
(counting pairs is the caller's business).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any


def merge_pair(ids: Sequence[int], pair: tuple[int, int], new_id: int) -> list[int]:
    """``ids`` with each leftmost non-overlapping occurrence of ``pair`` replaced by ``new_id``.

    >>> merge_pair([1, 2, 3, 1, 2], (1, 2), 9)
    [9, 3, 9]
    """
    out: list[int] = []
    i = 0
    while i < len(ids):
        if i + 1 < len(ids) and (ids[i], ids[i + 1]) == pair:
            out.append(new_id)
            i += 2
        else:
            out.append(ids[i])
            i += 1
    return out


class MergeListBPE:
    """Merge-list BPE over arbitrary ids: the lowest-rank pair first, its leftmost occurrence, one at a time.

    ``byte_ids`` maps each byte to its token id; ``merges`` lists ``(left, right, result)`` in
    rank order (a repeated pair keeps its first rank). A byte without a token becomes
    ``-1 - byte``, so it can never take part in a merge.
    """

    def __init__(self, byte_ids: dict[int, int], merges: Iterable[tuple[int, int, int]]) -> None:
        self.byte_ids = byte_ids
        self.rank: dict[tuple[int, int], tuple[int, int]] = {}
        for r, (a, b, out) in enumerate(merges):
            self.rank.setdefault((a, b), (r, out))

    @classmethod
    def of(cls, tok: Any) -> MergeListBPE:
        """The plain merge-list rule of a ``StackTokenizer`` (its bytes' ids, merges and results),
        never its ``ignore_merges`` shortcut; a byte without a token stays ``-1 - byte``."""
        byte_ids = {b: i for b, i in enumerate(tok.byte_ids) if i is not None}
        return cls(byte_ids, [(a, b, tok.merge_result(r)) for r, (a, b) in enumerate(tok.merges)])

    def __call__(self, data: bytes) -> list[int]:
        ids = [self.byte_ids.get(b, -1 - b) for b in data]
        rank = self.rank
        while len(ids) > 1:
            found = [(rank[p], i) for i, p in enumerate(zip(ids, ids[1:])) if p in rank]
            if not found:
                break
            (_, made), i = min(found)  # the lowest rank, then the leftmost position
            ids[i : i + 2] = [made]
        return ids


__all__ = ["MergeListBPE", "merge_pair"]
