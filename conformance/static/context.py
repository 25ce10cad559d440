"""What every static check reads, read once: the directory's JSON files, its chat template, the GGUF.

:class:`StaticContext` holds the parsed files of one checkpoint directory and the
reference tokenizer; each static check (``conformance.static.provenance``, ``.config``,
``.hf_files``, ``.chat``, ``.gguf``) takes it and returns rows. A file that is absent
is ``None``; an unreadable GGUF is recorded (``__missing__`` / ``__error__``) for the
checks to report. It also carries the run's probes (for a setting judged by what it does to
them) and the special tokens a chat template renders with (:func:`template_variables`).

Out of scope: schema errors in the files (``conformance.validate`` reports them before this
runs); the checks themselves.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from conformance.core.checkpoint_template import chat_template, template_variables
from conformance.core.layout import Exports, file_json, file_text, gguf_fields, gguf_tensors
from conformance.static.surface.gguf import gguf_fix
from stacktok_export import StackTokenizer

JSON_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "config.json",
    "generation_config.json",
    "special_tokens_map.json",
)


class StaticContext:
    """Everything a static check needs, read once."""

    def __init__(
        self, exports: Exports, ref: StackTokenizer, *, files: Any = None, probes: Sequence[Any] = ()
    ) -> None:
        #: what validation read (``conformance.validate.Validated``): files come from it, not the disk
        self.read = files
        #: the run's probes (``conformance.core.fixtures.Probe``: ``id``, ``text``), for the rows that
        #: judge a setting by what it does to them (``config.clean_up_spaces``)
        self.probes = probes
        self.x = exports
        self.ref = ref
        self.ids = dict(ref.special_to_id)
        self.dir = exports.hf_dir
        self.files: dict[str, Any] = {}
        self.template_source = ""
        self.template: str | None = None
        if self.dir is not None:
            for name in JSON_FILES:
                path = self.dir / name
                self.files[name] = file_json(path, files) if path.is_file() else None
            jinja = self.dir / "chat_template.jinja"
            self.files["chat_template.jinja"] = file_text(jinja, files) if jinja.is_file() else None
            self.template, self.template_source = chat_template(
                self.obj("tokenizer_config.json"), self.files["chat_template.jinja"]
            )
        self.gguf = _read_gguf(exports.gguf) if exports.gguf else None
        #: tensor shapes of a model GGUF (empty for the vocab-only export)
        self.gguf_tensors = gguf_tensors(exports.gguf) if self.gguf_ok() and exports.gguf else {}

    @property
    def gguf_fix(self) -> str:
        """How to repair the GGUF's tokenizer metadata: re-export it, or retokenize a model GGUF."""
        return gguf_fix(self.x.gguf, model=bool(self.gguf_tensors))

    @property
    def template_vars(self) -> tuple[tuple[str, str], ...]:
        """The special tokens a chat template renders with (:func:`template_variables`)."""
        return template_variables(self.obj("tokenizer_config.json"), self.obj("special_tokens_map.json"))

    def obj(self, name: str) -> dict[str, Any]:
        data = self.files.get(name)
        return data if isinstance(data, dict) else {}

    def gguf_ok(self) -> bool:
        return bool(self.gguf) and "__error__" not in self.gguf and "__missing__" not in self.gguf

    def gguf_value(self, key: str, default: Any = None) -> Any:
        return self.gguf.get(key, (default, ""))[0] if self.gguf_ok() else default

    def no_gguf(self) -> str:
        """Why the GGUF rows are skipped: no file, gguf not installed, or an unreadable file."""
        if self.gguf is None:
            return "no .gguf file"
        return self.gguf.get("__missing__") or self.gguf.get("__error__", "")


def _read_gguf(path: Path) -> dict[str, Any]:
    """``{key: (value, type name)}``, or ``{"__missing__": why}`` / ``{"__error__": why}``."""
    try:
        return gguf_fields(path)
    except ImportError:
        return {"__missing__": "gguf is not installed; pip install 'stacktok[gguf]'"}
    except Exception as exc:  # noqa: BLE001 -- validate.py reports unreadable files first
        return {"__error__": f"{path.name} is not a readable GGUF ({exc})"}
