"""What the checkpoint's own chat template feeds the model: the BOS it starts with, the id that
ends an assistant turn -- judged by behaviour, for an imported (v2) artifact.

The directory's template is rendered as transformers renders it (``conformance.core.template``:
the bounded sandbox, with the tokenizer's named special tokens, so ``{{ bos_token }}`` renders)
on two chats -- a user turn with the generation prompt, and a finished user/assistant chat --
and the reference tokenizes the text the way each documented path does:

- the chat paths, :data:`CHAT_PATHS`: ``apply_chat_template(tokenize=True)`` encodes the
  rendered text with ``add_special_tokens=False`` (transformers 4.57 and 5.x), and so do vLLM's
  chat endpoint and TRL on ``messages``: the rendered ids, nothing added;
- the two-step path, :data:`TWO_STEP`: ``tokenizer(apply_chat_template(chat, tokenize=False))``
  with its defaults (``add_special_tokens=True``; also the path of :data:`TWO_STEP_USERS`): the
  same ids plus what the tokenizer files add to every encode (:func:`added_ids`).

Rows (the v1 layout keeps its own, ``conformance.static.config``):

- ``config.no_double_bos`` (:func:`bos_row`): every path starts with exactly one BOS and adds no
  EOS. It fails where the chat paths feed two BOS (the template writes it twice) and where the
  files add a BOS or EOS the source does not (the artifact's ``add_bos`` / ``add_eos``), naming the
  file and key. Where the files add BOS on every encode *as the source does* and the template
  writes it too -- Meta's Llama 3.x as published -- every chat path feeds one BOS and only the
  two-step path feeds two: a warning that says who is affected. No BOS on the chat paths while
  the source adds one warns as well (the engines then disagree).
- ``chat.turn_end`` (:func:`turn_end_row`): the template ends an assistant turn with a control
  token -- the id the model learns to emit and generation stops at; one that drops it fails.
  :func:`turn_end_id` gives ``config.eos_stops_turns`` the id it must find among the stop ids.

Out of scope: the GGUF's template and llama.cpp's BOS handling (``gguf.*`` rows); tool-call turns
(Llama 3.1's ``<|eom_id|>`` in ipython mode); how each engine renders (the conformance rows);
tokenizer classes that rebuild the post-processor themselves in 4.57 (``LlamaTokenizerFast``).
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from typing import Any

from conformance.core.expect import control_ids, role_id
from conformance.core.rows import FILES, Row, skip
from conformance.static.context import StaticContext
from conformance.static.hf_files import post_added_tokens

QUESTION, ANSWER = "What is 2+2?", "It is 4."
#: what is rendered: the prompt a chat path feeds the model, and a finished assistant turn
CHATS = (
    ((("user", QUESTION),), True),
    ((("user", QUESTION), ("assistant", ANSWER)), False),
)
CHAT_PATHS = "apply_chat_template(tokenize=True), vLLM's chat endpoint and TRL on messages"
TWO_STEP = "tokenizer(apply_chat_template(chat, tokenize=False))"
#: who else tokenizes a rendered chat with the defaults (``add_special_tokens=True``)
TWO_STEP_USERS = "vLLM's generate and /v1/completions on a rendered prompt, TRL on a rendered text field"
POST = "tokenizer.json post_processor"
FLAGS = "tokenizer_config.json add_bos_token/add_eos_token"


@dataclass(frozen=True)
class Turns:
    """The two chats rendered and tokenized by the reference (special strings parsed)."""

    prompt: list[int] | None = None
    #: the ids after the assistant's content in the finished chat, and their text
    tail: list[int] | None = None
    tail_text: str = ""
    #: the first control id after the user's content in the prompt (how the template closes a turn)
    user_end: int | None = None
    why: str = ""  # why nothing was rendered
    no_jinja2: bool = False  # nothing can be rendered here: the rows are ``missing``


#: the row of a check that needs a render when jinja2 is not installed (the verdict is INCOMPLETE)
NO_JINJA2 = "not checked: the chat template was not rendered: jinja2 is not installed"


def render_turns(ctx: StaticContext) -> Turns:
    """Render :data:`CHATS` with the directory's template (one bounded trial, memoised)."""
    if ctx.template is None:
        return Turns(why="no chat template")
    if importlib.util.find_spec("jinja2") is None:
        return Turns(why="jinja2 is not installed", no_jinja2=True)
    from conformance.core.template import try_template

    trial = try_template(ctx.template, chats=CHATS, variables=ctx.template_vars)
    if trial.stopped or not trial.renders:
        return Turns(why=f"rendering it {trial.stopped or 'failed'} (see chat.template_sandboxed)")
    prompt, turn = trial.renders
    if prompt.text is None or turn.text is None:
        bad = prompt if prompt.text is None else turn
        return Turns(why=f"it raised on a plain user/assistant chat ({bad.error_type}: {bad.message[:120]})")

    def encode(text: str) -> list[int]:
        return ctx.ref.encode(text, allowed_special="all")

    at, asked = turn.text.rfind(ANSWER), prompt.text.find(QUESTION)
    tail_text = turn.text[at + len(ANSWER) :] if at >= 0 else ""
    user_end = _first_control(ctx, encode(prompt.text[asked + len(QUESTION) :])) if asked >= 0 else None
    tail = encode(tail_text) if at >= 0 else None
    return Turns(encode(prompt.text), tail, tail_text, user_end)


def _first_control(ctx: StaticContext, ids: list[int]) -> int | None:
    controls = control_ids(ctx.ref)
    return next((i for i in ids if i in controls), None)


def _name(ctx: StaticContext, i: int | None) -> str:
    return f"{i} {ctx.ref.id_to_special.get(i, '')}".strip() if i is not None else "none"


# ------------------------------------------------------------------ the end of an assistant turn
def turn_end_id(ctx: StaticContext, turns: Turns | None = None) -> int | None:
    """The first control id after an assistant's content: where generation must stop (None when
    the template cannot be rendered or ends the turn with none)."""
    turns = turns or render_turns(ctx)
    return _first_control(ctx, turns.tail) if turns.tail is not None else None


def turn_end_row(ctx: StaticContext) -> Row:
    """``chat.turn_end``: the template ends an assistant turn with a control token."""
    turns = render_turns(ctx)
    if turns.no_jinja2:
        return Row("chat.turn_end", FILES, "missing", NO_JINJA2, "pip install 'stacktok[hf]'")
    if turns.tail is None:
        return skip("chat.turn_end", turns.why or "the assistant's content is not in the render")
    end = turn_end_id(ctx, turns)
    if end is not None:
        return Row("chat.turn_end", FILES, "pass", f"an assistant turn ends with {_name(ctx, end)}")
    closer = ctx.ref.id_to_special.get(turns.user_end) if turns.user_end is not None else None
    how = f"close them with {closer} as user turns are" if closer else "close them with the end-of-turn token"
    return Row(
        "chat.turn_end",
        FILES,
        "fail",
        f"{ctx.template_source} ends an assistant turn with no special token ({ANSWER!r} is followed by "
        f"{turns.tail_text[:60]!r}): a model tuned on it never learns to end its turn, and generation "
        "has no end-of-turn id to stop at (llama.cpp#6772)",
        f"in {ctx.template_source}, {how}, and list that id in generation_config.json eos_token_id",
    )


# ------------------------------------------------------------------ BOS/EOS on every path
def added_ids(ctx: StaticContext) -> dict[str, tuple[set[int], str]]:
    """What ``tokenizer(text)`` adds to every encode, per transformers major: ``{"5.x": (ids,
    where), "4.57": (ids, where)}``. 5.x rebuilds the post-processor from ``add_bos_token`` /
    ``add_eos_token`` when ``tokenizer_config.json`` sets either (``TokenizersBackend``); 4.57's
    ``PreTrainedTokenizerFast`` runs ``tokenizer.json``'s post-processor as it is."""
    tcfg, post = ctx.obj("tokenizer_config.json"), ctx.obj("tokenizer.json").get("post_processor")
    post_ids = {
        ctx.ids[t] for t in (post_added_tokens(post) if isinstance(post, dict) else []) if t in ctx.ids
    }
    if "add_bos_token" not in tcfg and "add_eos_token" not in tcfg:
        return {"5.x": (post_ids, POST), "4.57": (post_ids, POST)}
    flags = {
        ctx.ids.get(_content(tcfg.get(f"{k}_token")), -1)
        for k in ("bos", "eos")
        if tcfg.get(f"add_{k}_token")
    }
    return {"5.x": (flags - {-1}, FLAGS), "4.57": (post_ids, POST)}


def _content(value: Any) -> str:
    value = value.get("content") if isinstance(value, dict) else value
    return value if isinstance(value, str) else ""


def _leading(ids: list[int], bos: int) -> int:
    n = 0
    while n < len(ids) and ids[n] == bos:
        n += 1
    return n


def bos_row(ctx: StaticContext) -> Row | None:
    """``config.no_double_bos`` on a directory with a template (module docstring); None when the
    template does not render a plain chat (``chat.template_sandboxed`` says so; the files are then
    judged as the source adds BOS/EOS)."""
    turns = render_turns(ctx)
    if turns.no_jinja2:
        return Row("config.no_double_bos", FILES, "missing", NO_JINJA2, "pip install 'stacktok[hf]'")
    if turns.prompt is None:
        return None
    ref, tcfg = ctx.ref, ctx.obj("tokenizer_config.json")
    bos = role_id(ref, "bos")
    bos = bos if bos is not None else ctx.ids.get(_content(tcfg.get("bos_token")))
    eos = {i for i in (role_id(ref, "eos"), ctx.ids.get(_content(tcfg.get("eos_token")))) if i is not None}
    added, lead = added_ids(ctx), _leading(turns.prompt, bos) if bos is not None else 0
    shown = f"{turns.prompt[:4]}"[:-1] + ", ...]"
    name = ref.id_to_special.get(bos, "BOS") if bos is not None else "BOS"
    if lead >= 2:
        return Row(
            "config.no_double_bos",
            FILES,
            "fail",
            f"{ctx.template_source} writes {name} {lead} times at the start: {CHAT_PATHS} feed {shown}",
            f"write bos_token once, at the start of {ctx.template_source} (vLLM PR#16976)",
        )
    doubled = {m: w for m, (ids, w) in added.items() if bos is not None and bos in ids and lead}
    tails = {m: w for m, (ids, w) in added.items() if ids & eos}
    if doubled or tails:
        return _two_step_row(ctx, doubled, tails, shown=shown, bos=bos)
    if lead == 0 and ref.add_bos and bos is not None:
        return Row(
            "config.no_double_bos",
            FILES,
            "warn",
            f"{ctx.template_source} writes no {name} and the source adds one to every encode: {CHAT_PATHS} "
            f"feed {shown} without it, while {TWO_STEP} starts with it",
            f"start {ctx.template_source} with {{{{ bos_token }}}} if the model was tuned with {name}",
        )
    return Row("config.no_double_bos", FILES, "pass", f"one {name} on every path: {CHAT_PATHS} feed {shown}")


def _versions(found: dict[str, str]) -> str:
    return "transformers " + " and ".join(found)


def _two_step_row(
    ctx: StaticContext,
    doubled: dict[str, str],
    tails: dict[str, str],
    *,
    shown: str,
    bos: int | None,
) -> Row:
    """The template writes one BOS and the files add another (or an EOS) on ``tokenizer(text)``."""
    ref, parts = ctx.ref, []
    if doubled:
        where = " / ".join(sorted(set(doubled.values())))
        parts.append(
            f"{TWO_STEP} starts [{bos}, {bos}, ...] under "
            f"{_versions(doubled)}: {ctx.template_source} writes {ref.id_to_special.get(bos, bos)} and "
            f"{where} adds it again"
        )
    if tails:
        where = " / ".join(sorted(set(tails.values())))
        parts.append(f"{where} appends an eos after the generation prompt under {_versions(tails)}")
    as_source = (not doubled or ref.add_bos) and (not tails or ref.add_eos)
    who = f"affects whoever tokenizes a rendered chat with the defaults ({TWO_STEP_USERS})"
    only_template = (
        "set add_bos_token and add_eos_token false in tokenizer_config.json and drop the special tokens "
        "from tokenizer.json post_processor (4.57 reads only the post-processor), so only the template "
        "adds them"
    )
    if as_source:
        return Row(
            "config.no_double_bos",
            FILES,
            "warn",
            f"{'; '.join(parts)} -- the tokenizer adds it as the source does; {who}; {CHAT_PATHS} "
            f"feed one: {shown}",
            "tokenize a rendered chat with add_special_tokens=False; for every path to be safe, "
            + only_template,
        )
    source = f"the source adds {'BOS' if ref.add_bos else 'no BOS'} and {'EOS' if ref.add_eos else 'no EOS'}"
    return Row(
        "config.no_double_bos",
        FILES,
        "fail",
        f"{'; '.join(parts)}; {source} -- {who} (vLLM PR#16976, trl#3856)",
        only_template,
    )
