"""tiktoken export: the ``.tiktoken`` rank file and a live ``tiktoken.Encoding``.

A ``.tiktoken`` file is one ``base64(token bytes) rank`` line per non-special
token, ranks = ids. tiktoken merges by rank, which equals our merge-list BPE
because every token of a stacktok vocabulary is self-reachable (audited).
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

if TYPE_CHECKING:
    import tiktoken

    from ..bpe import StackTokenizer


def tiktoken_text(tok: StackTokenizer) -> str:
    lines = [f"{base64.b64encode(b).decode('ascii')} {i}" for i, b in enumerate(tok.token_bytes())]
    return "\n".join(lines) + "\n"


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
        ranks = {b: i for i, b in enumerate(tok.token_bytes())}
    return tiktoken.Encoding(
        name=name or tok.name,
        pat_str=tok.pattern,
        mergeable_ranks=ranks,
        special_tokens=dict(tok.special_to_id),
        explicit_n_vocab=tok.vocab_size,
    )


def load_tiktoken_file(tok: StackTokenizer, path: str | os.PathLike[str]) -> tiktoken.Encoding:
    """An Encoding from a ``.tiktoken`` file on disk, read fresh (no tiktoken cache)."""
    with open(path, "rb") as f:
        ranks = parse_tiktoken(f.read(), source=str(path))
    return to_tiktoken(tok, ranks=ranks)
