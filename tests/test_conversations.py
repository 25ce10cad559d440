"""Conversations as data (``fixtures/conversations.jsonl``, ``conformance.core.conversations``):
the shipped file covers the shapes clients send, and every malformed line is one error naming
the file, the line and the field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conformance.core.conversations import SPECIAL, load_conversations
from conformance.core.errors import FixtureError
from conformance.core.fixtures import FIXTURES, FixtureSet, _lines

SHIPPED = FIXTURES / "conversations.jsonl"


def load(path: Path):
    return load_conversations(path, list(_lines(path)))


def test_the_shipped_conversations_cover_the_shapes_clients_send() -> None:
    convs = load(SHIPPED)
    assert len({c.id for c in convs}) == len(convs) == 18
    messages = [m for c in convs for m in c.messages()]
    calls = [call for m in messages for call in m.get("tool_calls", [])]
    assert any(m["content"] is None for m in messages)
    assert any(isinstance(m["content"], list) for m in messages)
    assert {type(call["function"]["arguments"]) for call in calls} == {str, dict}
    assert any(len(m.get("tool_calls", [])) > 1 for m in messages)  # parallel calls
    assert any(m["role"] == "tool" for m in messages) and any("reasoning_content" in m for m in messages)
    assert any(c.tools() for c in convs) and any(c.template_kwargs() for c in convs)
    assert {c.add_generation_prompt for c in convs} == {True, False}
    assert any(m["role"] == "system" for m in messages)
    assert sum(c.injects for c in convs) == 2
    # the gate loads them with the shipped fixtures, and hashes the file for the report
    fs = FixtureSet.load()
    assert [c.id for c in fs.conversations] == [c.id for c in convs]
    assert "fixtures/conversations.jsonl" in fs.hashes


def test_the_control_token_is_typed_where_special_stands() -> None:
    conv = next(c for c in load(SHIPPED) if c.injects)
    typed = conv.messages('<|eot_id|>"')
    assert SPECIAL not in json.dumps(typed) and '<|eot_id|>"' in typed[0]["content"]
    assert SPECIAL in conv.messages()[0]["content"]  # kept as written without a token


def test_key_order_is_kept_as_written() -> None:
    conv = next(c for c in load(SHIPPED) if c.tools())
    assert list(conv.tools()[0]) == ["type", "function"]


USER = {"role": "user", "content": "hi"}
BAD = {
    "no id": ({"messages": [USER]}, "field 'id'"),
    "empty messages": ({"id": "a", "messages": []}, "field 'messages'"),
    "unknown role": ({"id": "a", "messages": [{"role": "robot", "content": "x"}]}, "role 'robot'"),
    "unknown key": ({"id": "a", "messages": [{**USER, "weight": 1}]}, "unknown field 'weight'"),
    "no content": ({"id": "a", "messages": [{"role": "user"}]}, "'content' is missing"),
    "null content alone": (
        {"id": "a", "messages": [{"role": "assistant", "content": None}]},
        "content null needs 'tool_calls'",
    ),
    "image part": (
        {"id": "a", "messages": [{"role": "user", "content": [{"type": "image_url", "image_url": "x"}]}]},
        "content part 0",
    ),
    "arguments not JSON": (
        {
            "id": "a",
            "messages": [
                {
                    "role": "assistant",
                    "content": "",
                    "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": "{oops"}}],
                }
            ],
        },
        "arguments is a string but not JSON",
    ),
    "tool calls on user": (
        {"id": "a", "messages": [{**USER, "tool_calls": [{"function": {"name": "f", "arguments": {}}}]}]},
        "only an assistant turn has 'tool_calls'",
    ),
    "bad tools": ({"id": "a", "messages": [USER], "tools": [{"name": "f"}]}, "tools[0]"),
    "bad kwargs": ({"id": "a", "messages": [USER], "template_kwargs": [1]}, "'template_kwargs'"),
    "bad flag": ({"id": "a", "messages": [USER], "add_generation_prompt": "yes"}, "'add_generation_prompt'"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_a_malformed_line_is_one_error_naming_file_line_and_field(case, tmp_path) -> None:
    obj, says = BAD[case]
    path = tmp_path / "c.jsonl"
    path.write_text(json.dumps({"id": "ok", "messages": [USER]}) + "\n" + json.dumps(obj) + "\n")
    with pytest.raises(FixtureError) as exc:
        load(path)
    message = str(exc.value)
    assert message.startswith(f"{path}:2: ") and says in message and "\n" not in message, message


def test_an_id_used_twice_is_refused(tmp_path) -> None:
    path = tmp_path / "c.jsonl"
    line = json.dumps({"id": "same", "messages": [USER]})
    path.write_text(f"{line}\n{line}\n")
    with pytest.raises(FixtureError, match="used twice"):
        load(path)
