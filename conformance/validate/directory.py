"""``validate_directory``: read every file the gate uses once, check it, hand the parsed files on.

The order is fixed (the first malformed file raises, so the order decides which one is named):
every entry of the directory is the checkpoint's own (``conformance.validate.entries``: no link out
of it, no FIFO or device), ``tokenizer.json``'s schema, the transformers/checkpoint JSON files
(``conformance.validate.configs.JSON_CHECKS``), ``chat_template.jinja`` and
``additional_chat_templates/*.jinja``, the ``.tiktoken``, the ``.gguf``, and last tokenizers
loading ``tokenizer.json`` in a child process (the slowest step). Each file is read once, bounded
by its kind's size limit (``stacktok_export.util.limits``); the
result (:class:`~conformance.validate.files.Validated`) holds its bytes and parsed value, and a
sentence for every check a missing library prevented.

Out of scope: the per-file rules (one module per file kind); user probes, chats and texts
(``conformance.core.fixtures`` validates those as it loads them).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from conformance.core.layout import Exports
from conformance.validate.configs import JSON_CHECKS
from conformance.validate.download import present
from conformance.validate.entries import guard_directory, trusted_roots
from conformance.validate.files import ReadFile, Validated
from conformance.validate.gguf_file import NOT_CHECKED as GGUF_NOT_CHECKED
from conformance.validate.gguf_file import read_gguf_checked
from conformance.validate.jsonfile import decode_utf8, parse_json, read_bytes
from conformance.validate.template import NOT_COMPILED, jinja2_installed, validate_template
from conformance.validate.tiktoken_file import parse_tiktoken
from conformance.validate.tokenizer_json import check_tokenizer_json
from conformance.validate.tokenizers_load import NOT_LOADED, load_with_tokenizers
from stacktok_export.util import limits
from stacktok_export.util.untrusted import check_untrusted


def validate_directory(exports: Exports, *, directory: Path | None = None, load: bool = True) -> Validated:
    """Raise :class:`InputError` for the first malformed file the gate would read; else return
    every file read, parsed (:class:`~conformance.validate.files.Validated`).

    ``directory`` (default ``exports.hf_dir``) is where the HF/checkpoint files are looked for,
    so a directory without ``tokenizer.json`` is still checked. ``load=False`` skips the child
    process that loads ``tokenizer.json`` with tokenizers itself (the static schema checks
    still run).
    """
    folder = Path(directory) if directory is not None else exports.hf_dir
    roots = trusted_roots(folder) if folder is not None else ()
    if folder is not None:
        guard_directory(folder, roots)
    for export in (exports.tiktoken, exports.gguf):  # in DIR, or ``NAME-hf``'s NAME.tiktoken beside it
        if export is not None:
            check_untrusted(export, roots=_roots_of(export, folder, roots))
    hf = _read_hf_files(folder, roots) if folder is not None else {}
    tiktoken = None
    if exports.tiktoken is not None:
        where = _roots_of(exports.tiktoken, folder, roots)
        tiktoken = _read(exports.tiktoken, parse_tiktoken, roots=where, limit=limits.current().tiktoken)
    gguf = None
    not_checked: list[str] = []
    if _has_templates(hf) and not jinja2_installed():
        not_checked.append(NOT_COMPILED)
    if exports.gguf is not None:
        fields = read_gguf_checked(exports.gguf)
        if fields is None:
            not_checked.append(GGUF_NOT_CHECKED)
        else:
            gguf = ReadFile(Path(exports.gguf), None, fields)
    loaded = False
    tokenizer_json = hf.get("tokenizer.json")
    if tokenizer_json is not None and load:
        raw = tokenizer_json.raw or b""  # always the bytes for a file in the directory
        loaded = load_with_tokenizers(tokenizer_json.path, text=raw.decode("utf-8"))
        if not loaded:
            not_checked.append(NOT_LOADED)
    return Validated(
        directory=folder,
        hf=hf,
        tiktoken=tiktoken,
        gguf=gguf,
        tokenizers_loaded=loaded,
        not_checked=tuple(not_checked),
    )


def _roots_of(path: Path, folder: Path | None, roots: Sequence[Path]) -> Sequence[Path]:
    """Where ``path`` may lead: DIR's roots for a file of DIR, else its own directory (the sibling
    ``NAME.tiktoken`` / ``NAME.gguf`` of our ``NAME-hf`` layout)."""
    inside_dir = folder is not None and Path(path).parent.resolve() == Path(folder).resolve()
    return roots if inside_dir else (Path(path).parent.resolve(),)


def _read(
    path: Path, parse: Callable[[Path, bytes], Any], *, roots: Sequence[Path] = (), limit: int
) -> ReadFile:
    """Read ``path`` once, bounded (a link out of ``roots``, a special file or more than ``limit``
    bytes is refused before reading), and parse its bytes (the parser raises :class:`InputError`)."""
    raw = read_bytes(path, roots=roots or (Path(path).parent,), limit=limit)
    return ReadFile(Path(path), raw, parse(path, raw))


def _check_json(check: Callable[[Path, Any], Any]) -> Callable[[Path, bytes], Any]:
    def parse(path: Path, raw: bytes) -> Any:
        value = parse_json(path, raw)
        check(path, value)
        return value

    return parse


def _jinja(path: Path, raw: bytes) -> str:
    text = decode_utf8(path, raw)
    validate_template(path, "template", text)
    return text


def _read_hf_files(folder: Path, roots: Sequence[Path]) -> dict[str, ReadFile]:
    """The JSON and ``.jinja`` files present in ``folder``, in validation order (a dangling symlink
    or a directory under a file's name is present: reading it fails, it is never skipped)."""
    out: dict[str, ReadFile] = {}
    checks = (("tokenizer.json", check_tokenizer_json), *JSON_CHECKS)
    lim = limits.current()
    for name, check in checks:
        if present(folder / name):
            size = lim.tokenizer_json if name == "tokenizer.json" else lim.config_json
            out[name] = _read(folder / name, _check_json(check), roots=roots, limit=size)
    for jinja in [folder / "chat_template.jinja", *sorted(folder.glob("additional_chat_templates/*.jinja"))]:
        if present(jinja):
            out[jinja.relative_to(folder).as_posix()] = _read(jinja, _jinja, roots=roots, limit=lim.template)
    return out


def _has_templates(hf: dict[str, ReadFile]) -> bool:
    """Whether any file read holds a chat template (what jinja2 would have compiled)."""
    config = hf.get("tokenizer_config.json")
    inline = config is not None and config.value.get("chat_template") is not None
    return inline or "chat_template.json" in hf or any(name.endswith(".jinja") for name in hf)
