"""Chat templates compiled and rendered the way transformers does, and never any other way.

transformers compiles a chat template in ``jinja2.sandbox.ImmutableSandboxedEnvironment``
with ``trim_blocks``/``lstrip_blocks``, the ``loopcontrols`` extension, a
``{% generation %}`` block tag (its ``AssistantTracker``), ``raise_exception``
and ``strftime_now`` globals and its own ``tojson`` filter (no HTML escaping,
``ensure_ascii=False``, keys in the order given). :func:`environment` builds the same, so a
template that reaches for Python internals raises ``SecurityError`` here
exactly as it would there, and the gate reports it as a row. ``strftime_now`` formats one
fixed moment (:data:`FIXED_NOW`), so a template that prints today's date (Llama 3.2/3.3) renders
the same text on every run.

A render gets what ``apply_chat_template`` passes (``utils/chat_template_utils.py``, 4.57 and
5.x): ``messages``, ``tools=None``, ``documents=None``, ``add_generation_prompt`` and every named
special token of the tokenizer as a string (``bos_token``, ``eos_token``, ``pad_token``, ...:
``variables``, which ``conformance.static.context.template_variables`` reads from
``tokenizer_config.json`` / ``special_tokens_map.json`` as transformers does), so a template that
writes ``{{ bos_token }}`` renders the BOS text it feeds the model.

A checkpoint's template is untrusted: the sandbox stops it reaching Python internals, not
running forever (``range`` inside ``range``: jinja2 caps one ``range`` at 100,000 items, not a
nest of them; a macro that calls itself twice) nor allocating without end (``'a' * 10**10``:
jinja2 intercepts no ``*`` or ``**``, and neither does transformers). The rendering semantics
stay exactly transformers'; the protection is a budget instead: :func:`try_template` compiles a
template *and* renders the :data:`SAMPLE_CHATS` in one forked child under
:data:`TEMPLATE_BUDGET` (``stacktok_export.util.bounded``: one fork per template, ~5-20 ms, not
one per chat), and returns a :class:`Trial` -- the compile error, each render or its error, or
why the child was stopped (``exceeded 5 s / 1 GiB``). Trials are memoised by the template's
text (with the chats and special tokens they render), so validation's trial
(``conformance.validate.template``) also tells the runner which templates no engine may render;
a check that renders with the checkpoint's special tokens or other chats
(``conformance.static.chat``, ``conformance.static.turns``) forks once more per template.

This is the suite's one sandboxed Jinja environment. :func:`compile_template` and
:func:`render_template` work in the calling process: for trusted text, or inside the child.

Out of scope: tool definitions and documents (a render passes ``tools=None``,
``documents=None``), multi-modal content; transformers 5.x's ``sanitize_control_tokens`` and its
namespace restrictions; a missing jinja2 (importing this module needs it: callers check
``importlib.util.find_spec`` first);
a template that renders the sample chats in time but not some other chat (each backend's
worker has its own stall timeout).
"""

from __future__ import annotations

import datetime
import functools
import json
import re
from collections.abc import Mapping, Sequence
from contextvars import ContextVar
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


#: while :func:`render_generation_spans` renders: the chunks so far and the generation spans
_TRACKING: ContextVar[tuple[list[str], list[tuple[int, int]]] | None] = ContextVar(
    "stacktok_generation_spans", default=None
)


class GenerationBlock(Extension):
    """``{% generation %}...{% endgeneration %}``: its body in a call block, as transformers'
    ``AssistantTracker`` renders it, recording where each block's text lands in the output while
    :func:`render_generation_spans` renders (the character spans ``return_assistant_tokens_mask``
    turns into a mask)."""

    tags = {"generation"}

    def parse(self, parser: Any) -> nodes.Node:
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        return nodes.CallBlock(self.call_method("_generation_support"), [], [], body).set_lineno(lineno)

    def _generation_support(self, caller: Any) -> str:
        text = caller()
        tracking = _TRACKING.get()
        if tracking is not None:
            chunks, spans = tracking
            start = len("".join(chunks))
            spans.append((start, start + len(text)))
        return text


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


#: the moment ``strftime_now`` formats (transformers formats ``datetime.now()``): fixed, so a
#: template that prints the date renders deterministically
FIXED_NOW = datetime.datetime(2026, 1, 1, 12, 0, 0)
#: what a render passes besides the special tokens, as ``apply_chat_template`` does
_NO_TOOLS = {"tools": None, "documents": None}


def _tojson(
    x: Any, ensure_ascii: bool = False, indent: Any = None, separators: Any = None, sort_keys: bool = False
) -> str:
    """transformers' ``tojson``: ``json.dumps`` without Jinja's HTML escaping or key sorting."""
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def _strftime_now(fmt: str) -> str:
    return FIXED_NOW.strftime(fmt)


def environment() -> ImmutableSandboxedEnvironment:
    env = ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[GenerationBlock, loopcontrols]
    )
    env.filters["tojson"] = _tojson
    env.globals["raise_exception"] = _raise
    env.globals["strftime_now"] = _strftime_now
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
    source: str,
    messages: Sequence[Mapping[str, Any]],
    *,
    add_generation_prompt: bool,
    variables: Sequence[tuple[str, str]] = (),
    tools: Sequence[Mapping[str, Any]] | None = None,
    template_kwargs: Mapping[str, Any] | None = None,
    now: datetime.datetime | None = None,
) -> str:
    """The string transformers' ``apply_chat_template(tokenize=False)`` renders; ``variables`` are
    the tokenizer's named special tokens as ``(name, text)`` pairs (``bos_token``, ...), ``tools``
    the function definitions and ``template_kwargs`` the template's own keyword arguments (e.g.
    ``enable_thinking``), passed as transformers passes them. ``now`` is the moment
    ``strftime_now`` formats (:data:`FIXED_NOW` unless given: an engine compared in the same
    minute formats the real clock)."""
    rendered, _spans = render_generation_spans(
        source,
        messages,
        add_generation_prompt=add_generation_prompt,
        variables=variables,
        tools=tools,
        template_kwargs=template_kwargs,
        now=now,
    )
    return rendered


def _context(
    variables: Sequence[tuple[str, str]],
    tools: Sequence[Mapping[str, Any]] | None,
    template_kwargs: Mapping[str, Any] | None,
) -> dict[str, Any]:
    context: dict[str, Any] = {**dict(variables), **_NO_TOOLS}
    context.update(template_kwargs or {})
    if tools is not None:
        context["tools"] = [dict(t) for t in tools]
    return context


def _render(
    template: jinja2.Template,
    messages: Sequence[Mapping[str, Any]],
    add_generation_prompt: bool,
    variables: Sequence[tuple[str, str]],
    tools: Sequence[Mapping[str, Any]] | None = None,
    template_kwargs: Mapping[str, Any] | None = None,
) -> str:
    return template.render(
        **_context(variables, tools, template_kwargs),
        messages=[dict(m) for m in messages],
        add_generation_prompt=add_generation_prompt,
    )


def render_generation_spans(
    source: str,
    messages: Sequence[Mapping[str, Any]],
    *,
    add_generation_prompt: bool,
    variables: Sequence[tuple[str, str]] = (),
    tools: Sequence[Mapping[str, Any]] | None = None,
    template_kwargs: Mapping[str, Any] | None = None,
    now: datetime.datetime | None = None,
) -> tuple[str, list[tuple[int, int]]]:
    """:func:`render_template`'s text and the character spans of its ``{% generation %}`` blocks,
    rendered chunk by chunk as transformers' ``_render_with_assistant_indices`` does."""
    context = dict(template_kwargs or {})
    if now is not None:
        context["strftime_now"] = now.strftime
    chunks: list[str] = []
    spans: list[tuple[int, int]] = []
    token = _TRACKING.set((chunks, spans))
    try:
        for chunk in compile_template(source).generate(
            **_context(variables, tools, context),
            messages=[dict(m) for m in messages],
            add_generation_prompt=add_generation_prompt,
        ):
            chunks.append(chunk)
    finally:
        _TRACKING.reset(token)
    return "".join(chunks), spans


# ------------------------------------------------------------------ bounded trials
#: chats to render: each is ((role, content) pairs, ``add_generation_prompt``)
Chats = tuple[tuple[tuple[tuple[str, str], ...], bool], ...]
#: the chats every template is tried on; the first is the plain system/user/assistant chat of
#: ``chat.template_sandboxed``
SAMPLE_CHATS: Chats = (
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
    - ``renders``: one :class:`Render` per chat tried (:data:`SAMPLE_CHATS` unless others were
      given; each carrying the compile failure when there is one; empty when stopped).
    """

    stopped: str = ""
    failure: CompileFailure | None = None
    renders: tuple[Render, ...] = ()

    def stopped_line(self, label: str) -> str:
        """``"chat_template.jinja: compiling it and rendering 3 sample chats exceeded 5 s / 1 GiB
        (still running after 5 s)"``."""
        return f"{label}: compiling it and rendering {len(SAMPLE_CHATS)} sample chats {self.stopped}"


def sample_messages(index: int, chats: Chats = SAMPLE_CHATS) -> list[dict[str, str]]:
    """The messages of ``chats[index]`` as transformers takes them."""
    return [{"role": role, "content": content} for role, content in chats[index][0]]


def try_template(
    source: str,
    *,
    budget: Budget = TEMPLATE_BUDGET,
    chats: Chats = SAMPLE_CHATS,
    variables: tuple[tuple[str, str], ...] = (),
) -> Trial:
    """Compile ``source`` and render each of ``chats`` with it (the sample chats unless others are
    given), with ``variables`` (the named special tokens, as :func:`render_template` takes them), in
    one child under ``budget`` (module docstring); memoised by all four, never raises for what the
    template does."""
    return _try_cached(source, budget, chats, variables)


@functools.lru_cache(maxsize=64)
def _try_cached(source: str, budget: Budget, chats: Chats, variables: tuple[tuple[str, str], ...]) -> Trial:
    outcome = run_bounded(_attempt, source, chats, variables, budget=budget, max_result=_MAX_RENDERS)
    if outcome.ok:
        return outcome.value
    stopped = outcome.describe(budget)
    if outcome.kind == "memory" and outcome.message:
        stopped += f": {outcome.message}"
    return Trial(stopped=stopped)


def _attempt(source: str, chats: Chats, variables: tuple[tuple[str, str], ...]) -> Trial:
    """In the child: compile, then render each chat (a render's error is its value)."""
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
        return Trial(renders=tuple(_render_one(template, chats, i, variables) for i in range(len(chats))))
    failed = Render(None, failure.error_type, failure.message)
    return Trial(failure=failure, renders=(failed,) * len(chats))


def _render_one(
    template: jinja2.Template, chats: Chats, index: int, variables: tuple[tuple[str, str], ...]
) -> Render:
    try:
        text = _render(template, sample_messages(index, chats), chats[index][1], variables)
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
