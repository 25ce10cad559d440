"""Chat templates compile: every ``.jinja`` file and every inline template, in the one sandbox.

A template is compiled by :func:`conformance.core.template.compile_template` -- the sandboxed
environment transformers uses, ``{% generation %}`` included -- and a syntax error becomes one
line naming ``where`` and the template line. Without jinja2 nothing can be compiled:
:func:`validate_template` then returns False and ``validate_directory`` records that on its
result (``Validated.not_checked``) instead of passing in silence.

Out of scope: rendering (the gate's chat checks); whether the template is the artifact's.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

from conformance.validate.common import fail, first_line, show

NOT_COMPILED = "chat template not compiled: jinja2 is not installed; pip install 'stacktok[hf]'"


def jinja2_installed() -> bool:
    return importlib.util.find_spec("jinja2") is not None


def validate_template(path: Path | str, where: str, source: str) -> bool:
    """Compile one chat template; a syntax error names ``where`` and the template line.

    Returns False when jinja2 is not installed (nothing was compiled), True when it compiled.
    """
    if not jinja2_installed():
        return False
    import jinja2

    from conformance.core.template import TemplateCompileError, compile_template

    try:
        compile_template(source)
    except (jinja2.TemplateSyntaxError, TemplateCompileError) as exc:
        fail(
            path,
            f"{where} line {exc.lineno}",
            f"Jinja syntax error: {first_line(exc.message or str(exc))}",
            "fix the template (transformers and vLLM compile it with the same sandboxed Jinja)",
        )
    return True


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
