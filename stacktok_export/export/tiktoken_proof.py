"""When a ``.tiktoken`` file encodes exactly like an imported artifact -- and why, else a refusal.

tiktoken's rule, per pre-token: a whole pre-token that is a token is that token; otherwise
repeatedly merge the adjacent pair whose *concatenation* has the lowest rank (= id), leftmost
first. The reference merges listed *pairs* by merge rank, leftmost first among equal ranks.
:func:`tiktoken_refusal` returns ``None`` only when these provably agree on every input:

1. one pattern (tiktoken has one ``pat_str``; a sequence of isolated splits is not folded
   into one regex here -- no proof that the fold is exact for every regex engine), and a token
   for every byte UTF-8 text can hold (tiktoken fails on a byte without one, the reference drops
   it; a token holding a byte no text holds is never met, so rules 3 and 4 pass it by);
2. result ids never decrease along the merge list -- so among the pairs present, the lowest
   merge rank belongs to the lowest result id;
3. no token's own bytes, merged by the list alone, stop at two tokens ``[a, b]``: ``a+b`` is
   then a token the list never merges, and tiktoken merges such a pair wherever it meets it
   (GPT-2's ``th``+``e`` when only ``t``+``he`` is listed; a token that merges to itself or
   stops at three or more tokens is fine);
4. the whole-pre-token rule: the artifact uses ``ignore_merges``, or every ordinary token is
   self-reachable (its own bytes merge to it), so tiktoken's shortcut changes nothing.

Why these suffice (tested against the real tiktoken on generated vocabularies,
``tests/test_tiktoken_proof.py``). Run both rules on one pre-token in lockstep up to the first
state where they would choose differently, and take any adjacent pair ``[a, b]`` of that state
whose concatenation is a token ``t``. a and b were built by merges inside ``t``'s span alone (a
merge across its edge would have left a token straddling it), and each was the lowest of its
whole state under both rules, so the lowest inside the span: the span's history is a prefix of
the list's run on ``t``'s bytes alone, which is deterministic and passes through one two-token
state. So every ``t``-pair present is that state's pair: by 3 it is listed, so both rules see
the same candidates; by 2 the lowest rank has the lowest result; candidates of equal result are
one pair with one rank, so the leftmost wins under both. There is no first difference. Hence
no rule is needed for overlapping splits such as ``[aa, a, aa]`` for ``aaa`` (that state never
occurs, whatever order the list gives ``a``+``aa`` and ``aa``+``a``), nor for merges whose
result id is below one of their parts (Llama-3's list holds every split of every token, ranked
by result).

v1 artifacts are not checked here: their export is frozen and their self-reachability is
audited (``stacktok audit``); with ids in merge order they meet 2 and, self-reachable, 3 and 4.

Out of scope: the regex engines (tiktoken's fancy-regex vs the reference's ``regex``: the
suite's declared divergences, and the packer's drift cache) and special tokens (the file
carries none).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..models.bpe.textbook import MergeListBPE

if TYPE_CHECKING:
    from ..models.bpe.bpe import StackTokenizer


def tiktoken_refusal(tok: StackTokenizer) -> str | None:
    """``None`` when tiktoken provably encodes like ``tok``; else why not (one clause)."""
    if len(tok.patterns) != 1:
        return (
            f"tiktoken has one pat_str but this artifact applies {len(tok.patterns)} isolated "
            "regex splits in sequence (no exact single-regex form is proven)"
        )
    held = [b for b in tok.missing_bytes if b not in _NEVER_IN_UTF8]
    if held:
        return (
            f"bytes {held[:8]} occur in UTF-8 text but have no token: tiktoken fails on them, "
            "the reference drops them"
        )
    table = tok.id_bytes()
    vocab = {table[i]: i for i in range(tok.vocab_size) if i not in tok.id_to_special}
    return _order_problem(tok) or _stuck_tokens(tok, vocab, table)


#: bytes no UTF-8 text holds (MPT's vocabulary has no token for them, harmlessly)
_NEVER_IN_UTF8 = frozenset([0xC0, 0xC1, *range(0xF5, 0x100)])


def _order_problem(tok: StackTokenizer) -> str | None:
    previous = -1
    for r in range(len(tok.merges)):
        out = tok.merge_result(r)
        if out < previous:
            return f"merge {r} gives id {out} after a merge gave {previous}: merge order is not id order"
        previous = out
    return None


def _stuck_tokens(tok: StackTokenizer, vocab: dict[bytes, int], table: list[bytes]) -> str | None:
    """Rules 3 and 4, on the only tokens that can break them.

    With ``ignore_merges`` only rule 3 applies, and only to a token that some unlisted pair of
    tokens spells (if every way to cut it in two is a merge, a two-token stop would merge):
    none in Llama-3, so no BPE runs at all. Without it every token must merge back to itself
    (rule 4, which implies 3), checked for all of them at once in numpy.
    """
    if tok.ignore_merges:
        suspects = _unlisted_spellings(tok, vocab)
    else:
        reached = tok._self_reachable()
        suspects = [(t, i) for t, i in vocab.items() if len(t) > 1 and reached.get(t) != i]
    if tok.missing_bytes:  # only bytes no text holds are left (rule 1): such tokens never occur
        missing = set(tok.missing_bytes)
        suspects = [(t, i) for t, i in suspects if missing.isdisjoint(t)]
    if not suspects:
        return None
    bpe = MergeListBPE.of(tok)  # every byte of a suspect has a token here (rule 1 and the filter above)
    stops = [(t, i, bpe(t)) for t, i in suspects]
    pairs = [(t, i, parts) for t, i, parts in stops if len(parts) == 2]
    if pairs:
        t, i, (a, b) = pairs[0]
        return (
            f"{len(pairs)} pairs of tokens concatenate to a token without being a merge (e.g. "
            f"{table[a]!r}+{table[b]!r} = id {i}, where {t!r}'s own bytes stop); "
            "tiktoken merges them, the merge list does not"
        )
    unreached = [i for _, i, parts in stops if parts != [i]]
    if not tok.ignore_merges and unreached:
        return (
            f"{len(unreached)} tokens are not reached by merging their own bytes (e.g. id {unreached[0]}) "
            "and the artifact does not use ignore_merges; tiktoken returns a whole pre-token that is a token"
        )
    return None


def _unlisted_spellings(tok: StackTokenizer, vocab: dict[bytes, int]) -> list[tuple[bytes, int]]:
    """Tokens that two ordinary tokens spell without their pair being a merge."""
    listed = set(tok.merges)
    get = vocab.get
    out = []
    for t, i in vocab.items():
        for k in range(1, len(t)):
            a = get(t[:k])
            if a is not None:
                b = get(t[k:])
                if b is not None and (a, b) not in listed:
                    out.append((t, i))
                    break
    return out
