"""The reference: stacktok's own encoder over the frozen artifact (the ground truth)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from conformance.backends import READS, shared_reference
from conformance.backends._base import BaseBackend
from conformance.core.layout import Exports
from conformance.core.protocol import Capability
from stacktok_export import StackTokenizer, __version__
from stacktok_export.chat.chat import render_conversation


class ReferenceBackend(BaseBackend):
    name = "reference"
    reads = READS[name]
    version = __version__
    capabilities = frozenset(Capability)

    def __init__(self, tok: StackTokenizer) -> None:
        self.tok = tok

    def encode(self, text: str, *, allow_special: bool) -> list[int]:
        return self.tok.encode(text, allowed_special="all" if allow_special else frozenset())

    def decode_bytes(self, ids: Sequence[int]) -> bytes:
        return self.tok.decode_bytes(ids)

    def default_encode(self, text: str) -> list[int]:
        return self.tok.encode(text)

    def chat(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        add_generation_prompt: bool,
        tools: Sequence[Mapping[str, Any]] | None = None,
        template_kwargs: Mapping[str, Any] | None = None,
    ) -> tuple[list[int], list[int]]:
        return render_conversation(messages, self.tok, add_generation_prompt=add_generation_prompt)


def load(exports: Exports) -> ReferenceBackend:
    return ReferenceBackend(shared_reference(exports.artifact))
