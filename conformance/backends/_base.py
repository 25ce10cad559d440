"""Shared adapter behaviour: unsupported operations and plain byte-accumulation streaming."""

from __future__ import annotations

import codecs
from collections.abc import Mapping, Sequence

from conformance.core.protocol import Capability

#: What a plain tokenizer backend supports (everything but the chat path).
TOKENIZER_CAPS = frozenset(
    {
        Capability.ENCODE,
        Capability.TRUSTED,
        Capability.DECODE,
        Capability.SINGLE_TOKENS,
        Capability.DEFAULT,
        Capability.STREAM,
    }
)


#: windows of at most this many ids are remembered by :meth:`BaseBackend.stream`, up to
#: ``_MEMO_LIMIT`` of them per backend
_MEMO_WINDOW = 3
_MEMO_LIMIT = 500_000


class BaseBackend:
    """Defaults for optional operations; subclasses declare what they support."""

    name = "base"
    version = "0"
    capabilities: frozenset[Capability] = frozenset()
    #: False for backends whose decoder returns text: their "bytes" are the
    #: UTF-8 of that text, exact only for complete characters.
    decode_exact = True
    #: True when the chat path refuses conversations with no assistant turn.
    chat_requires_assistant = False
    #: how the chat path keeps typed special strings as text; None = the library has none.
    chat_injection_safe_path: str | None = None
    #: the export file it reads -- no default: each adapter sets it from its registry entry
    #: (``READS[name]``), so an adapter that forgets fails the protocol check
    reads: str

    def encode(self, text: str, *, allow_special: bool) -> list[int]:
        raise NotImplementedError(f"{self.name} does not encode")

    def decode_bytes(self, ids: Sequence[int]) -> bytes:
        raise NotImplementedError(f"{self.name} does not decode")

    def default_encode(self, text: str) -> list[int]:
        raise NotImplementedError(f"{self.name} has no default encode")

    def chat(
        self, messages: Sequence[Mapping[str, str]], *, add_generation_prompt: bool
    ) -> tuple[list[int], list[int]]:
        raise NotImplementedError(f"{self.name} has no chat path")

    def stream(self, ids: Sequence[int]) -> list[str]:
        """One text delta per token, then a final flush."""
        window = tuple(ids)  # slices of a tuple are the memo's keys as they are
        if self.decode_exact:
            return byte_stream(self._remembered("bytes", self.decode_bytes), window)
        return text_stream(self._remembered("text", lambda w: self.decode_bytes(w).decode("utf-8")), window)

    def _remembered(self, kind: str, decode):
        """``decode`` remembered for short windows (the streams' one- and two-token calls).

        A stream decodes one or two windows per token, and nearly all of them are a token or
        two long and recur across probes: remembering those removes most of the library calls
        (the gate's slowest rows were these). Decoding is a pure function of the ids in every
        library adapted here; longer windows always call the library (with a list, as the
        other operations do).
        """
        memo = self.__dict__.setdefault("_decoded_windows", {}).setdefault(kind, {})
        if len(memo) > _MEMO_LIMIT:
            memo.clear()

        def remembered(window: tuple[int, ...]):
            if len(window) > _MEMO_WINDOW:
                return decode(list(window))
            out = memo.get(window)
            if out is None:
                out = memo[window] = decode(list(window))
            return out

        return remembered

    def __repr__(self) -> str:
        return f"<{self.name} {self.version}>"


def byte_stream(decode_bytes, ids: Sequence[int]) -> list[str]:
    """Plain byte accumulation: emit only complete UTF-8 characters."""
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    pieces = [decoder.decode(decode_bytes((i,))) for i in ids]
    pieces.append(decoder.decode(b"", final=True))
    return pieces


def text_stream(decode, ids: Sequence[int]) -> list[str]:
    """The prefix-offset method serving stacks use over a text-only decoder.

    Decode a window of recent tokens; emit what is new unless it ends in
    U+FFFD (an incomplete character), in which case wait for more tokens.
    """
    pieces: list[str] = []
    prefix, read = 0, 0
    for n in range(1, len(ids) + 1):
        before = decode(ids[prefix:read])
        after = decode(ids[prefix:n])
        if after.endswith("\ufffd") or len(after) <= len(before):
            pieces.append("")
            continue
        pieces.append(after[len(before) :])
        prefix, read = read, n
    tail = decode(ids[prefix:read])
    rest = decode(ids[prefix:])
    pieces.append(rest[len(tail) :])
    return pieces
