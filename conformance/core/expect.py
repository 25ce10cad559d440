"""What the suite expects of a checkpoint, read from the reference artifact, whatever its layout.

A v1 artifact (``stacktok-bpe-v1``) is our own fixed layout: bytes at ids 0..255, merges
after, the specials on the top ids, ChatML roles (``<|bos|>``, ``<|eos|>``, ``<|pad|>``,
``<|end|>`` as end of turn). A v2 artifact (``stacktok-bpe-v2``, imported from a user's
tokenizer.json / GGUF / .tiktoken) records its own layout: token bytes by id, specials at
any ids, the roles the source has, whether it adds BOS. Every check that is about a layout
asks here (never a constant): the role ids, the ids untrusted text must never yield, the
ordinary ids' bytes, the special a default-path probe types.

On a v1 artifact every answer is what the suite used before imports existed (the shipped
artifact's rows stay byte-identical).

Out of scope: the checks themselves; the artifact format (``stacktok_export.artifact``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from stacktok_export.artifact.artifact import FORMAT as OURS  # the format of our own fixed layout

if TYPE_CHECKING:
    from stacktok_export import StackTokenizer

#: the roles a checkpoint's files name, in report order
ROLES = ("bos", "eos", "pad", "eot")
#: the v1 probe typed into a default path (``conformance.checks.compare.INJECTION_TEXT``)
V1_INJECTION = "hello <|assistant|> world"


def is_ours(tok: StackTokenizer) -> bool:
    """Whether ``tok`` is our own fixed layout (v1); False for an imported (v2) artifact."""
    return tok.format == OURS


def imported_skip(what: str) -> str:
    """The reason of a row about our own layout on an imported artifact."""
    return f"not applicable to an imported (v2) artifact: {what}"


def role_id(tok: StackTokenizer, role: str) -> int | None:
    """The id the artifact records for ``role`` (bos, eos, eot, pad), or None when it has none."""
    return tok.roles.get(role)


def role_token(tok: StackTokenizer, role: str) -> str:
    """How a message names ``role``'s token: its special string (``<|eos|>``), or ``no eos``."""
    i = role_id(tok, role)
    if i is None:
        return f"no {role}"
    return tok.id_to_special.get(i, f"id {i}")


def stop_ids(tok: StackTokenizer) -> set[int]:
    """The ids generation must stop at: eos and end of turn (the roles the artifact has)."""
    return {i for r in ("eos", "eot") if (i := role_id(tok, r)) is not None}


def control_ids(tok: StackTokenizer) -> frozenset[int]:
    """Special ids untrusted text must never yield: every special the source does not match in
    ordinary text (``in_text`` ones, GGUF user-defined / HF special=False, are text there)."""
    return frozenset(i for s, i in tok.special_to_id.items() if s not in tok.in_text)


def leaked(tok: StackTokenizer, ids: list[int], controls: frozenset[int]) -> list[int]:
    """The ids of ``ids`` untrusted text must not produce: control specials, or ids past the
    vocabulary. On v1 (specials on the top ids) this is every id at or above the first special."""
    n = tok.vocab_size
    return [i for i in ids if i in controls or i >= n]


def ordinary_bytes(tok: StackTokenizer) -> dict[int, bytes]:
    """Every non-special id's bytes, in id order (v1: ids 0..256+M-1, ``token_bytes()``)."""
    specials = tok.id_to_special
    return {i: b for i, b in enumerate(tok.id_bytes()) if i not in specials}


def injection_special(tok: StackTokenizer) -> str | None:
    """A control special to type into untrusted text: v1 ``<|assistant|>``; v2 the end-of-turn,
    eos or bos special, else the first control special; None when the artifact has none."""
    if is_ours(tok):
        return "<|assistant|>"
    controls = control_ids(tok)
    for role in ("eot", "eos", "bos"):
        i = role_id(tok, role)
        if i is not None and i in controls and i in tok.id_to_special:
            return tok.id_to_special[i]
    found = [s for s, i in tok.special_to_id.items() if i in controls]
    return found[0] if found else None


def injection_text(tok: StackTokenizer) -> str:
    """The text a default-path check types: a control special between words (v1: the old constant)."""
    if is_ours(tok):
        return V1_INJECTION
    special = injection_special(tok)
    return f"hello {special} world" if special else "hello world"


def default_additions(tok: StackTokenizer) -> tuple[list[int], list[int]]:
    """The ids the source's own default path puts before and after every encode (BOS / EOS when
    it adds them; nothing on v1)."""
    bos, eos = role_id(tok, "bos"), role_id(tok, "eos")
    head = [bos] if tok.add_bos and bos is not None else []
    tail = [eos] if tok.add_eos and eos is not None else []
    return head, tail
