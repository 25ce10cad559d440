"""Reachability of a vocabulary's tokens by its own merge list: ``self_reachable`` and ``merge_order``.

``self_reachable``: merge-list BPE of every merged token's own bytes gives exactly that token.
Only then do tiktoken's rank merging and HF/llama.cpp ``ignore_merges`` agree with the merge
list (rten#453: 588 Llama-3 tokens unreachable; llama.cpp PR#7193 " Việt"). ``merge_order``:
every merge combines lower ids into a higher one, and (tokenizer.json) merges are listed in the
order of their result ids. :func:`broken_merges` is what is left to say when the merge list
cannot even be built.

Out of scope: fixing the merge list; the merge rule itself (``stacktok_export.models.bpe.textbook``).
"""

from __future__ import annotations

from conformance.audit.findings import Found, cap, found, hex_bytes
from conformance.audit.vocab import Vocab


def check_self_reachable(v: Vocab) -> Found:
    """Merge-list BPE of each merged token's bytes must be exactly that token."""
    encoded = ((i, v.bpe(v.tokens[i])) for i in v.merged_ids)
    bad = [(i, got) for i, got in encoded if got != [i]]
    lines = [f"id {i} {hex_bytes(v.tokens[i])} encodes as {got}" for i, got in bad]
    lines += [f"byte 0x{b:02x} has no single-byte token" for b in v.missing_bytes]
    details = {
        "checked": len(v.merged_ids),
        "unreachable": [{"id": i, "bytes": v.tokens[i].hex(), "encodes_as": got} for i, got in bad],
        "missing_bytes": v.missing_bytes,
    }
    if not lines:
        summary = f"all {len(v.merged_ids):,} merged tokens encode to themselves"
        return found("self_reachable", v.subject, "pass", summary, details)
    if v.ignore_merges and not v.missing_bytes:
        summary = (
            f"{len(bad):,} of {len(v.merged_ids):,} merged tokens are unreachable by the merge list alone; "
            "informative: the source encodes with ignore_merges, so a whole pre-token that is one of "
            "them is still that token (rten#453)"
        )
        return found("self_reachable", v.subject, "info", summary, details, cap(lines))
    summary = (
        f"{len(bad):,} of {len(v.merged_ids):,} merged tokens are unreachable by the merge list"
        + (f", {len(v.missing_bytes)} bytes have no token" if v.missing_bytes else "")
        + " (tiktoken/ignore_merges would disagree)"
    )
    return found("self_reachable", v.subject, "fail", summary, details, cap(lines))


def check_merge_order(v: Vocab) -> Found:
    """Each merge's children have lower ids than its result; merges are in id order."""
    details = {"merges": v.n_merges, "problems": v.merge_problems}
    if not v.merge_problems:
        summary = f"all {v.n_merges:,} merges combine lower ids, in id order"
        return found("merge_order", v.subject, "pass", summary, details)
    summary = f"{len(v.merge_problems):,} merge-order problems"
    return found("merge_order", v.subject, "fail", summary, details, cap(v.merge_problems))


#: the findings that cannot be computed without a merge list that builds
NEED_MERGES = ("self_reachable", "duplicate_bytes", "specials_unreachable", "long_tokens", "partial_utf8")


def broken_merges(subject: str, problems: list[str]) -> list[Found]:
    """When the merge list cannot even be built: merge_order fails, the rest is skipped."""
    summary = f"{len(problems):,} merge-order problems; the vocabulary cannot be built"
    rows = [found("merge_order", subject, "fail", summary, {"problems": problems}, cap(problems))]
    rows += [found(n, subject, "skip", "not checked: the merge list is broken") for n in NEED_MERGES]
    return rows
