"""The vocabulary half of the audit: every vocabulary finding, for each vocabulary of a target.

Findings 1-6 for the ``tokenizer.json`` (directory input) and then for the artifact, in report
order; :data:`VIOLATIONS` are the four whose failure fails the audit (the informational ones
never fail: their status is ``info`` or ``pass``).

Out of scope: the Unicode-table scan (``unicode_tables``), rendering (``render``).
"""

from __future__ import annotations

from collections.abc import Callable

from conformance.audit.collisions import check_duplicate_bytes, check_specials_unreachable
from conformance.audit.findings import Found
from conformance.audit.informational import check_long_tokens, check_partial_utf8
from conformance.audit.reachability import broken_merges, check_merge_order, check_self_reachable
from conformance.audit.tokenizer_json import hf_vocab
from conformance.audit.vocab import Vocab, artifact_vocab
from conformance.plan import Plan
from stacktok_export import StackTokenizer

VIOLATIONS = ("self_reachable", "duplicate_bytes", "merge_order", "specials_unreachable")

Say = Callable[[str], None]


def audit_vocab(v: Vocab) -> list[Found]:
    return [
        check_self_reachable(v),
        check_duplicate_bytes(v),
        check_merge_order(v),
        check_specials_unreachable(v),
        check_long_tokens(v),
        check_partial_utf8(v),
    ]


def vocab_findings(plan: Plan, say: Say) -> tuple[list[Found], StackTokenizer | None]:
    """Every vocabulary finding of the audit's ``plan`` (the directory's validated
    ``tokenizer.json``, then the artifact), and the artifact's tokenizer (``None`` if its merge
    list is broken)."""
    findings: list[Found] = []
    if plan.target is not None:
        say("vocabulary: tokenizer.json")
        findings += audit_vocab(hf_vocab(plan.files.hf["tokenizer.json"]))
    say(f"vocabulary: {plan.artifact.name}")
    vocab, tok, problems = artifact_vocab(plan)
    findings += broken_merges("artifact", problems) if vocab is None else audit_vocab(vocab)
    return findings, tok
