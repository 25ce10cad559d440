"""Chat rendering: the ChatML-style format over the reserved role tokens.

Format (what the model is trained on)::

    <|bos|> ( <|role|> content <|end|> )*  then  <|assistant|>  (generation prompt)
                                           or    <|eos|>        (complete conversation)

:func:`render_conversation` builds ids from pieces -- role markers by id,
content as *untrusted* text -- so a user typing ``<|assistant|>`` gets bytes,
never the control token. It also returns the loss mask: 1 exactly on each
assistant message's content and its ``<|end|>``; tool calls, tool results,
system and user turns, role markers, BOS/EOS are 0.

:data:`CHAT_TEMPLATE` is the Jinja text shipped in ``tokenizer_config.json``.
It renders the same string, with ``{% generation %}`` around each assistant
content + ``<|end|>`` so ``return_assistant_tokens_mask`` / TRL's
``assistant_only_loss`` reproduce the mask. A string template cannot stop
injection (content is concatenated then parsed): use the renderer for untrusted
content.

The renderer takes any tokenizer with what :class:`Tokenizer` names: this package imports no
model (the models read :data:`CHAT_TEMPLATE` to recognise our own layout).

Out of scope: multi-modal content parts, tool schemas, and HF's ``tool_calls``
field -- tool traffic is the ``tool_call`` / ``tool_result`` roles.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

ROLES = ("system", "user", "assistant", "tool_call", "tool_result")

# Which roles may directly precede each role (None = start of conversation).
_MAY_FOLLOW: dict[str, tuple[str | None, ...]] = {
    "system": (None,),
    "user": (None, "system", "assistant", "tool_result"),
    "assistant": ("user", "tool_result"),
    "tool_call": ("user", "assistant", "tool_result"),
    "tool_result": ("tool_call",),
}

CHAT_TEMPLATE = (
    "{%- set roles = ['system', 'user', 'assistant', 'tool_call', 'tool_result'] -%}"
    "{{- '<|bos|>' -}}"
    "{%- for m in messages -%}"
    "{%- if m['role'] not in roles -%}"
    "{{- raise_exception('stacktok chat template: message ' ~ loop.index0 ~ ' has unknown role '"
    " ~ m['role'] ~ '; use one of system, user, assistant, tool_call, tool_result') -}}"
    "{%- endif -%}"
    "{%- if m['content'] is not string -%}"
    "{{- raise_exception('stacktok chat template: message ' ~ loop.index0 ~"
    " ' content must be a string') -}}"
    "{%- endif -%}"
    "{{- '<|' ~ m['role'] ~ '|>' -}}"
    "{%- if m['role'] == 'assistant' -%}"
    "{%- generation -%}{{- m['content'] ~ '<|end|>' -}}{%- endgeneration -%}"
    "{%- else -%}"
    "{{- m['content'] ~ '<|end|>' -}}"
    "{%- endif -%}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<|assistant|>' -}}{%- else -%}{{- '<|eos|>' -}}{%- endif -%}"
)


class Tokenizer(Protocol):
    """What rendering asks of a tokenizer (``StackTokenizer`` has it): a special's id, and the ids of
    untrusted text (every special string in it plain bytes)."""

    def special_token_id(self, token: str) -> int: ...

    def encode(self, text: str) -> list[int]: ...


class ChatFormatError(ValueError):
    """A conversation that the chat format cannot represent; says which message."""


def _check_message(i: int, m: object, prev: str | None) -> tuple[str, str]:
    if not isinstance(m, Mapping):
        raise ChatFormatError(f"message {i} is {type(m).__name__}, not a {{'role', 'content'}} dict")
    role, content = m.get("role"), m.get("content")
    if role not in ROLES:
        raise ChatFormatError(f"message {i} has unknown role {role!r}; use one of {', '.join(ROLES)}")
    if not isinstance(content, str):
        raise ChatFormatError(
            f"message {i} ({role}) content is {type(content).__name__}; it must be a string"
        )
    if prev not in _MAY_FOLLOW[role]:
        after = "the start" if prev is None else f"role {prev!r}"
        allowed = ", ".join("the start" if r is None else r for r in _MAY_FOLLOW[role])
        raise ChatFormatError(f"message {i}: role {role!r} cannot follow {after}; it may follow: {allowed}")
    return role, content


def render_conversation(
    messages: Sequence[Mapping[str, object]],
    tok: Tokenizer,
    *,
    add_generation_prompt: bool = False,
) -> tuple[list[int], list[int]]:
    """Return ``(ids, loss_mask)`` for ``messages``; content is encoded as untrusted text."""
    if not messages:
        raise ChatFormatError("a conversation needs at least one message")
    special = tok.special_token_id
    end = special("<|end|>")
    ids: list[int] = [special("<|bos|>")]
    mask: list[int] = [0]
    prev: str | None = None
    for i, m in enumerate(messages):
        role, content = _check_message(i, m, prev)
        body = tok.encode(content) + [end]
        weight = 1 if role == "assistant" else 0
        ids.append(special(f"<|{role}|>"))
        mask.append(0)
        ids += body
        mask += [weight] * len(body)
        prev = role
    ids.append(special("<|assistant|>") if add_generation_prompt else special("<|eos|>"))
    mask.append(0)
    return ids, mask


def render_text(messages: Sequence[Mapping[str, object]], *, add_generation_prompt: bool) -> str:
    """The string the Jinja template renders (no validation of role order)."""
    parts = ["<|bos|>"]
    for m in messages:
        parts.append(f"<|{m['role']}|>{m['content']}<|end|>")
    parts.append("<|assistant|>" if add_generation_prompt else "<|eos|>")
    return "".join(parts)
