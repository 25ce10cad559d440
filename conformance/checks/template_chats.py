"""Chats for an imported (v2) artifact: DIR's own chat template, rendered by each engine that
reads DIR, against the reference render of the same template.

The reference (:class:`TemplateReference`) renders DIR's template as transformers renders it
(``conformance.core.template``: the sandbox, ``tojson``, ``strftime_now``, the tokenizer's named
special tokens, ``tools`` and the template's keyword arguments) and tokenizes the text the way
every engine's documented chat path does -- special strings parsed, nothing added
(``apply_chat_template(tokenize=True)``, vLLM's chat endpoint, TRL on messages, llama-cpp-python's
``Jinja2ChatFormatter`` handler: ``add_bos=False, special=True``; llama-server's completion path,
which strips a template's BOS and adds it back). Each engine
(``Backend.chat`` with ``tools`` and ``template_kwargs``) must give the same ids on every
conversation of ``fixtures/conversations.jsonl`` (:mod:`conformance.core.conversations`) and the
user's ``--chats``:

- a conversation the template cannot render (it raises: no tool support, a role it refuses) on
  the reference *and* the engine is a refused shape, named in the row, not a failure -- every
  engine refuses it alike; an engine that raises where the reference renders (or renders where
  the reference raises) fails, naming the shape and the engine's error;
- a conversation that types the checkpoint's control token in user content (``{special}``) is an
  injection probe (``chat_injection``): unsafe when the engine's ids hold more control ids than
  the same conversation with a neutral word in that place.
- an engine whose chat path rewrites a conversation before its template sees it (its
  ``template_input`` trait: llama-server joins typed text parts, parses tool-call arguments and
  passes today's ``date_string``) differs *declared* where the reference rendered from the
  rewritten input gives exactly its ids, and fails where it does not.

Where the template marks generation (``{% generation %}``) and the engine returns a mask
(transformers' ``return_assistant_tokens_mask``), the mask must equal the reference's
(:meth:`TemplateReference.mask`, transformers' own span-to-token rule).

Out of scope: continue_final_message, documents (RAG), images.
"""

from __future__ import annotations

import bisect
import datetime
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from conformance.core.checkpoint_template import DirTemplate
from conformance.core.conversations import Conversation
from conformance.core.expect import control_ids, injection_special
from stacktok_export import StackTokenizer

#: what replaces the control token to count the control ids a conversation has by itself
NEUTRAL = "token"


@dataclass
class TemplateReference:
    """The reference side of a DIR-template chat: rendered text and the ids fed to the model."""

    template: DirTemplate
    ref: StackTokenizer

    def __post_init__(self) -> None:
        self.special = injection_special(self.ref)
        self.controls = control_ids(self.ref)

    def messages(self, conv: Conversation, *, neutral: bool = False) -> list[dict]:
        return conv.messages(NEUTRAL if neutral or self.special is None else self.special)

    def render(self, conv: Conversation, *, neutral: bool = False, rewrite: Any = None) -> str:
        """``conv`` rendered as transformers renders it; ``rewrite`` (a backend's
        ``template_input``) first rewrites it as that backend's chat path does."""
        return self.render_spans(conv, neutral=neutral, rewrite=rewrite)[0]

    def render_spans(
        self, conv: Conversation, *, neutral: bool = False, rewrite: Any = None
    ) -> tuple[str, list[tuple[int, int]]]:
        """:meth:`render` and the character spans of the template's ``{% generation %}`` blocks."""
        from conformance.core.template import render_generation_spans

        now = datetime.datetime.now()  # engines format the real clock (Llama 3.2's "Today Date")
        messages, context = self.messages(conv, neutral=neutral), {}
        if rewrite is not None:
            messages, context = rewrite(messages, now)
        tools = conv.tools()
        return render_generation_spans(
            self.template.choose(tools),
            messages,
            add_generation_prompt=conv.add_generation_prompt,
            variables=self.template.variables,
            tools=tools,
            template_kwargs={**context, **conv.template_kwargs()},
            now=now,
        )

    def mask(self, text: str, ids: Sequence[int], spans: Sequence[tuple[int, int]]) -> list[int]:
        """The assistant mask ``return_assistant_tokens_mask`` builds from ``spans``: from the token
        holding a span's first character to the one holding its last, 1 (transformers'
        ``char_to_token`` over the reference's token offsets)."""
        starts, at = [], 0  # each token's first byte
        for i in ids:
            starts.append(at)
            at += len(self.ref.decode_bytes([i]))
        char_byte, at = [], 0  # each character's first byte
        for ch in text:
            char_byte.append(at)
            at += len(ch.encode("utf-8"))

        def char_to_token(c: int) -> int | None:
            if not 0 <= c < len(char_byte):
                return None
            return bisect.bisect_right(starts, char_byte[c]) - 1

        out = [0] * len(ids)
        for start, end in spans:
            first, last = char_to_token(start), char_to_token(end - 1)
            if first is None:
                break
            for k in range(first, last + 1 if last is not None else len(ids)):
                out[k] = 1
        return out

    def ids(self, text: str) -> list[int]:
        """What a chat path feeds the model for rendered ``text``: specials parsed, nothing added."""
        return self.ref.encode(text, allowed_special="all")

    def control_count(self, ids: Sequence[int]) -> int:
        return sum(1 for i in ids if i in self.controls)


def has_assistant(conv: Conversation) -> bool:
    return any(m.get("role") == "assistant" for m in conv.messages())


def refused_shapes_note(refused: Sequence[str]) -> str:
    """The part of a chat row naming the shapes the template refuses on every engine alike."""
    if not refused:
        return ""
    return (
        f"; the template raises on {len(refused)} shape(s) on the reference and here alike: "
        + ", ".join(refused[:6])
        + (" ..." if len(refused) > 6 else "")
    )
