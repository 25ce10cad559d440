"""One vocabulary under audit (:class:`Vocab`), and reading it from a stacktok artifact.

A :class:`Vocab` is what every vocabulary finding needs: ordinary ids as bytes, the specials, the
ids a merge created, a merge-list BPE over the vocabulary's own ids and an untrusted encoder
(specials are text). :func:`load_artifact_vocab` builds one from an artifact JSON; the
``tokenizer.json`` reader is ``conformance.audit.tokenizer_json``.

Out of scope: judging the vocabulary (``reachability``, ``collisions``, ``informational``); an
artifact that ``StackTokenizer.load`` refuses for a reason other than its merge order, which is
a usage error (exit 2).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from conformance.core.errors import UsageError
from conformance.core.expect import OURS, is_ours, ordinary_bytes
from stacktok_export import ArtifactError, StackTokenizer
from stacktok_export.textbook import MergeListBPE
from stacktok_export.util import limits
from stacktok_export.util.untrusted import UntrustedFileError, read_untrusted


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


def read_json(path: Path, what: str) -> Any:
    """``path`` parsed as JSON; a missing, unreadable or malformed file is a usage error."""
    if not os.path.lexists(path):
        raise UsageError(f"{path}: no such {what}")
    try:  # a regular file of its own folder, bounded: the audit reads untrusted checkpoints too
        raw = read_untrusted(path, limit=limits.current().tokenizer_json, roots=(Path(path).parent,))
        return json.loads(raw.decode("utf-8"))
    except (UntrustedFileError, UnicodeDecodeError) as exc:
        raise UsageError(f"cannot read {what}: {exc}") from None
    except json.JSONDecodeError as exc:
        raise UsageError(f"{path}: malformed JSON at line {exc.lineno} ({exc.msg})") from None
    except (RecursionError, ValueError) as exc:  # nested too deeply; an integer of over 4,300 digits
        raise UsageError(f"{path}: unreadable JSON ({str(exc)[:120]}); fix or replace the file") from None


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


def load_artifact_vocab(path: Path) -> tuple[Vocab | None, StackTokenizer | None, list[str]]:
    """The artifact as a :class:`Vocab` (``None`` if its merge list is broken) and its problems."""
    payload = read_json(path, "artifact")
    v1 = not isinstance(payload, dict) or payload.get("format", OURS) == OURS
    # merge r -> id 256+r is v1's layout; a v2 artifact's merges were checked when it was built
    problems = artifact_merge_problems(payload.get("merges") if v1 and isinstance(payload, dict) else None)
    if problems:
        return None, None, problems
    try:
        tok = StackTokenizer.load(path)
    except ArtifactError as exc:
        raise UsageError(str(exc)) from None
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
