"""Which chat template a checkpoint's files give transformers, and the special tokens it renders with.

:func:`chat_template` picks the template ``apply_chat_template`` uses (``chat_template.jinja``
first, then ``tokenizer_config.json``'s), :func:`template_variables` the named special tokens it
passes; :func:`dir_template` both, from the files validation read (``conformance.validate``), so
the plan can hand the runner the template every engine that reads DIR renders.

Out of scope: rendering (``conformance.core.template``), the GGUF's copy
(``conformance.static.chat`` compares it), processor/multi-modal templates.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

#: the named special tokens transformers passes to a chat template (``SPECIAL_TOKENS_ATTRIBUTES``)
SPECIAL_TOKEN_NAMES = (
    "bos_token",
    "eos_token",
    "unk_token",
    "sep_token",
    "pad_token",
    "cls_token",
    "mask_token",
)


@dataclass(frozen=True)
class DirTemplate:
    """DIR's chat templates as transformers uses them: the default one's text (``source``, "" when
    there is none), where it came from, the special tokens it renders with (``(name, text)``
    pairs), and every named template when there are several (``named``)."""

    source: str
    origin: str
    variables: tuple[tuple[str, str], ...]
    named: tuple[tuple[str, str], ...] = ()

    def choose(self, tools: Any) -> str:
        """The template ``apply_chat_template`` renders a conversation with (``get_chat_template``,
        4.57 and 5.x): with several named ones, ``tool_use`` when tools are passed and it exists,
        else ``default``; raises ValueError when there is no default (transformers does too)."""
        if not self.named:
            return self.source
        named = dict(self.named)
        if tools is not None and "tool_use" in named:
            return named["tool_use"]
        if "default" in named:
            return named["default"]
        raise ValueError(
            "This model has multiple chat templates with no default specified (templates: "
            f"{', '.join(sorted(named))})"
        )


def chat_template(tcfg: dict[str, Any], jinja: str | None) -> tuple[str | None, str]:
    """The template transformers uses, and where it came from: ``chat_template.jinja`` first,
    then ``tokenizer_config.json`` ``chat_template`` (a string, or the ``default`` of a named list)."""
    if jinja is not None:
        return jinja, "chat_template.jinja"
    inline = tcfg.get("chat_template")
    if isinstance(inline, str):
        return inline, "tokenizer_config.json chat_template"
    if isinstance(inline, list):
        named = {t.get("name"): t.get("template") for t in inline if isinstance(t, dict)}
        if isinstance(named.get("default"), str):
            return named["default"], "tokenizer_config.json chat_template['default']"
    return None, ""


def template_variables(*configs: dict[str, Any]) -> tuple[tuple[str, str], ...]:
    """The named special tokens ``apply_chat_template`` passes to a template, as ``(name, text)``
    pairs (hashable: part of a trial's memo key), from the first of ``configs`` that names each
    (``tokenizer_config.json`` before ``special_tokens_map.json``, as transformers reads them); a
    token is a string or an ``{"content": ...}`` object; absent or null ones are left out, as
    transformers leaves them out (so is 4.57's ``additional_special_tokens`` list, which 5.x no
    longer passes).

    >>> template_variables({"bos_token": "<s>", "eos_token": {"content": "</s>"}, "pad_token": None})
    (('bos_token', '<s>'), ('eos_token', '</s>'))
    """
    out: dict[str, str] = {}
    for name in SPECIAL_TOKEN_NAMES:
        for cfg in configs:
            value = cfg.get(name)
            value = value.get("content") if isinstance(value, dict) else value
            if isinstance(value, str):
                out[name] = value
                break
    return tuple(out.items())


def dir_template(values: Mapping[str, Any]) -> DirTemplate | None:
    """DIR's templates from the files validation read (``{name: parsed value}``, e.g.
    ``tokenizer_config.json``, ``chat_template.jinja``, ``additional_chat_templates/X.jinja``), or
    None when DIR has none. Several templates -- files in ``additional_chat_templates/`` or a named
    list inline -- are kept by name, as transformers loads them into a dict."""
    tcfg = values.get("tokenizer_config.json")
    tcfg = tcfg if isinstance(tcfg, dict) else {}
    jinja = values.get("chat_template.jinja")
    jinja = jinja if isinstance(jinja, str) else None
    inline = tcfg.get("chat_template")
    prefix, suffix = "additional_chat_templates/", ".jinja"
    extra = {
        name[len(prefix) : -len(suffix)]: text
        for name, text in sorted(values.items())
        if name.startswith(prefix) and name.endswith(suffix) and isinstance(text, str)
    }
    named: dict[str, str] = {}
    if extra:
        default = jinja if jinja is not None else inline if isinstance(inline, str) else None
        named = {**({"default": default} if default is not None else {}), **extra}
    elif jinja is None and isinstance(inline, list):
        named = {
            t["name"]: t["template"] for t in inline if isinstance(t, dict) and isinstance(t.get("name"), str)
        }
    source, origin = chat_template(tcfg, jinja)
    if source is None and not named:
        return None
    smap = values.get("special_tokens_map.json")
    variables = template_variables(tcfg, smap if isinstance(smap, dict) else {})
    several = tuple(named.items()) if len(named) > 1 or (named and "default" not in named) else ()
    return DirTemplate(source or "", origin or "named chat templates", variables, several)
