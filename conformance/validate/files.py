"""What validation read: every checked file's bytes and parsed value, handed on to later stages.

``validate_directory`` returns a :class:`Validated`; the static checks, the surface and the
gate take their files from it instead of reading them again.

Out of scope: the checks themselves (one module per file kind); files validation does not read.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from conformance.core.rows import Row, skip
from conformance.validate.gguf_file import NOT_CHECKED as GGUF_NOT_CHECKED
from conformance.validate.template import NOT_COMPILED
from conformance.validate.tokenizers_load import NOT_LOADED

#: each sentence ``not_checked`` may hold -> the check name of its skip row
SKIP_CHECKS = {
    NOT_COMPILED: "validate.chat_template",
    GGUF_NOT_CHECKED: "validate.gguf",
    NOT_LOADED: "validate.tokenizers_load",
}


@dataclass(frozen=True)
class ReadFile:
    """One file as validation read it.

    - ``path``: where it was read;
    - ``raw``: its bytes, exactly as read (None for a GGUF: gguf-py maps the file itself, and a
      model GGUF can be gigabytes);
    - ``value``: what it parsed to -- a JSON file's value (``dict`` once validated), a ``.jinja``
      file's text (``str``), a ``.tiktoken`` file's ranks (``dict[bytes, int]``), a GGUF's
      fields (``{key: (value, type name)}`` from ``conformance.core.layout.gguf_fields``).
    """

    path: Path
    raw: bytes | None
    value: Any


@dataclass(frozen=True)
class Validated:
    """Every file ``validate_directory`` read and checked, and what it could not check.

    - ``directory``: where the Hugging Face / checkpoint files were looked for (None: nowhere);
    - ``hf``: the files found there, by name relative to ``directory``:
      ``"tokenizer.json"`` (dict), ``"tokenizer_config.json"`` (dict),
      ``"special_tokens_map.json"`` (dict), ``"added_tokens.json"`` (dict),
      ``"chat_template.json"`` (dict), ``"config.json"`` (dict), ``"generation_config.json"``
      (dict), ``"chat_template.jinja"`` (str) and ``"additional_chat_templates/<name>.jinja"``
      (str); a file absent from the directory has no key;
    - ``tiktoken``: the ``.tiktoken`` file, ``value`` its ranks ``{token bytes: rank}`` (None
      without one);
    - ``gguf``: the ``.gguf`` file, ``value`` its fields (None without one, or when ``gguf`` is
      not installed -- then ``not_checked`` says so);
    - ``tokenizers_loaded``: tokenizers itself loaded ``tokenizer.json`` in a child process;
    - ``not_checked``: one sentence per check that could not run (a library is missing), e.g.
      ``"chat template not compiled: jinja2 is not installed; pip install 'stacktok[hf]'"``;
      :meth:`skip_rows` makes each a ``skip`` row, so a gate never passes it in silence.
    """

    directory: Path | None
    hf: Mapping[str, ReadFile] = field(default_factory=lambda: MappingProxyType({}))
    tiktoken: ReadFile | None = None
    gguf: ReadFile | None = None
    tokenizers_loaded: bool = False
    not_checked: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "hf", MappingProxyType(dict(self.hf)))

    def value(self, name: str) -> Any:
        """The parsed value of ``hf[name]`` (e.g. ``"tokenizer_config.json"``), None when absent."""
        found = self.hf.get(name)
        return None if found is None else found.value

    def raw(self, name: str) -> bytes | None:
        """The bytes of ``hf[name]``, None when absent."""
        found = self.hf.get(name)
        return None if found is None else found.raw

    def by_path(self, path: Path) -> ReadFile | None:
        """The file read at ``path`` (any of ``hf``, ``tiktoken``, ``gguf``), None if validation did
        not read it."""
        want = Path(path).resolve()
        for found in (*self.hf.values(), self.tiktoken, self.gguf):
            if found is not None and Path(found.path).resolve() == want:
                return found
        return None

    def skip_rows(self) -> list[Row]:
        """One ``skip`` row per ``not_checked`` sentence (``validate.chat_template``,
        ``validate.gguf``, ``validate.tokenizers_load``); empty when every check ran."""
        return [skip(SKIP_CHECKS.get(note, "validate"), note) for note in self.not_checked]
