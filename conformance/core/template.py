"""Chat templates compiled and rendered the way transformers does, and never any other way.

transformers compiles a chat template in ``jinja2.sandbox.ImmutableSandboxedEnvironment``
with ``trim_blocks``/``lstrip_blocks``, the ``loopcontrols`` extension, a
``{% generation %}`` block tag (its ``AssistantTracker``), ``raise_exception``
and ``strftime_now`` globals. :func:`environment` builds the same, so a
template that reaches for Python internals raises ``SecurityError`` here
exactly as it would there, and the gate reports it as a row.

A checkpoint's template is untrusted: the sandbox stops it reaching Python internals, not
running forever (``range`` inside ``range``: jinja2 caps one ``range`` at 100,000 items, not a
nest of them; a macro that calls itself twice) nor allocating without end (``'a' * 10**10``:
jinja2 intercepts no ``*`` or ``**``, and neither does transformers). The rendering semantics
stay exactly transformers'; the protection is a budget instead: :func:`try_template` compiles a
template *and* renders the :data:`SAMPLE_CHATS` in one forked child under
:data:`TEMPLATE_BUDGET` (``stacktok_export.util.bounded``: one fork per template, ~5-20 ms, not
one per chat), and returns a :class:`Trial` -- the compile error, each render or its error, or
why the child was stopped (``exceeded 5 s / 1 GiB``). Trials are memoised by the template's
text, so validation's trial (``conformance.validate.template``) also serves the static checks
(``conformance.static.chat``) and tells the runner which templates no engine may render.

This is the suite's one sandboxed Jinja environment. :func:`compile_template` and
:func:`render_template` work in the calling process: for trusted text, or inside the child.

Out of scope: transformers' tool/document arguments and multi-modal content; a missing
jinja2 (importing this module needs it: callers check ``importlib.util.find_spec`` first);
a template that renders the sample chats in time but not some other chat (each backend's
worker has its own stall timeout).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import jinja2
from jinja2 import nodes
from jinja2.ext import Extension, loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment

from stacktok_export.util.bounded import Budget, GiB, MiB, run_bounded
from stacktok_export.util.untrusted import escape

#: what one template's compile and sample renders may take together (a real template: ~10 ms)
TEMPLATE_BUDGET = Budget(seconds=5.0, memory=1 * GiB)


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


# ------------------------------------------------------------------ bounded trials
#: the chats every template is tried on: (role, content) pairs, ``add_generation_prompt``; the
#: first is the plain system/user/assistant chat of ``chat.template_sandboxed``
SAMPLE_CHATS: tuple[tuple[tuple[tuple[str, str], ...], bool], ...] = (
    ((("system", "Be brief."), ("user", "2+2?"), ("assistant", "4")), False),
    ((("user", "weather?"), ("tool_call", '{"city": "Oslo"}'), ("tool_result", '{"c": -3}')), True),
    ((("user", "  spaced\r\n  "),), True),
)
#: the bytes of renders one trial may send back (a sample chat renders to well under 1 KB)
_MAX_RENDERS = 16 * MiB


@dataclass(frozen=True)
class Render:
    """One sample chat rendered: its text, or the exception's type name and message."""

    text: str | None
    error_type: str = ""
    message: str = ""


@dataclass(frozen=True)
class CompileFailure:
    """Why a template does not compile: the exception's type name, message, template line if known."""

    error_type: str
    message: str
    lineno: int | None


@dataclass(frozen=True)
class Trial:
    """What :func:`try_template` found.

    - ``stopped``: why the child did not finish, e.g. ``exceeded 5 s / 1 GiB (out of memory)`` or
      ``died with SIGSEGV`` ("" when it did; then nothing else is known);
    - ``failure``: why the template does not compile (malformed input: exit 2 at validation);
    - ``renders``: one :class:`Render` per :data:`SAMPLE_CHATS` entry (each carrying the compile
      failure when there is one; empty when stopped).
    """

    stopped: str = ""
    failure: CompileFailure | None = None
    renders: tuple[Render, ...] = ()

    def stopped_line(self, label: str) -> str:
        """``"chat_template.jinja: compiling it and rendering 3 sample chats exceeded 5 s / 1 GiB
        (still running after 5 s)"``."""
        return f"{label}: compiling it and rendering {len(SAMPLE_CHATS)} sample chats {self.stopped}"


def sample_messages(index: int) -> list[dict[str, str]]:
    """The messages of ``SAMPLE_CHATS[index]`` as transformers takes them."""
    return [{"role": role, "content": content} for role, content in SAMPLE_CHATS[index][0]]


def try_template(source: str, *, budget: Budget = TEMPLATE_BUDGET) -> Trial:
    """Compile ``source`` and render every sample chat with it, in one child under ``budget``
    (module docstring); memoised by text and budget, never raises for what the template does."""
    return _try_cached(source, budget)


@functools.lru_cache(maxsize=64)
def _try_cached(source: str, budget: Budget) -> Trial:
    outcome = run_bounded(_attempt, source, budget=budget, max_result=_MAX_RENDERS)
    if outcome.ok:
        return outcome.value
    stopped = outcome.describe(budget)
    if outcome.kind == "memory" and outcome.message:
        stopped += f": {outcome.message}"
    return Trial(stopped=stopped)


def _attempt(source: str) -> Trial:
    """In the child: compile, then render each sample chat (a render's error is its value)."""
    try:
        template = compile_template(source)
    except jinja2.TemplateSyntaxError as exc:
        failure = CompileFailure(type(exc).__name__, str(exc.message or exc), exc.lineno)
    except TemplateCompileError as exc:
        failure = CompileFailure(type(exc).__name__, exc.message, exc.lineno)
    except MemoryError:
        raise
    except Exception as exc:  # noqa: BLE001 -- RecursionError (deep nesting), or any other refusal
        failure = CompileFailure(type(exc).__name__, str(exc)[:500], None)
    else:
        return Trial(renders=tuple(_render_one(template, i) for i in range(len(SAMPLE_CHATS))))
    failed = Render(None, failure.error_type, failure.message)
    return Trial(failure=failure, renders=(failed,) * len(SAMPLE_CHATS))


def _render_one(template: jinja2.Template, index: int) -> Render:
    try:
        gen = SAMPLE_CHATS[index][1]
        text = template.render(messages=sample_messages(index), add_generation_prompt=gen)
    except MemoryError:
        raise  # the budget's verdict, not the template's error: the whole trial is stopped
    except Exception as exc:  # noqa: BLE001 -- SecurityError, TemplateRaised, RecursionError ...
        return Render(None, type(exc).__name__, str(exc)[:500])
    return Render(text)


#: the JSON files whose ``chat_template`` transformers reads (validation compiles each)
_JSON_WITH_TEMPLATES = ("tokenizer_config.json", "chat_template.json")


def templates_of(files: Mapping[str, Any]) -> list[tuple[str, str]]:
    """Every chat template among a checkpoint's parsed files (name -> value, as validation read
    them), as ``(label, text)``: ``chat_template.jinja``, ``additional_chat_templates/x.jinja``,
    ``tokenizer_config.json chat_template``, ``tokenizer_config.json chat_template['tool_use']``,
    ``chat_template.json chat_template``; labels escaped for one line of a report."""
    out: list[tuple[str, str]] = []
    for name, value in files.items():
        label = escape(name)
        if name.endswith(".jinja") and isinstance(value, str):
            out.append((label, value))
        if name not in _JSON_WITH_TEMPLATES or not isinstance(value, dict):
            continue
        inline = value.get("chat_template")
        if isinstance(inline, str):
            out.append((f"{label} chat_template", inline))
        for item in inline if isinstance(inline, list) else ():
            if isinstance(item, dict) and isinstance(item.get("template"), str):
                out.append((f"{label} chat_template[{escape(repr(item.get('name')), 60)}]", item["template"]))
    return out


def stopped_templates(files: Mapping[str, Any]) -> list[tuple[str, Trial]]:
    """``(label, trial)`` of each template of ``files`` (:func:`templates_of`) whose trial was
    stopped; the trials are validation's (memoised), so this forks nothing after validation."""
    found = ((label, try_template(text)) for label, text in templates_of(files))
    return [(label, trial) for label, trial in found if trial.stopped]
