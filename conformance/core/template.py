"""Chat templates compiled and rendered the way transformers does, and never any other way.

transformers compiles a chat template in ``jinja2.sandbox.ImmutableSandboxedEnvironment``
with ``trim_blocks``/``lstrip_blocks``, the ``loopcontrols`` extension, a
``{% generation %}`` block tag (its ``AssistantTracker``), ``raise_exception``
and ``strftime_now`` globals. :func:`environment` builds the same, so a
template that reaches for Python internals raises ``SecurityError`` here
exactly as it would there, and the gate reports it as a row.

This is the suite's one sandboxed Jinja environment: validation compiles every chat
template with :func:`compile_template` (``conformance.validate.template``), the static
checks render with :func:`render_template`.

Out of scope: transformers' tool/document arguments and multi-modal content; a missing
jinja2 (importing this module needs it: callers check ``importlib.util.find_spec`` first).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import jinja2
from jinja2 import nodes
from jinja2.ext import Extension, loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment


class GenerationBlock(Extension):
    """``{% generation %}...{% endgeneration %}``: renders its body (the mask is transformers' job)."""

    tags = {"generation"}

    def parse(self, parser: Any) -> nodes.Node:
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        return nodes.Scope(body, lineno=lineno)


class TemplateCompileError(Exception):
    """Jinja parsed the template but Python cannot compile what it generated (``{% break %}``
    outside a loop is a Python ``SyntaxError``); ``lineno`` is the template line when known."""

    def __init__(self, message: str, lineno: int) -> None:
        super().__init__(message)
        self.message, self.lineno = message, lineno


_LOOP_CONTROL = re.compile(r"\{%[-+]?\s*(?:break|continue)\b")


class TemplateRaised(Exception):
    """The template called ``raise_exception`` (its own validation)."""


def _raise(message: str) -> None:
    raise TemplateRaised(message)


def environment() -> ImmutableSandboxedEnvironment:
    env = ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[GenerationBlock, loopcontrols]
    )
    env.globals["raise_exception"] = _raise
    env.globals["strftime_now"] = lambda fmt: "2026-01-01"
    return env


def compile_template(source: str) -> jinja2.Template:
    """Parse ``source``; raises ``jinja2.TemplateSyntaxError`` (with ``lineno``) on bad syntax and
    :class:`TemplateCompileError` when the generated Python does not compile."""
    try:
        return environment().from_string(source)
    except SyntaxError as exc:  # jinja2's own TemplateSyntaxError is not a SyntaxError
        found = _LOOP_CONTROL.search(source)
        lineno = source.count("\n", 0, found.start()) + 1 if found else 1
        where = "a loop control outside any loop" if found else "the compiled template"
        raise TemplateCompileError(f"{exc.msg} ({where})", lineno) from exc


def render_template(
    source: str, messages: Sequence[Mapping[str, Any]], *, add_generation_prompt: bool
) -> str:
    """The string transformers' ``apply_chat_template(tokenize=False)`` renders."""
    return compile_template(source).render(
        messages=[dict(m) for m in messages], add_generation_prompt=add_generation_prompt
    )
