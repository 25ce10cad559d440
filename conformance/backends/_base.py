"""Shared adapter behaviour: unsupported operations and plain byte-accumulation streaming."""

from __future__ import annotations

import codecs
import datetime
from collections.abc import Callable, Mapping, Sequence
from typing import Any

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
    #: True where ``encode_batch`` is one call of the library's own batch path (protocol.py)
    encodes_in_batch = False
    #: True when the chat path refuses conversations with no assistant turn.
    chat_requires_assistant = False
    #: how the chat path keeps typed special strings as text; None = the library has none.
    chat_injection_safe_path: str | None = None
    #: how the chat path rewrites a conversation before its template sees it, beyond what
    #: transformers does: ``(messages, now) -> (messages, extra context)``; and the declared
    #: divergence a chat difference it fully explains counts as. None / "": it rewrites nothing
    template_input: (
        Callable[[list[dict[str, Any]], datetime.datetime], tuple[list[dict[str, Any]], dict[str, Any]]]
        | None
    ) = None
    template_input_declaration: str = ""
    #: the export file it reads -- no default: each adapter sets it from its registry entry
    #: (``READS[name]``), so an adapter that forgets fails the protocol check
    reads: str

    def encode(self, text: str, *, allow_special: bool) -> list[int]:
        raise NotImplementedError(f"{self.name} does not encode")

    def encode_batch(self, texts: Sequence[str], *, allow_special: bool) -> list[list[int]]:
        return [self.encode(t, allow_special=allow_special) for t in texts]

    def decode_bytes(self, ids: Sequence[int]) -> bytes:
        raise NotImplementedError(f"{self.name} does not decode")

    def default_encode(self, text: str) -> list[int]:
        raise NotImplementedError(f"{self.name} has no default encode")

    def chat(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        add_generation_prompt: bool,
        tools: Sequence[Mapping[str, Any]] | None = None,
        template_kwargs: Mapping[str, Any] | None = None,
    ) -> tuple[list[int], list[int]]:
        raise NotImplementedError(f"{self.name} has no chat path")

    def decode_text(self, ids: Sequence[int]) -> str:
        """The text the library's decode returns (a text decoder's own answer, no bytes round trip)."""
        return self.decode_bytes(ids).decode("utf-8")

    def stream(self, ids: Sequence[int]) -> list[str]:
        """One text delta per token, then a final flush."""
        window = tuple(ids)  # slices of a tuple are the memo's keys as they are
        if self.decode_exact:
            return byte_stream(self.decode_bytes, window, memo=self._memo("bytes"))
        return text_stream(self.decode_text, window, memo=self._memo("text"))

    def _memo(self, kind: str) -> dict:
        """The decodes this backend's streams remember (short windows, :func:`text_stream`).

        A stream decodes one or two windows per token, and nearly all of them are a token or
        two long and recur across probes: remembering those removes most of the library calls
        (the gate's slowest rows were these). Decoding is a pure function of the ids in every
        library adapted here; longer windows always call the library (with a list, as the
        other operations do). Emptied when it holds ``_MEMO_LIMIT`` entries.
        """
        memo = self.__dict__.setdefault("_decoded_windows", {}).setdefault(kind, {})
        if len(memo) > _MEMO_LIMIT:
            memo.clear()
        return memo

    def __repr__(self) -> str:
        return f"<{self.name} {self.version}>"


def byte_stream(decode_bytes, ids: Sequence[int], *, memo: dict | None = None) -> list[str]:
    """Plain byte accumulation: emit only complete UTF-8 characters. ``decode_bytes`` is asked
    for one token at a time (``(id,)``); ``memo`` keeps its answers by id across calls."""
    memo = {} if memo is None else memo
    get = memo.get
    decode = codecs.getincrementaldecoder("utf-8")(errors="replace").decode
    pieces = []
    append = pieces.append
    for i in ids:
        data = get(i)
        if data is None:
            data = memo[i] = decode_bytes((i,))
        append(decode(data))
    append(decode(b"", final=True))
    return pieces


def text_stream(decode, ids: Sequence[int], *, memo: dict | None = None) -> list[str]:
    """The prefix-offset method serving stacks use over a text-only decoder.

    Decode a window of recent tokens; emit what is new unless it ends in
    U+FFFD (an incomplete character), in which case wait for more tokens. ``decode`` takes a
    list of ids; ``memo`` keeps its answers for windows of up to ``_MEMO_WINDOW`` ids (keyed
    by the tuple ``ids[i:j]``) across calls.
    """
    memo, ids = ({} if memo is None else memo), tuple(ids)
    get = memo.get

    def miss(window):
        if len(window) > _MEMO_WINDOW:
            return decode(list(window))
        out = memo[window] = decode(list(window))
        return out

    pieces: list[str] = []
    append = pieces.append
    prefix, read, moved, before = 0, 0, True, ""
    for n in range(1, len(ids) + 1):
        if moved:  # decode(ids[prefix:read]) changes only when the offsets do
            window = ids[prefix:read]
            before = get(window)
            if before is None:
                before = miss(window)
            moved = False
        window = ids[prefix:n]
        after = get(window)
        if after is None:
            after = miss(window)
        if after.endswith("\ufffd") or len(after) <= len(before):
            append("")
            continue
        append(after[len(before) :])
        prefix, read, moved = read, n, True

    def decoded(window):  # the loop above inlines this lookup: it runs once per token
        out = get(window)
        return miss(window) if out is None else out

    tail, rest = decoded(ids[prefix:read]), decoded(ids[prefix:])
    append(rest[len(tail) :])
    return pieces
