"""One vocabulary under audit (:class:`Vocab`), and reading it from a stacktok artifact.

A :class:`Vocab` is what every vocabulary finding needs: ordinary ids as bytes, the specials, the
ids a merge created, a merge-list BPE over the vocabulary's own ids and an untrusted encoder
(specials are text). :func:`artifact_vocab` builds one from the artifact of an input plan
(``conformance.plan``: loaded once, the suite's shared reference); only when the loader refused
it is the file read again, to say which merges break it. :func:`load_artifact_vocab` plans an
artifact alone. The ``tokenizer.json`` reader is ``conformance.audit.tokenizer_json``.

Out of scope: judging the vocabulary (``reachability``, ``collisions``, ``informational``); an
artifact that ``StackTokenizer.load`` refuses for a reason other than its merge order, which is
a usage error (exit 2).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from conformance.core.errors import UsageError
from conformance.core.expect import OURS, is_ours, ordinary_bytes
from conformance.core.layout import file_json
from conformance.plan import Plan, plan_inputs
from stacktok_export import StackTokenizer
from stacktok_export.models.bpe.textbook import MergeListBPE
from stacktok_export.util.untrusted import UntrustedFileError


@dataclass
class Vocab:
    """One vocabulary under audit, reduced to bytes, specials, merges and an encoder."""

    subject: str  # "artifact" | "tokenizer.json"
    source: str
    tokens: dict[int, bytes]  # ordinary ids -> bytes
    specials: dict[str, int]
    merged_ids: list[int]  # ids created by a merge (what self_reachable checks)
    bpe: Callable[[bytes], list[int]]
    encode: Callable[[str], list[int]]  # untrusted: specials are text
    merge_problems: list[str]
    n_merges: int
    missing_bytes: list[int] = field(default_factory=list)
    #: the source encodes with ``ignore_merges`` (whole-word hits skip the merges): then an
    #: unreachable token is still produced, and self-reachability is informative
    ignore_merges: bool = False

    def all_tokens(self) -> list[tuple[int, bytes]]:
        """Every id with its bytes, specials (as UTF-8) included, in id order."""
        return sorted(list(self.tokens.items()) + [(i, s.encode("utf-8")) for s, i in self.specials.items()])


def artifact_merge_problems(merges: Any) -> list[str]:
    """Forward references and repeated pairs in an artifact's raw merge list.

    Malformed entries are left to ``StackTokenizer.load`` (a usage error).
    """
    if not isinstance(merges, list):
        return []
    problems: list[str] = []
    seen: dict[tuple[int, int], int] = {}
    for i, m in enumerate(merges):
        if not (isinstance(m, list) and len(m) == 2 and all(type(x) is int for x in m)):
            return []
        new_id, pair = 256 + i, (m[0], m[1])
        if not all(0 <= x < new_id for x in pair):
            problems.append(
                f"merge #{i} -> id {new_id} combines {list(pair)}: a child id is not below {new_id}"
            )
        if pair in seen:
            problems.append(f"merge #{i} -> id {new_id} repeats the pair {list(pair)} of merge #{seen[pair]}")
        seen.setdefault(pair, i)
    return problems


def refused_merges(path: Path) -> list[str]:
    """The merge-list problems of an artifact the loader refused (read again, only then); ``[]``
    when its merge list is not why (then the loader's own message is the usage error)."""
    try:
        payload = file_json(path)
    except (OSError, UntrustedFileError, ValueError, RecursionError):  # the loader said why
        return []
    v1 = not isinstance(payload, dict) or payload.get("format", OURS) == OURS
    # merge r -> id 256+r is v1's layout; a v2 artifact's merges were checked when it was built
    return artifact_merge_problems(payload.get("merges") if v1 and isinstance(payload, dict) else None)


def load_artifact_vocab(path: Path) -> tuple[Vocab | None, StackTokenizer | None, list[str]]:
    """The artifact at ``path``, planned alone (``conformance.plan``), as :func:`artifact_vocab`."""
    return artifact_vocab(plan_inputs(None, tool="audit", artifact=path, keep_refused=True))


def artifact_vocab(plan: Plan) -> tuple[Vocab | None, StackTokenizer | None, list[str]]:
    """The plan's artifact as a :class:`Vocab` (``None`` if its merge list is broken) and its problems."""
    path, tok = plan.artifact, plan.ref
    if tok is None:  # the loader refused it: a broken merge list is a finding, anything else exit 2
        problems = refused_merges(path)
        if problems:
            return None, None, problems
        raise UsageError(plan.refused)
    if not is_ours(tok):
        return _imported_vocab(tok, path), tok, []
    table = tok.token_bytes()
    vocab = Vocab(
        subject="artifact",
        source=str(path),
        tokens=dict(enumerate(table)),
        specials=dict(tok.special_to_id),
        merged_ids=list(range(256, len(table))),
        bpe=tok._bpe,
        encode=tok.encode,
        merge_problems=[],
        n_merges=len(tok.merges),
    )
    return vocab, tok, []


def _imported_vocab(tok: StackTokenizer, path: Path) -> Vocab:
    """An imported (v2) artifact: ordinary ids at any ids, every multi-byte token, and the plain
    merge-list rule (never the whole-word shortcut of ``ignore_merges``, which would make every
    token trivially reachable) for self-reachability."""
    plain = MergeListBPE.of(tok)
    tokens = ordinary_bytes(tok)
    return Vocab(
        subject="artifact",
        source=str(path),
        tokens=tokens,
        specials=dict(tok.special_to_id),
        # every multi-byte token, as for a tokenizer.json: a source may hold tokens no merge makes
        merged_ids=[i for i, b in tokens.items() if len(b) > 1],
        bpe=plain,
        encode=tok.encode,
        merge_problems=[],
        n_merges=len(tok.merges),
        ignore_merges=bool(tok.ignore_merges),
    )
