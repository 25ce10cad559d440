"""tiktoken export: the ``.tiktoken`` rank file and a live ``tiktoken.Encoding``.

A ``.tiktoken`` file is one ``base64(token bytes) rank`` line per non-special
token, ranks = ids, in id order. tiktoken merges by rank, which equals our merge-list BPE
because every token of a stacktok vocabulary is self-reachable (audited). An imported (v2)
artifact is refused (:class:`~stacktok_export.export.vocab.ExportRefused`) when tiktoken
cannot express it at all: more than one split pattern (one ``pat_str``), or a single byte
without a token (tiktoken fails on it). Otherwise it is written, and
:func:`tiktoken_unproven` says when :func:`~stacktok_export.export.tiktoken_proof.tiktoken_refusal`
could not prove tiktoken's rank rule equal to the merge list for every input (GPT-2, Qwen2 and
Llama-3 are proven; a merge list that never merges a pair two tokens spelling a third can meet,
or that lists merges out of id order, is not): the gate's tiktoken rows then judge the file by
behaviour, as for any other file.
Specials are not in the file; :func:`to_tiktoken` adds them at their ids.

We build ``mergeable_ranks`` from bytes we read ourselves: tiktoken's
``load_tiktoken_bpe`` caches local files by path string and returns stale
ranks after a rewrite (tiktoken#114, #500).

Out of scope: registering the encoding as a tiktoken plugin.
"""

from __future__ import annotations

import base64
import os
from typing import TYPE_CHECKING

from .tiktoken_proof import tiktoken_refusal
from .vocab import ExportRefused, is_v1, ordinary_ids

if TYPE_CHECKING:
    import tiktoken

    from ..models.bpe.bpe import StackTokenizer


def tiktoken_text(tok: StackTokenizer) -> str:
    """The rank file; ``ExportRefused`` when tiktoken cannot express ``tok`` (v2 only)."""
    if not is_v1(tok):
        _pat_str(tok)
        if tok.missing_bytes:
            raise ExportRefused(
                "tiktoken",
                tok,
                f"bytes {list(tok.missing_bytes)[:8]} have no token and tiktoken needs every single byte",
            )
    table = tok.id_bytes()
    lines = [f"{base64.b64encode(table[i]).decode('ascii')} {i}" for i in ordinary_ids(tok)]
    return "\n".join(lines) + "\n"


def tiktoken_unproven(tok: StackTokenizer, *, outside_in_text: bool = False) -> str | None:
    """Why tiktoken's equality with ``tok`` is not proven statically (``None``: proven).

    v1: proven when every token is self-reachable (tiktoken takes a whole pre-token that is a
    token; the merge list must reach it too) -- true of the shipped artifact, not of every
    vocabulary a user trains or imports in v1's layout. v2: the merge-list proof, and no
    specials the source matches in plain text (tiktoken has no such specials) -- unless
    ``outside_in_text``: the question is then text holding none of them (the packer sends the
    rest to the reference).
    """
    if is_v1(tok):
        from ..models.bpe.model import self_reachable

        if self_reachable(tok):
            return None
        return "some tokens are not self-reachable (tiktoken takes them whole)"
    if tok.in_text and not outside_in_text:
        return f"the source splits {sorted(tok.in_text)[:3]} out of plain text; tiktoken cannot"
    return tiktoken_refusal(tok)


def _pat_str(tok: StackTokenizer) -> str:
    if len(tok.patterns) != 1:
        raise ExportRefused(
            "tiktoken",
            tok,
            f"tiktoken has one pat_str but this artifact applies {len(tok.patterns)} isolated regex splits",
        )
    return tok.patterns[0]


def parse_tiktoken(data: bytes, *, source: str = "<bytes>") -> dict[bytes, int]:
    """Parse a ``.tiktoken`` file's bytes; ``ValueError`` names the bad line."""
    ranks: dict[bytes, int] = {}
    for lineno, line in enumerate(data.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            token, rank = line.split()
            ranks[base64.b64decode(token, validate=True)] = int(rank)
        except ValueError as exc:
            raise ValueError(f"{source}: line {lineno} is not 'base64 rank': {line[:60]!r}") from exc
    return ranks


def to_tiktoken(
    tok: StackTokenizer, *, ranks: dict[bytes, int] | None = None, name: str | None = None
) -> tiktoken.Encoding:
    """A ``tiktoken.Encoding`` equal to ``tok`` (or to ``ranks`` read from a file)."""
    import tiktoken

    if ranks is None:
        table = tok.id_bytes()
        ranks = {table[i]: i for i in ordinary_ids(tok)}
    return tiktoken.Encoding(
        name=name or tok.name,
        pat_str=_pat_str(tok),
        mergeable_ranks=ranks,
        special_tokens=dict(tok.special_to_id),
        explicit_n_vocab=tok.vocab_size,
    )


def load_tiktoken_file(tok: StackTokenizer, path: str | os.PathLike[str]) -> tiktoken.Encoding:
    """An Encoding from a ``.tiktoken`` file on disk, read fresh (no tiktoken cache)."""
    with open(path, "rb") as f:
        ranks = parse_tiktoken(f.read(), source=str(path))
    return to_tiktoken(tok, ranks=ranks)
