"""The chat template: present, the same in every file that carries it, safe in transformers'
sandbox, rendering the trained format, and marking assistant turns for assistant-only loss.

Two templates with different text that render the sample chats identically *warn*; chat
templates that reach for Python internals fail; templates without ``{% generation %}`` fail
(TRL PR#4201) in our layout, and warn on an imported artifact (a stock template almost never
has them; only assistant-only fine-tuning is affected: the fix points to a training template).
An imported artifact's template must end an assistant turn with a control token
(``chat.turn_end``, ``conformance.static.turns``). Every render gets the tokenizer's named
special tokens (``bos_token``, ...), as transformers passes them. The GGUF's
``tokenizer.chat_template`` is compared with the Hugging Face one.
Without jinja2 nothing can be rendered: each row that needs a render is ``missing`` (the
verdict is then INCOMPLETE, never a pass on a template nobody rendered).

Every render here is a bounded trial (``conformance.core.template.try_template``: compile and
the sample chats in one forked child under 5 s / 1 GiB, memoised, so DIR's templates were
already tried at validation). A template of DIR that ran out of its budget -- the default one,
an ``additional_chat_templates/*.jinja`` or a named inline one -- fails
``chat.template_sandboxed``, naming the file and the budget (the runner then asks no engine to
render DIR's templates: ``conformance.validate.template.template_refusal``).

Out of scope: how each backend renders chats (``conformance.chat`` rows of the runner); the
template's ids (the conformance checks tokenize what it renders).
"""

from __future__ import annotations

import importlib.util
from typing import Any

from conformance.core.checkpoint_template import chat_template
from conformance.core.expect import is_ours
from conformance.core.rows import FILES, Row, row, skip
from conformance.static.context import StaticContext
from conformance.static.turns import turn_end_row
from stacktok_export.chat.chat import render_text

#: where assistant-only loss gets its markers when the stock template has none
TRAINING_TEMPLATES = "TRL ships *_training.jinja variants in trl/chat_templates/, e.g. llama3_training.jinja"


def check_chat_files(ctx: StaticContext) -> list[Row]:
    if ctx.dir is None:
        return [skip("chat", "no tokenizer directory")]
    stopped = _stopped(ctx)
    if ctx.template is None:  # an additional or named template may still be a bomb
        return [_no_template(ctx)] + ([_stopped_row(stopped)] if stopped else [])
    tcfg = ctx.obj("tokenizer_config.json")
    inline, jinja = chat_template(tcfg, None)[0], ctx.files.get("chat_template.jinja")
    source = None if is_ours(ctx.ref) else ctx.ref.chat_template
    out = [Row("chat.template_present", FILES, "pass", f"from {ctx.template_source}")]
    if inline is not None and jinja is not None:
        out.append(
            _same_template(
                "chat.template_files_agree",
                inline,
                jinja,
                "tokenizer_config.json chat_template and chat_template.jinja",
                "make both the exported template (transformers uses the .jinja file, tools that read "
                "tokenizer_config.json the other)",
                variables=ctx.template_vars,
            )
        )
    else:
        out.append(skip("chat.template_files_agree", f"one template only ({ctx.template_source})"))
    if not is_ours(ctx.ref):
        out.append(_matches_source(ctx.template, source, variables=ctx.template_vars))
    out.append(
        _stopped_row(stopped)
        if stopped
        else _template_sandboxed(
            ctx.template, source=source, ours=is_ours(ctx.ref), variables=ctx.template_vars
        )
    )
    out.append(_generation_markers(ctx))
    if not is_ours(ctx.ref):
        out.append(turn_end_row(ctx))
    if ctx.gguf_ok():
        out.append(
            _same_template(
                "gguf.chat_template",
                ctx.gguf_value("tokenizer.chat_template"),
                ctx.template,
                f"the GGUF's tokenizer.chat_template and the HF one ({ctx.template_source})",
                ctx.gguf_fix,
                variables=ctx.template_vars,
            )
        )
    else:
        out.append(skip("gguf.chat_template", ctx.no_gguf()))
    return out


def _generation_markers(ctx: StaticContext) -> Row:
    """Our layout ships ``{% generation %}`` (its absence fails). A checkpoint built on another
    tokenizer ships its publisher's template, which almost never has them: serving is unaffected,
    only assistant-only fine-tuning is -- a warning pointing to a training template."""
    template = ctx.template or ""
    if is_ours(ctx.ref):
        return row(
            "chat.generation_markers",
            _has_generation(template),
            "template has no {% generation %} markers: assistant-only loss trains on nothing (TRL PR#4201)",
            "wrap assistant content and <|end|> in {% generation %}...{% endgeneration %}",
        )
    if _has_generation(template):
        return Row(
            "chat.generation_markers", FILES, "pass", "assistant turns are marked with {% generation %}"
        )
    return Row(
        "chat.generation_markers",
        FILES,
        "warn",
        f"{ctx.template_source} has no {{% generation %}} markers (as most stock templates): "
        "return_assistant_tokens_mask / TRL's assistant_only_loss give an all-zero mask (trl#4201) -- "
        "affects assistant-only fine-tuning only; serving is unaffected",
        f"for assistant-only loss, train with a template that wraps each assistant turn in "
        f"{{% generation %}}...{{% endgeneration %}} ({TRAINING_TEMPLATES}); keep this one for serving",
    )


def _no_template(ctx: StaticContext) -> Row:
    if is_ours(ctx.ref):
        return Row(
            "chat.template_present",
            FILES,
            "warn",
            "no chat template: a base model (instruct checkpoints need one)",
            "export with `stacktok export` to ship the ChatML template",
        )
    if ctx.ref.chat_template is None:
        return skip("chat.template_present", "no chat template, and the source has none (a base model)")
    return Row(
        "chat.template_present",
        FILES,
        "fail",
        "no chat template, but the source the artifact was imported from has one",
        "export with `stacktok export --artifact A.json` to ship the source's template",
    )


def _stopped(ctx: StaticContext) -> list[str]:
    """One line per template of DIR whose bounded trial was stopped (validation's trials)."""
    if importlib.util.find_spec("jinja2") is None:
        return []
    from conformance.core.template import stopped_templates

    # what validation read (additional_chat_templates/ too); else the files the context read
    files = {n: f.value for n, f in ctx.read.hf.items()} if ctx.read is not None else ctx.files
    return [trial.stopped_line(label) for label, trial in stopped_templates(files)]


def _stopped_row(lines: list[str]) -> Row:
    return Row(
        "chat.template_sandboxed",
        FILES,
        "fail",
        "; ".join(lines) + " -- in transformers' sandbox; a chat template renders a chat in milliseconds",
        "remove what loops or repeats without bound (range inside range, a macro calling itself twice, "
        "'x' * n): transformers and vLLM hang or run out of memory on it too; or ship the exported template",
    )


def _not_rendered(check: str) -> Row | None:
    """The ``missing`` row of a check that needs jinja2 when it is not installed, else None."""
    if importlib.util.find_spec("jinja2") is not None:
        return None
    return Row(
        check,
        FILES,
        "missing",
        "not checked: the chat template was not rendered: jinja2 is not installed",
        "pip install 'stacktok[hf]'",
    )


def _same_template(
    check: str, a: Any, b: Any, what: str, fix: str, *, variables: tuple[tuple[str, str], ...] = ()
) -> Row:
    """Identical text passes; different text that renders every sample chat identically (with the
    tokenizer's special tokens, ``variables``) warns."""
    if a == b:
        return Row(check, FILES, "pass", "ok")
    if not isinstance(a, str) or not isinstance(b, str):
        return Row(check, FILES, "fail", f"{what}: one of them is missing", fix)
    missing = _not_rendered(check)
    if missing is not None:
        return missing
    from conformance.core.template import try_template

    first, second = try_template(a, variables=variables), try_template(b, variables=variables)
    stopped = first.stopped or second.stopped
    # a template that cannot render differs (see chat.template_sandboxed)
    same = not stopped and all(
        x.text is not None and x.text == y.text for x, y in zip(first.renders, second.renders)
    )
    if same:
        return Row(
            check, FILES, "warn", f"{what} differ in text but render the sample chats identically", fix
        )
    why = f" (one of them {stopped} when rendered)" if stopped else ""
    return Row(check, FILES, "fail", f"{what} differ and render chats differently{why}", fix)


def _has_generation(template: str) -> bool:
    return "{% generation %}" in template.replace("{%-", "{%").replace("-%}", "%}")


def _matches_source(template: str, source: str | None, *, variables: tuple[tuple[str, str], ...] = ()) -> Row:
    """An imported artifact: the directory's template is the source's (text, or the same renders)."""
    if source is None:
        return Row(
            "chat.template_matches_source",
            FILES,
            "warn",
            "a chat template the source the artifact was imported from does not have: the reference "
            "cannot certify it",
            "re-import from the files that carry this template, or drop it",
        )
    return _same_template(
        "chat.template_matches_source",
        template,
        source,
        "the directory's chat template and the source's (in the artifact)",
        "ship the source's template: `stacktok export --artifact A.json` writes it",
        variables=variables,
    )


def _template_sandboxed(
    template: str,
    *,
    source: str | None = None,
    ours: bool = True,
    variables: tuple[tuple[str, str], ...] = (),
) -> Row:
    """Render the template the way transformers does (immutable sandbox, the tokenizer's special
    tokens) on a plain conversation."""
    missing = _not_rendered("chat.template_sandboxed")
    if missing is not None:
        return missing
    from conformance.core.template import sample_messages, try_template

    trial = try_template(
        template, variables=variables
    )  # SAMPLE_CHATS[0]: the plain system/user/assistant chat
    if trial.stopped:
        return _stopped_row([trial.stopped_line("the chat template")])
    plain = trial.renders[0]
    if plain.text is None:  # a template failing to render is the finding
        kind = plain.error_type
        why = "tries to reach Python internals" if kind == "SecurityError" else "fails to render"
        return Row(
            "chat.template_sandboxed",
            FILES,
            "fail",
            f"the chat template {why} in transformers' sandbox ({kind}: {plain.message[:160]})",
            "use the exported chat template; a template must only render messages",
        )
    text = plain.text
    if ours:
        expect = render_text(sample_messages(0), add_generation_prompt=False)
    elif source is None:
        return Row("chat.template_sandboxed", FILES, "pass", "renders in the sandbox")
    else:
        theirs = try_template(source, variables=variables)  # the source's may not render a plain chat
        expect = theirs.renders[0].text if theirs.renders else None
        if expect is None:
            return Row("chat.template_sandboxed", FILES, "pass", "renders in the sandbox")
    if text == expect:
        return Row("chat.template_sandboxed", FILES, "pass", "renders in the sandbox; plain chat as trained")
    return Row(
        "chat.template_sandboxed",
        FILES,
        "warn",
        f"renders a plain system/user/assistant chat as {text[:120]!r}, not the trained format "
        f"{expect[:80]!r}; conformance.chat decides per backend",
        "use the exported chat template",
    )
