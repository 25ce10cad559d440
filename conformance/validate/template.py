"""Chat templates compile: every ``.jinja`` file and every inline template, in the one sandbox,
under a budget.

A template is tried by :func:`conformance.core.template.try_template`: compiled by the sandboxed
environment transformers uses (``{% generation %}`` included) and rendered on the sample chats,
both in one forked child under ``TEMPLATE_BUDGET`` (5 s / 1 GiB). What does not compile is
malformed input, one line naming ``where`` and the template line: a syntax error, a loop control
outside a loop, or nesting too deep for Jinja's parser (a ``RecursionError``). What runs out of
its budget is *not* an error here: the gate reports it as a failing ``chat.template_sandboxed``
row (``conformance.static.chat``), and :func:`template_refusal` tells the runner that no engine
is to render DIR's templates. Without jinja2 nothing can be compiled: :func:`validate_template`
then returns False and ``validate_directory`` records that on its result
(``Validated.not_checked``) instead of passing in silence.

Out of scope: what the renders say (the gate's chat checks); whether the template is the
artifact's.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

from conformance.validate.common import fail, first_line, show

NOT_COMPILED = "chat template not compiled: jinja2 is not installed; pip install 'stacktok[hf]'"
_FIX = "fix the template (transformers and vLLM compile it with the same sandboxed Jinja)"


def jinja2_installed() -> bool:
    return importlib.util.find_spec("jinja2") is not None


def validate_template(path: Path | str, where: str, source: str) -> bool:
    """Compile one chat template (and render the sample chats, in the same bounded child); a
    template that does not compile names ``where`` and the template line.

    Returns False when jinja2 is not installed (nothing was compiled), True otherwise -- also
    when the trial ran out of its budget (a failing row later, not malformed input).
    """
    if not jinja2_installed():
        return False
    from conformance.core.template import try_template

    failure = try_template(source).failure
    if failure is None:
        return True
    if failure.error_type == "RecursionError":
        fail(
            path,
            where,
            "nested too deeply for Jinja to compile (RecursionError: maximum recursion depth exceeded)",
            "flatten the template's nesting; transformers cannot compile it either",
        )
    line = f"{where} line {failure.lineno}" if failure.lineno is not None else where
    what = "Jinja syntax error" if failure.error_type.startswith("Template") else failure.error_type
    fail(path, line, f"{what}: {first_line(failure.message)}", _FIX)


def template_refusal(files: Any) -> str:
    """Why no engine may render DIR's chat templates, or "" when each rendered the sample chats
    within its budget. ``files`` is what ``validate_directory`` returned (its trials are memoised:
    nothing is run again); the reason names each template and the budget."""
    if files is None or not jinja2_installed():
        return ""
    from conformance.core.template import stopped_templates

    stopped = stopped_templates({name: found.value for name, found in files.hf.items()})
    if not stopped:
        return ""
    each = "; ".join(f"{label} {trial.stopped}" for label, trial in stopped)
    return f"{each} in the reference render; no engine was asked to render it"


def check_inline_templates(path: Path, value: Any) -> None:
    """``chat_template`` inside a JSON file: a template string, or ``[{"name", "template"}...]``."""
    if isinstance(value, str):
        validate_template(path, "chat_template", value)
        return
    if value is None:
        return
    fix = "use a template string or a list of {'name': str, 'template': str}"
    if not isinstance(value, list):
        fail(path, "chat_template", f"must be a string or a list, got {type(value).__name__}", fix)
    names: dict[str, int] = {}
    for i, item in enumerate(value):
        where = f"chat_template[{i}]"
        if not isinstance(item, dict) or not {"name", "template"} <= set(item):
            fail(path, where, f"must be {{'name': ..., 'template': ...}}, got {show(item)}", fix)
        if not isinstance(item["name"], str) or not isinstance(item["template"], str):
            fail(path, where, "'name' and 'template' must both be strings", fix)
        if item["name"] in names:
            other = names[item["name"]]
            fail(path, f"{where}.name", f"{item['name']!r} repeats chat_template[{other}]", "rename one")
        names[item["name"]] = i
        validate_template(path, f"{where} ({item['name']!r})", item["template"])
