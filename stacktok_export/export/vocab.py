"""What every exporter reads off an artifact: ids, their strings, roles, and the refusal error.

- :class:`ExportRefused`: a format cannot express something of the artifact (one line: the
  format, what, why). It is an :class:`~stacktok_export.artifact.artifact.ArtifactError`, so the command
  line maps it to exit 2 -- an export never writes a file that behaves differently.
- :func:`ordinary_ids` / :func:`token_chars`: the non-special ids in id order and the GPT-2
  byte-level string of every id (specials: their own text), for tokenizer.json and GGUF.
- :func:`role_token`, :func:`chat_template`: the special string of a role, and the template an
  export carries (the artifact's own; v1 artifacts: our ChatML from ``chat/chat.py``).

Works on v1 and v2 artifacts alike through the attributes every ``StackTokenizer`` has
(``id_bytes()``, ``special_to_id``, ``roles``, ``chat_template``, ``format``).

Out of scope: writing any format (one module each) and validating the artifact (``artifact/``).
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

from ..artifact.artifact import FORMAT, ArtifactError
from ..chat.chat import CHAT_TEMPLATE
from ..split.bytelevel import to_chars

if TYPE_CHECKING:
    from ..models.bpe.bpe import StackTokenizer


class ExportRefused(ArtifactError):
    """``FORMAT export of NAME: what cannot be expressed; why`` -- nothing is written."""

    def __init__(self, fmt: str, tok: StackTokenizer, reason: str) -> None:
        self.fmt = fmt
        super().__init__(f"{fmt} export of {tok.name}: {reason}")


def is_v1(tok: StackTokenizer) -> bool:
    """True for our fixed layout (its exports are frozen byte for byte)."""
    return tok.format == FORMAT


def ordinary_ids(tok: StackTokenizer) -> list[int]:
    """Every non-special id, in id order."""
    specials = tok.id_to_special
    return [i for i in range(tok.vocab_size) if i not in specials]


def token_chars(tok: StackTokenizer) -> list[str]:
    """One string per id: byte-level for ordinary ids, the special's own text at special ids."""
    specials = tok.id_to_special
    return [specials[i] if i in specials else to_chars(b) for i, b in enumerate(tok.id_bytes())]


def duplicate_strings(strings: list[str]) -> list[str]:
    """Strings that occur twice (at most five), sorted."""
    return sorted(s for s, n in Counter(strings).items() if n > 1)[:5]


def role_token(tok: StackTokenizer, role: str) -> str | None:
    """The special string holding ``role`` (``bos``/``eos``/``eot``/``pad``), or None."""
    token_id = tok.roles.get(role)
    return None if token_id is None else tok.id_to_special.get(token_id)


def chat_template(tok: StackTokenizer) -> str | None:
    """The artifact's chat template; v1 artifacts: our ChatML; v2 without one: None."""
    if tok.chat_template is not None:
        return tok.chat_template
    return CHAT_TEMPLATE if is_v1(tok) else None
