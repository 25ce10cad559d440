"""Conversations as data: the shapes clients really send (OpenAI chat wire format), JSONL.

``fixtures/conversations.jsonl`` holds one conversation per line with a stable ``id``, a
``shape`` (what it exercises, shown in rows), ``messages``, optional ``tools`` (function
definitions), ``add_generation_prompt`` and ``template_kwargs`` (keyword arguments a template
reads, e.g. ``enable_thinking``). A message is what an OpenAI-compatible client posts:

- ``role``: ``system``, ``developer``, ``user``, ``assistant`` or ``tool``;
- ``content``: a string, ``null`` (an assistant turn that only calls tools), or a list of typed
  parts (``{"type": "text", "text": ...}``);
- assistant ``tool_calls``: ``[{"id", "type": "function", "function": {"name", "arguments"}}]``
  with ``arguments`` a JSON string (the wire format) or an object (what many templates expect);
- ``tool`` results with ``tool_call_id``; ``reasoning_content`` (reasoning models); ``name``.

A content string may hold ``{special}``: the runner types the checkpoint's own control token
there (:func:`conformance.core.expect.injection_special`), so one file probes injection through
chats for any vocabulary. A line that breaks these rules is one :class:`FixtureError` naming the
file, line and field.

Users pass their own with ``--chats`` (the ``chats.jsonl`` shape: string content, our roles),
which are conversations too (:func:`from_chat`).

Out of scope: rendering (``conformance.core.template``), images/audio parts (a typed part other
than ``text`` is refused: this suite checks text tokenizers), the ChatML layout's own chats
(``chats.jsonl``, rendered by ``stacktok_export.chat``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from conformance.core.errors import FixtureError

ROLES = ("system", "developer", "user", "assistant", "tool")
#: where a conversation's content gets the checkpoint's control token
SPECIAL = "{special}"
_MESSAGE_KEYS = {"role", "content", "tool_calls", "tool_call_id", "reasoning_content", "name"}


@dataclass(frozen=True)
class Conversation:
    """One conversation; JSON fields are kept as JSON text (hashable, immutable; key order kept)."""

    id: str
    shape: str
    messages_json: str
    add_generation_prompt: bool = False
    tools_json: str = "null"
    kwargs_json: str = "{}"

    @property
    def injects(self) -> bool:
        """Whether some content types the checkpoint's control token (``{special}``)."""
        return SPECIAL in self.messages_json

    def messages(self, special: str | None = None) -> list[dict[str, Any]]:
        """The messages, with ``{special}`` replaced by ``special`` (kept as typed when None)."""
        text = self.messages_json
        if special is not None:
            text = text.replace(SPECIAL, json.dumps(special)[1:-1])
        return json.loads(text)

    def tools(self) -> list[dict[str, Any]] | None:
        return json.loads(self.tools_json)

    def template_kwargs(self) -> dict[str, Any]:
        return json.loads(self.kwargs_json)


def _canonical(value: Any) -> str:
    """JSON text of ``value`` with keys in the order given: templates print objects (``tojson``)
    in the order a client sent them, so the order is part of the conversation."""
    return json.dumps(value, ensure_ascii=False)


def from_chat(chat: Any) -> Conversation:
    """A ``chats.jsonl`` chat (``conformance.core.fixtures.Chat``) as a conversation."""
    return Conversation(
        id=chat.id,
        shape="user chat (--chats)",
        messages_json=_canonical([dict(m) for m in chat.messages]),
        add_generation_prompt=chat.add_generation_prompt,
    )


def _content(value: Any, where: str) -> None:
    if value is None or isinstance(value, str):
        return
    if not isinstance(value, list) or not value:
        raise FixtureError(f"{where}: 'content' must be a string, null or a non-empty list of text parts")
    for j, part in enumerate(value):
        if not (
            isinstance(part, Mapping) and part.get("type") == "text" and isinstance(part.get("text"), str)
        ):
            raise FixtureError(
                f'{where}: content part {j} must be {{"type": "text", "text": "..."}} '
                "(images and audio are out of scope for a text tokenizer)"
            )


def _tool_calls(value: Any, where: str) -> None:
    if not isinstance(value, list) or not value:
        raise FixtureError(f"{where}: 'tool_calls' must be a non-empty list")
    for j, call in enumerate(value):
        fn = call.get("function") if isinstance(call, Mapping) else None
        if not isinstance(fn, Mapping) or not isinstance(fn.get("name"), str):
            raise FixtureError(f"{where}: tool_calls[{j}] needs 'function' with a string 'name'")
        args = fn.get("arguments")
        if not isinstance(args, (str, Mapping)):
            raise FixtureError(
                f"{where}: tool_calls[{j}].function.arguments must be a JSON string or an object"
            )
        if isinstance(args, str):
            try:
                json.loads(args)
            except ValueError:
                raise FixtureError(
                    f"{where}: tool_calls[{j}].function.arguments is a string but not JSON; "
                    "clients send arguments as JSON text"
                ) from None


def check_message(message: Any, where: str) -> None:
    """One message of the OpenAI wire format (module docstring); raises FixtureError."""
    if not isinstance(message, Mapping):
        raise FixtureError(f"{where}: a message must be an object with 'role' and 'content'")
    role = message.get("role")
    if role not in ROLES:
        raise FixtureError(f"{where}: role {role!r} is not one of {', '.join(ROLES)}")
    unknown = sorted(set(message) - _MESSAGE_KEYS)
    if unknown:
        raise FixtureError(
            f"{where}: unknown field {unknown[0]!r}; a message has {', '.join(sorted(_MESSAGE_KEYS))}"
        )
    if "content" not in message:
        raise FixtureError(f"{where}: 'content' is missing (null is allowed beside tool_calls)")
    _content(message["content"], where)
    if message["content"] is None and role != "assistant":
        raise FixtureError(f"{where}: only an assistant turn may have content null")
    if "tool_calls" in message:
        if role != "assistant":
            raise FixtureError(f"{where}: only an assistant turn has 'tool_calls'")
        _tool_calls(message["tool_calls"], where)
    elif message["content"] is None:
        raise FixtureError(f"{where}: content null needs 'tool_calls' beside it")
    for key in ("tool_call_id", "reasoning_content", "name"):
        if key in message and not isinstance(message[key], str):
            raise FixtureError(f"{where}: {key!r} must be a string")


def _tools(value: Any, where: str) -> None:
    if value is None:
        return
    if not isinstance(value, list) or not value:
        raise FixtureError(f"{where}: 'tools' must be a non-empty list of function definitions")
    for j, tool in enumerate(value):
        fn = tool.get("function") if isinstance(tool, Mapping) else None
        if (
            tool.get("type") != "function"
            or not isinstance(fn, Mapping)
            or not isinstance(fn.get("name"), str)
        ):
            raise FixtureError(
                f'{where}: tools[{j}] must be {{"type": "function", "function": {{"name": ...}}}}'
            )


def parse_line(obj: Mapping[str, Any], where: str) -> Conversation:
    """One line's object as a :class:`Conversation` (``where`` is ``file:line`` for errors)."""
    cid = obj.get("id")
    if not isinstance(cid, str) or not cid:
        raise FixtureError(f"{where}: field 'id' must be a non-empty string")
    messages = obj.get("messages")
    if not isinstance(messages, list) or not messages:
        raise FixtureError(f"{where}: field 'messages' must be a non-empty list")
    for i, message in enumerate(messages):
        check_message(message, f"{where}: message {i}")
    _tools(obj.get("tools"), where)
    kwargs = obj.get("template_kwargs", {})
    if not isinstance(kwargs, Mapping):
        raise FixtureError(f"{where}: field 'template_kwargs' must be an object")
    gen = obj.get("add_generation_prompt", False)
    if not isinstance(gen, bool):
        raise FixtureError(f"{where}: field 'add_generation_prompt' must be true or false")
    shape = obj.get("shape", "")
    if not isinstance(shape, str):
        raise FixtureError(f"{where}: field 'shape' must be a string")
    return Conversation(
        id=cid,
        shape=shape or cid,
        messages_json=_canonical(messages),
        add_generation_prompt=gen,
        tools_json=_canonical(obj.get("tools")),
        kwargs_json=_canonical(dict(kwargs)),
    )


def load_conversations(path: Path, lines: list[tuple[int, dict[str, Any]]]) -> list[Conversation]:
    """Conversations from ``lines`` (``conformance.core.fixtures`` reads and parses the file)."""
    out: list[Conversation] = []
    seen: set[str] = set()
    for lineno, obj in lines:
        conv = parse_line(obj, f"{path}:{lineno}")
        if conv.id in seen:
            raise FixtureError(
                f"{path}:{lineno}: conversation id {conv.id!r} is used twice; ids must be unique"
            )
        seen.add(conv.id)
        out.append(conv)
    return out
