"""When a ``.tiktoken`` file encodes exactly like an imported artifact -- and why, else a refusal.

tiktoken's rule, per pre-token: a whole pre-token that is a token is that token; otherwise
repeatedly merge the adjacent pair whose *concatenation* has the lowest rank (= id), leftmost
first. The reference merges listed *pairs* by merge rank. :func:`tiktoken_refusal` returns
``None`` only when these provably agree on every input, checking:

1. one pattern (tiktoken has one ``pat_str``; a sequence of isolated splits is not folded
   into one regex here -- no proof that the fold is exact for every regex engine);
2. every merge's result id is above both of its parts, and result ids never decrease along the
   merge list -- so "lowest merge rank" and "lowest result id" pick the same result, and a
   merge never creates a pair that outranks the one just merged;
3. every pair of ordinary tokens whose concatenation is an ordinary token is a merge --
   tiktoken merges such a pair, the merge list only if listed (GPT-2's ``th``+``e`` when only
   ``t``+``he`` is listed);
4. ties: two different pairs giving the same token ``t`` can overlap only as ``[p, q, r]`` with
   ``t = p+q = q+r``; tiktoken merges the left one, so ``(p, q)`` must rank before ``(q, r)``;
5. the whole-pre-token rule: the artifact uses ``ignore_merges``, or every ordinary token is
   self-reachable (its own bytes merge to it), so the shortcut changes nothing.

With 2-4 both rules merge the same pair at every step (argument in the docstring of
:func:`_tie_conflict`); 5 covers the shortcut. v1 artifacts are not checked here: their
export is frozen and their self-reachability is audited (``stacktok audit``).

Out of scope: the regex engines (tiktoken's fancy-regex vs the reference's ``regex``: the
suite's declared divergences) and special tokens (the file carries none).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..textbook import MergeListBPE

if TYPE_CHECKING:
    from ..bpe import StackTokenizer


def tiktoken_refusal(tok: StackTokenizer) -> str | None:
    """``None`` when tiktoken provably encodes like ``tok``; else why not (one clause)."""
    if len(tok.patterns) != 1:
        return (
            f"tiktoken has one pat_str but this artifact applies {len(tok.patterns)} isolated "
            "regex splits in sequence (no exact single-regex form is proven)"
        )
    table = tok.id_bytes()
    vocab = {table[i]: i for i in range(tok.vocab_size) if i not in tok.id_to_special}
    results = [tok.merge_result(r) for r in range(len(tok.merges))]
    return (
        _order_problem(tok, results)
        or _unlisted_pair(tok, vocab, table)
        or _tie_conflict(tok, vocab, table)
        or _unreachable(tok, vocab, results)
    )


def _order_problem(tok: StackTokenizer, results: list[int]) -> str | None:
    previous = -1
    for r, ((a, b), out) in enumerate(zip(tok.merges, results)):
        if out <= a or out <= b:
            return f"merge {r} gives id {out}, not above its parts {a} and {b} (tiktoken ranks by id)"
        if out < previous:
            return f"merge {r} gives id {out} after a merge gave {previous}: merge order is not id order"
        previous = out
    return None


def _splits(t: bytes, vocab: dict[bytes, int]) -> list[int]:
    """Every cut ``k`` of ``t`` into two ordinary tokens ``t[:k]``, ``t[k:]``."""
    return [k for k in range(1, len(t)) if t[:k] in vocab and t[k:] in vocab]


def _unlisted_pair(tok: StackTokenizer, vocab: dict[bytes, int], table: list[bytes]) -> str | None:
    listed = set(tok.merges)
    missing = 0
    example = ""
    for t, i in vocab.items():
        for k in _splits(t, vocab):
            if (vocab[t[:k]], vocab[t[k:]]) not in listed:
                missing += 1
                example = example or f"{t[:k]!r}+{t[k:]!r} = id {i}"
    if missing:
        return (
            f"{missing} pairs of tokens concatenate to a token without being a merge (e.g. {example}); "
            "tiktoken merges them, the merge list does not"
        )
    return None


def _tie_conflict(tok: StackTokenizer, vocab: dict[bytes, int], table: list[bytes]) -> str | None:
    """Rule 4. Why 2-4 suffice: both rules take the pairs of the lowest result ``t`` first
    (rule 2), and merging one creates only pairs of higher result. Two ``t``-pairs overlap only
    as ``[p, q, r]``; along a chain of overlaps rule 4 makes ranks rise left to right, so the
    lowest rank is the leftmost, as in tiktoken; chains do not interact."""
    rank: dict[tuple[int, int], int] = {}
    for r, pair in enumerate(tok.merges):
        rank.setdefault(pair, r)
    for t, i in vocab.items():
        cuts = set(_splits(t, vocab))
        for k in cuts:
            q = t[k:]
            k2 = len(t) - k  # (q, r) with q = t[:k2]
            if k2 == k or k2 not in cuts or t[:k2] != q:
                continue
            left, right = (vocab[t[:k]], vocab[q]), (vocab[q], vocab[t[k2:]])
            if rank[left] > rank[right]:
                return (
                    f"token id {i} ({t!r}) merges from {table[left[0]]!r}+{q!r} and {q!r}+"
                    f"{table[right[1]]!r}, ranked right-first; tiktoken takes the left one"
                )
    return None


def _unreachable(tok: StackTokenizer, vocab: dict[bytes, int], results: list[int]) -> str | None:
    if tok.ignore_merges:
        return None
    byte_ids = dict(enumerate(tok.byte_ids))
    bpe = MergeListBPE(byte_ids, [(a, b, out) for (a, b), out in zip(tok.merges, results)])
    bad = [i for t, i in vocab.items() if len(t) > 1 and bpe(t) != [i]]
    if bad:
        return (
            f"{len(bad)} tokens are not reached by merging their own bytes (e.g. id {bad[0]}) and "
            "the artifact does not use ignore_merges; tiktoken returns a whole pre-token that is a token"
        )
    return None
