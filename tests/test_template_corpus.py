"""The reference chat renderer against transformers' own, on every real template the
llama-cpp-python sdist ships (``models/templates/*.jinja``: Llama 3.x, Qwen 2.5/3/3.5, DeepSeek,
Mistral, Command-R, gpt-oss, Gemma, Phi, Granite, ...) and every conversation shape of
``fixtures/conversations.jsonl``.

transformers' ``render_jinja_template`` (what ``apply_chat_template(tokenize=False)`` calls, 4.57
and 5.x) is the ground truth: each render must give the same text, or both must raise (a template
that refuses a shape: no tools, a role it does not know). The clock is the same for both
(``now``), as the gate's engine comparison uses it.

llama-cpp-python's ``Jinja2ChatFormatter`` (the chat handler of a GGUF's template) is held to
the same text.

Out of scope: llama-server (its input rewriting: ``tests/test_real_checkpoints.py``), vLLM and
TRL (``nox -s heavy``), tokenization (the gate's ``conformance.chat`` rows).
"""

from __future__ import annotations

import datetime

import pytest

from conformance.core.conversations import load_conversations
from conformance.core.fixtures import FIXTURES, _lines
from conformance.core.template import render_template

from .conftest import need
from .helpers import llama_vocab

pytestmark = [pytest.mark.llama_vocab, pytest.mark.transformers]

SPECIALS = {"bos_token": "<s>", "eos_token": "</s>"}
#: the publishers' templates the issue names: at least these must be in the sdist
NAMED = (
    "meta-llama-Llama-3.1-8B-Instruct",
    "meta-llama-Llama-3.2-3B-Instruct",
    "Qwen-Qwen2.5-7B-Instruct",
    "Qwen-Qwen3-0.6B",
    "deepseek-ai-DeepSeek-R1-Distill-Llama-8B",
    "CohereForAI-c4ai-command-r-plus-tool_use",
)


@pytest.fixture(scope="module")
def templates() -> dict[str, str]:
    return llama_vocab.all_templates(llama_vocab.sdist_or_fail())


def conversations():
    path = FIXTURES / "conversations.jsonl"
    return load_conversations(path, list(_lines(path)))


def _outcome(render, *args, **kwargs):
    try:
        return render(*args, **kwargs), None
    except Exception as exc:  # noqa: BLE001 -- a template's own refusal is an outcome
        return None, type(exc).__name__


def _ours(source: str, conv, now: datetime.datetime) -> str:
    return render_template(
        source,
        conv.messages("<|im_end|>"),
        add_generation_prompt=conv.add_generation_prompt,
        variables=tuple(SPECIALS.items()),
        tools=conv.tools(),
        template_kwargs=conv.template_kwargs(),
        now=now,
    )


def _theirs(source: str, messages, tools, gen: bool, kwargs) -> str:
    from transformers.utils.chat_template_utils import render_jinja_template

    rendered, _ = render_jinja_template(
        [messages], tools=tools, chat_template=source, add_generation_prompt=gen, **SPECIALS, **kwargs
    )
    return rendered[0]


def test_every_sdist_template_renders_as_transformers_renders_it(templates) -> None:
    need("transformers", "hf")

    assert len(templates) >= 60 and set(NAMED) <= set(templates), sorted(templates)
    now = datetime.datetime.now()
    renders = differ = refused = 0
    problems: list[str] = []
    for name, source in templates.items():
        for conv in conversations():
            messages, tools, kwargs = conv.messages("<|im_end|>"), conv.tools(), conv.template_kwargs()
            gen = conv.add_generation_prompt
            ours, our_err = _outcome(_ours, source, conv, now)
            theirs, their_err = _outcome(_theirs, source, messages, tools, gen, kwargs)
            renders += 1
            if our_err or their_err:
                refused += 1
                if bool(our_err) != bool(their_err):
                    problems.append(
                        f"{name} {conv.id}: ours {our_err or 'renders'}, theirs {their_err or 'renders'}"
                    )
            elif ours != theirs:
                differ += 1
                at = next(i for i, (a, b) in enumerate(zip(ours + "\0", theirs + "\0")) if a != b)
                problems.append(
                    f"{name} {conv.id}: differs at {at}: {ours[at : at + 30]!r} vs {theirs[at : at + 30]!r}"
                )
    assert not problems, "\n".join(problems[:20])
    # the set really exercises both: most shapes render, and some templates refuse some shapes
    assert renders >= 60 * 18 and 0 < refused < renders // 4, (renders, refused)
    assert differ == 0


def _formatted(formatter, messages, tools, kwargs) -> str:
    return formatter(messages=messages, tools=tools, **kwargs).prompt


def test_llama_cpp_pythons_chat_formatter_renders_every_sdist_template_as_the_reference(templates) -> None:
    """llama-cpp-python's ``Jinja2ChatFormatter`` (the chat handler ``Llama`` builds from a GGUF's
    template; the gate's ``conformance.chat[llama.cpp]``) gives the reference's text on every
    template and shape, or both raise."""
    need("llama_cpp", "llama")
    from llama_cpp.llama_chat_format import Jinja2ChatFormatter

    now = datetime.datetime.now()
    problems: list[str] = []
    refused = 0
    for name, source in templates.items():
        for conv in conversations():
            messages, tools, kwargs = conv.messages("<|im_end|>"), conv.tools(), conv.template_kwargs()
            gen = conv.add_generation_prompt
            ours, our_err = _outcome(_ours, source, conv, now)
            formatter = Jinja2ChatFormatter(
                source,
                eos_token=SPECIALS["eos_token"],
                bos_token=SPECIALS["bos_token"],
                add_generation_prompt=gen,
            )
            theirs, their_err = _outcome(_formatted, formatter, messages, tools, kwargs)
            refused += bool(our_err and their_err)
            if bool(our_err) != bool(their_err) or (not our_err and ours != theirs):
                problems.append(
                    f"{name} {conv.id}: ours {our_err or 'renders'}, theirs {their_err or 'renders'}"
                )
    assert not problems, "\n".join(problems[:20])
    assert 0 < refused < len(templates) * 18 // 4
