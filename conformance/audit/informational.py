"""The informational vocabulary findings: ``long_tokens`` and ``partial_utf8`` (never a failure).

``long_tokens``: tokens over 32 bytes (``Llama.detokenize`` returns ``b''`` for them,
llama-cpp-python#2362). ``partial_utf8``: tokens that are not valid UTF-8 on their own -- what a
streaming decoder must hold back.

Out of scope: whether any backend streams or detokenizes correctly (``stacktok gate``).
"""

from __future__ import annotations

from conformance.audit.findings import CAP, Found, cap, found, hex_bytes
from conformance.audit.vocab import Vocab

LONG_TOKEN_BYTES = 32  # Llama.detokenize returns b'' above this (llama-cpp-python#2362)


def check_long_tokens(v: Vocab) -> Found:
    """Informational: tokens longer than 32 bytes."""
    long = [(i, b) for i, b in v.all_tokens() if len(b) > LONG_TOKEN_BYTES]
    details = {"limit": LONG_TOKEN_BYTES, "tokens": [{"id": i, "length": len(b)} for i, b in long]}
    lines = [f"id {i} ({len(b)} bytes) {hex_bytes(b)}" for i, b in long]
    summary = (
        (
            f"{len(long):,} tokens over {LONG_TOKEN_BYTES} bytes (Llama.detokenize returns b'' for them;"
            " decode by token_to_piece, llama-cpp-python#2362)"
        )
        if long
        else f"no token over {LONG_TOKEN_BYTES} bytes"
    )
    return found("long_tokens", v.subject, "info" if long else "pass", summary, details, cap(lines))


def _utf8_ok(b: bytes) -> bool:
    try:
        b.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def check_partial_utf8(v: Vocab) -> Found:
    """Informational: tokens that are not valid UTF-8 alone (streaming must hold them back)."""
    bad = [(i, b) for i, b in sorted(v.tokens.items()) if not _utf8_ok(b)]
    multi = [(i, b) for i, b in bad if len(b) > 1]
    details = {
        "count": len(bad),
        "multi_byte": len(multi),
        "examples": [{"id": i, "bytes": b.hex()} for i, b in multi[:CAP]],
    }
    lines = [f"id {i} {hex_bytes(b)}" for i, b in multi]
    summary = (
        f"{len(bad):,} tokens are not valid UTF-8 alone ({len(multi):,} of them multi-byte):"
        " streaming decoders must hold back incomplete characters"
    )
    return found("partial_utf8", v.subject, "info", summary, details, cap(lines))
