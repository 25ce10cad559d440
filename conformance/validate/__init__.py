"""Validate first: parse and schema-check every file the gate reads, before any backend runs.

:func:`validate_directory` raises :class:`InputError` on the first malformed
file, as one line ``"<path>: <field or line>: <what is wrong>; <fix>"``. The
gate maps it to exit code 2. What is checked (only files that exist):

- every JSON file: valid UTF-8 (names the byte offset), valid JSON (names line
  and column), no key twice in one object, no ``NaN``/``Infinity``;
- ``tokenizer.json``: the keys tokenizers knows (a renamed key is named), a BPE
  ``model`` with a ``vocab`` of unique non-negative ids, ``merges`` in one form
  (``"a b"`` strings or ``[a, b]`` pairs) whose parts and results are in the
  vocab, a ``continuing_subword_prefix`` that tokenizers can apply without
  panicking, complete ``added_tokens``, typed sections; then tokenizers itself
  loads the file in a child process (a panic there can abort the interpreter,
  and Rust prints a backtrace to stderr), and its own message is quoted;
- ``tokenizer_config.json``, ``special_tokens_map.json``, ``added_tokens.json``,
  ``chat_template.json``: the types transformers expects for tokens, templates,
  ``added_tokens_decoder``, ``model_max_length``, ``auto_map``;
- chat templates (``chat_template.jinja``, ``additional_chat_templates/*.jinja``
  and every inline template): UTF-8 and compilable by the sandboxed Jinja
  environment transformers uses, ``{% generation %}`` included;
- ``config.json``, ``generation_config.json``: objects, ``vocab_size`` a positive
  int, ``*_token_id`` an int, null or a list of ints;
- ``*.tiktoken``: ``<base64> <rank>`` lines, strict base64, unique ranks and
  tokens, ranks ``0..n-1``, all 256 single bytes (tiktoken asserts or panics);
- ``*.gguf`` (when ``gguf`` is installed): readable by ``gguf.GGUFReader``, token
  list, token types and merges of the right types and lengths.

Out of scope: whether the content is *right* (ids, flags, templates equal to the
artifact's) -- the gate's checks decide that; security of ``auto_map``/remote
code; model weights; files the gate does not read.
"""

from __future__ import annotations

import base64
import binascii
import difflib
import importlib.util
import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any, NoReturn

from conformance.backends import dist_version
from conformance.core.errors import InputError, input_errors
from conformance.core.layout import Exports, gguf_fields

BPE_KEYS = (
    "type",
    "dropout",
    "unk_token",
    "continuing_subword_prefix",
    "end_of_word_suffix",
    "fuse_unk",
    "byte_fallback",
    "ignore_merges",
    "vocab",
    "merges",
)
TOKENIZER_JSON_KEYS = (
    "version",
    "truncation",
    "padding",
    "added_tokens",
    "normalizer",
    "pre_tokenizer",
    "post_processor",
    "decoder",
    "model",
)
SECTIONS = ("normalizer", "pre_tokenizer", "post_processor", "decoder")
TOKEN_FLAGS = ("special", "lstrip", "rstrip", "normalized", "single_word")
CONFIG_FILES = ("config.json", "generation_config.json")
LOAD_TIMEOUT_S = 120.0
_INT_TYPES = frozenset({"UINT8", "INT8", "UINT16", "INT16", "UINT32", "INT32", "UINT64", "INT64"})
_DECIMAL = re.compile(r"[0-9]+")
_U32_MAX = 2**32 - 1


def _fail(path: Path | str, where: str, what: str, fix: str) -> NoReturn:
    raise InputError(path, where, what, fix)


def _show(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _first_line(message: str, limit: int = 200) -> str:
    lines = [line.strip() for line in str(message).splitlines() if line.strip()]
    line = lines[0] if lines else "(no message)"
    return line if len(line) <= limit else line[: limit - 3] + "..."


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _rethrow_interrupts(exc: BaseException) -> None:
    if isinstance(exc, (KeyboardInterrupt, SystemExit)):
        raise exc


# ------------------------------------------------------------------ reading
def read_bytes(path: Path) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        _fail(path, "file", f"cannot be read ({exc.strerror or exc})", "check that it exists and is readable")


def decode_utf8(path: Path, data: bytes) -> str:
    """``data`` as UTF-8, or :class:`InputError` naming the first bad byte, its offset and line."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        _fail(
            path,
            f"byte offset {exc.start} (line {line})",
            f"byte 0x{data[exc.start]:02x} is not valid UTF-8 ({exc.reason})",
            "save the file as UTF-8",
        )


class _DuplicateKey(Exception):
    def __init__(self, key: str) -> None:
        self.key = key


def _unique_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _DuplicateKey(key)
            seen.add(key)
    return out


def _reject_constant(name: str) -> NoReturn:
    raise ValueError(f"{name} is not JSON")


def read_json(path: Path) -> Any:
    """Parse a JSON file strictly; :class:`InputError` names the byte, line/column or key."""
    text = decode_utf8(path, read_bytes(path))
    try:
        return json.loads(text, object_pairs_hook=_unique_pairs, parse_constant=_reject_constant)
    except json.JSONDecodeError as exc:
        _fail(
            path,
            f"line {exc.lineno} column {exc.colno}",
            f"not valid JSON ({exc.msg})",
            "fix the JSON syntax",
        )
    except _DuplicateKey as exc:
        _fail(
            path,
            f"key {exc.key!r}",
            "appears twice in one object (parsers silently keep only the last)",
            "keep exactly one",
        )
    except ValueError as exc:  # NaN / Infinity
        _fail(path, "value", str(exc), "use a number or null (Rust and JS parsers reject NaN/Infinity)")
    except RecursionError:
        _fail(path, "structure", "is nested too deeply to parse", "flatten the JSON")


def _need_object(path: Path, where: str, value: Any, fix: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        _fail(path, where, f"must be a JSON object, got {type(value).__name__} {_show(value, 40)}", fix)
    return value


def _unknown_keys(path: Path, where: str, obj: dict[str, Any], known: Iterable[str], what: str) -> None:
    """A key that looks like a renamed known key (the known one absent) is an error; a key with no
    near match may be a newer library's field -- the library's own load (below) decides it."""
    known = tuple(known)
    for key in obj:
        if key not in known:
            close = [k for k in difflib.get_close_matches(key, known, n=1) if k not in obj]
            if not close:
                continue
            hint = f"did you mean {close[0]!r}? "
            _fail(
                path,
                f"{where}.{key}" if where else key,
                f"unknown key {key!r} ({what} knows: {', '.join(known)})",
                f"{hint}rename or remove it",
            )


# ----------------------------------------------------------- tokenizer.json
def validate_tokenizer_json(path: Path, *, load: bool = True) -> dict[str, Any]:
    """Schema-check ``tokenizer.json`` (BPE), then let tokenizers load it (``load=True``)."""
    data = _need_object(path, "top level", read_json(path), "tokenizer.json must be one JSON object")
    _unknown_keys(path, "", data, TOKENIZER_JSON_KEYS, "tokenizer.json")
    model = _need_object(path, "model", data.get("model"), "add the BPE model section")
    _unknown_keys(path, "model", model, BPE_KEYS, "tokenizers' BPE model")
    if model.get("type") != "BPE":
        what = f"is {_show(model['type'])}, not 'BPE'" if "type" in model else "is missing"
        _fail(path, "model.type", what, "set it to 'BPE' (stacktok exports a BPE model)")
    _check_model_options(path, model)
    vocab = _check_vocab(path, model)
    _check_merges(path, model, vocab)
    _check_added_tokens(path, data.get("added_tokens", []))
    _check_sections(path, data)
    if load:
        _load_with_tokenizers(path)
    return data


def _check_model_options(path: Path, model: dict[str, Any]) -> None:
    for key in ("unk_token", "continuing_subword_prefix", "end_of_word_suffix"):
        if model.get(key) is not None and not isinstance(model[key], str):
            _fail(
                path, f"model.{key}", f"must be a string or null, got {_show(model[key])}", "set it to null"
            )
    for key in ("fuse_unk", "byte_fallback", "ignore_merges"):
        if key in model and not isinstance(model[key], bool):
            _fail(path, f"model.{key}", f"must be true or false, got {_show(model[key])}", "set it to false")
    dropout = model.get("dropout")
    if dropout is not None and (isinstance(dropout, bool) or not isinstance(dropout, (int, float))):
        _fail(path, "model.dropout", f"must be a number or null, got {_show(dropout)}", "set it to null")
    if dropout is not None and not 0.0 <= dropout <= 1.0:
        _fail(path, "model.dropout", f"{dropout} is outside 0..1", "set it to null (no dropout)")


def _check_vocab(path: Path, model: dict[str, Any]) -> dict[str, int]:
    if "vocab" not in model:
        _fail(path, "model.vocab", "is missing", "add the vocab object {token: id}")
    vocab = _need_object(path, "model.vocab", model["vocab"], "write the vocab as {token: id}")
    owner: dict[int, str] = {}
    for token, token_id in vocab.items():
        if not _is_int(token_id) or not 0 <= token_id <= _U32_MAX:
            _fail(
                path,
                f"model.vocab[{token!r}]",
                f"id {_show(token_id)} is not a non-negative integer",
                "give every token an integer id 0..n-1",
            )
        if token_id in owner:
            _fail(
                path,
                f"model.vocab[{token!r}]",
                f"id {token_id} is already the id of {owner[token_id]!r}",
                "give every token its own id",
            )
        owner[token_id] = token
    return vocab


def _merge_parts(path: Path, i: int, item: Any, form: type) -> tuple[str, str]:
    where = f"model.merges[{i}]"
    if not isinstance(item, form):
        _fail(
            path,
            where,
            f"is a {type(item).__name__} but model.merges[0] is a {form.__name__}",
            "write every merge in one form: all 'a b' strings or all [a, b] pairs (tokenizers rejects a mix)",
        )
    if isinstance(item, str):
        parts = item.split(" ")
        if len(parts) != 2 or not all(parts):
            _fail(
                path,
                where,
                f"{item!r} is not two tokens separated by exactly one space",
                "write it as 'left right' (one U+0020), or use [left, right] pairs",
            )
        return parts[0], parts[1]
    if len(item) != 2 or not all(isinstance(p, str) and p for p in item):
        _fail(
            path, where, f"{_show(item)} is not a pair of two non-empty strings", "write it as [left, right]"
        )
    return item[0], item[1]


def _check_merges(path: Path, model: dict[str, Any], vocab: dict[str, int]) -> None:
    merges = model.get("merges")
    if not isinstance(merges, list):
        _fail(
            path, "model.merges", f"must be a list, got {_show(merges)}", "add the merges list (may be empty)"
        )
    if not merges:
        return
    form = str if isinstance(merges[0], str) else list
    prefix = model.get("continuing_subword_prefix") or ""
    seen: dict[tuple[str, str], int] = {}
    for i, item in enumerate(merges):
        left, right = _merge_parts(path, i, item, form)
        if prefix and not right.startswith(prefix):
            _fail(
                path,
                "model.continuing_subword_prefix",
                f"is {prefix!r} but the right part {right!r} of merge {i} does not start with it "
                "(tokenizers slices the prefix off every right part and panics or corrupts the token)",
                "set it to null: a byte-level BPE has no subword prefix",
            )
        for part in (left, right, left + right[len(prefix) :]):
            if part not in vocab:
                _fail(
                    path,
                    f"model.merges[{i}]",
                    f"{part!r} (from merge {left!r} + {right!r}) is not in model.vocab",
                    "every merge's parts and result must be vocab tokens: re-export the tokenizer",
                )
        if (left, right) in seen:
            _fail(path, f"model.merges[{i}]", f"repeats merges[{seen[left, right]}]", "remove the duplicate")
        seen[left, right] = i


def _check_token_entry(path: Path, where: str, entry: Any, *, require_flags: bool) -> dict[str, Any]:
    entry = _need_object(path, where, entry, "write it as {'content': ..., 'special': ..., ...}")
    if not isinstance(entry.get("content"), str):
        _fail(
            path,
            f"{where}.content",
            f"must be a string, got {_show(entry.get('content'))}",
            "set the token text",
        )
    for flag in TOKEN_FLAGS:
        if flag not in entry and require_flags:
            _fail(
                path, f"{where}.{flag}", "is missing (tokenizers requires every flag)", f"add {flag!r}: false"
            )
        if flag in entry and not isinstance(entry[flag], bool):
            _fail(
                path,
                f"{where}.{flag}",
                f"must be true or false, got {_show(entry[flag])}",
                "use a JSON boolean",
            )
    return entry


def _check_added_tokens(path: Path, added: Any) -> None:
    if not isinstance(added, list):
        _fail(path, "added_tokens", f"must be a list, got {_show(added)}", "use [] when there are none")
    ids: dict[int, int] = {}
    contents: dict[str, int] = {}
    for i, entry in enumerate(added):
        where = f"added_tokens[{i}]"
        entry = _check_token_entry(path, where, entry, require_flags=True)
        token_id = entry.get("id")
        if not _is_int(token_id) or not 0 <= token_id <= _U32_MAX:
            _fail(path, f"{where}.id", f"must be a non-negative integer, got {_show(token_id)}", "set its id")
        if token_id in ids:
            _fail(
                path,
                f"{where}.id",
                f"{token_id} is also added_tokens[{ids[token_id]}]'s id",
                "use unique ids",
            )
        if entry["content"] in contents:
            other = contents[entry["content"]]
            _fail(path, f"{where}.content", f"{entry['content']!r} repeats added_tokens[{other}]", "keep one")
        ids[token_id], contents[entry["content"]] = i, i


def _check_sections(path: Path, data: dict[str, Any]) -> None:
    for key in SECTIONS:
        section = data.get(key)
        if section is None:
            continue
        _need_object(path, key, section, f"set {key} to null or an object with a 'type'")
        if not isinstance(section.get("type"), str):
            _fail(path, f"{key}.type", f"must be a string, got {_show(section.get('type'))}", "name its type")
    for key in ("truncation", "padding"):
        if data.get(key) is not None and not isinstance(data[key], dict):
            _fail(path, key, f"must be null or an object, got {_show(data[key])}", "set it to null")


_LOAD_SCRIPT = r"""
import json, sys
try:
    import resource  # no core file when a panic aborts this child (POSIX only)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
except (ImportError, ValueError, OSError):
    pass
try:
    import tokenizers
except ImportError:
    print(json.dumps({"missing": True}))
    raise SystemExit(0)
version = getattr(tokenizers, "__version__", "?")
with open(sys.argv[1], encoding="utf-8") as f:
    text = f.read()
try:
    tokenizers.Tokenizer.from_str(text)
except BaseException as exc:
    print(json.dumps({"version": version, "error": type(exc).__name__ + ": " + str(exc)}))
else:
    print(json.dumps({"version": version}))
"""


def _load_with_tokenizers(path: Path) -> None:
    """``Tokenizer.from_str`` in a child: a pyo3 panic can abort the whole interpreter."""
    if importlib.util.find_spec("tokenizers") is None:
        return
    env = dict(os.environ, RUST_BACKTRACE="0")
    cmd = [sys.executable, "-c", _LOAD_SCRIPT, str(path)]
    try:
        proc = subprocess.run(
            cmd, capture_output=True, encoding="utf-8", errors="replace", timeout=LOAD_TIMEOUT_S, env=env
        )
    except subprocess.TimeoutExpired:
        _fail(path, "file", f"tokenizers did not load it within {LOAD_TIMEOUT_S:.0f} s", "check its size")
    result = _child_result(proc)
    if result is not None:
        if "error" in result:
            _fail(
                path,
                "file",
                f"tokenizers {result['version']} cannot load it: {_first_line(result['error'])}",
                "fix the field the message names, or re-export with `stacktok export`",
            )
        return
    version = dist_version("tokenizers")
    _fail(
        path,
        "file",
        f"tokenizers {version} crashed loading it ({_crash(proc)})",
        "re-export with `stacktok export`",
    )


def _child_result(proc: subprocess.CompletedProcess[str]) -> dict[str, Any] | None:
    """The child's JSON verdict, or None when it died before printing one."""
    if proc.returncode != 0 or not proc.stdout.strip():
        return None
    try:
        result = json.loads(proc.stdout.strip().splitlines()[-1])
    except ValueError:
        return None
    return result if isinstance(result, dict) else None


def _crash(proc: subprocess.CompletedProcess[str]) -> str:
    code = proc.returncode
    how = (
        f"signal {signal.Signals(-code).name}"
        if code < 0 and -code in signal.valid_signals()
        else f"exit {code}"
    )
    lines = proc.stderr.splitlines()
    panics = [lines[i + 1] for i, line in enumerate(lines[:-1]) if " panicked at " in line]
    return f"{how}: {_first_line(panics[0] if panics else proc.stderr)}"


# ------------------------------------------------------ tokenizer_config.json
def validate_tokenizer_config(path: Path) -> dict[str, Any]:
    data = _need_object(path, "top level", read_json(path), "tokenizer_config.json must be one JSON object")
    if "chat_template" in data:
        _check_inline_templates(path, data["chat_template"])
    decoder = data.get("added_tokens_decoder")
    if decoder is not None:
        decoder = _need_object(path, "added_tokens_decoder", decoder, 'write it as {"id": {"content": ...}}')
        for key, entry in decoder.items():
            if not _DECIMAL.fullmatch(key):
                _fail(path, f"added_tokens_decoder[{key!r}]", "key is not a decimal token id", "use the id")
            _check_token_entry(path, f"added_tokens_decoder[{key!r}]", entry, require_flags=False)
    for key, value in data.items():
        if key.endswith("_token") and not key.startswith("add_"):
            _check_token_value(path, key, value, allow_null=True)
    _check_token_list(path, "additional_special_tokens", data.get("additional_special_tokens"))
    _check_extra_special(path, data.get("extra_special_tokens"))
    _check_scalars(path, data)
    return data


def _check_token_value(path: Path, where: str, value: Any, *, allow_null: bool) -> None:
    if value is None and allow_null or isinstance(value, str):
        return
    if isinstance(value, dict):
        _check_token_entry(path, where, value, require_flags=False)
        return
    _fail(
        path,
        where,
        f"must be a token string{', null' if allow_null else ''} or {{'content': ...}}, got {_show(value)}",
        "write the token text",
    )


def _check_token_list(path: Path, where: str, value: Any) -> None:
    if value is None:
        return
    if not isinstance(value, list):
        _fail(path, where, f"must be a list of tokens, got {_show(value)}", "write it as a JSON list")
    for i, item in enumerate(value):
        _check_token_value(path, f"{where}[{i}]", item, allow_null=False)


def _check_extra_special(path: Path, value: Any) -> None:
    if isinstance(value, dict):
        for name, token in value.items():
            _check_token_value(path, f"extra_special_tokens[{name!r}]", token, allow_null=False)
    else:
        _check_token_list(path, "extra_special_tokens", value)


def _check_scalars(path: Path, data: dict[str, Any]) -> None:
    limit = data.get("model_max_length")
    if "model_max_length" in data and (isinstance(limit, bool) or not isinstance(limit, (int, float))):
        _fail(path, "model_max_length", f"must be a number, got {_show(limit)}", "set it to e.g. 8192")
    if "tokenizer_class" in data and not isinstance(data["tokenizer_class"], str):
        _fail(
            path,
            "tokenizer_class",
            f"must be a string, got {_show(data['tokenizer_class'])}",
            "use 'PreTrainedTokenizerFast'",
        )
    if "auto_map" in data:
        _need_object(path, "auto_map", data["auto_map"], "remove auto_map (stacktok needs no custom code)")


# ------------------------------------------------------------ chat templates
def _template_env() -> Any:
    """The environment transformers compiles chat templates in, with a parse-only ``generation`` tag."""
    import jinja2.ext
    import jinja2.nodes
    import jinja2.sandbox

    class GenerationTag(jinja2.ext.Extension):
        tags = {"generation"}

        def parse(self, parser: Any) -> list[Any]:
            next(parser.stream)
            return parser.parse_statements(("name:endgeneration",), drop_needle=True)

    return jinja2.sandbox.ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols, GenerationTag]
    )


def validate_template(path: Path | str, where: str, source: str) -> None:
    """Compile one chat template; a syntax error names ``where`` and the template line."""
    if importlib.util.find_spec("jinja2") is None:
        return
    import jinja2

    try:
        _template_env().from_string(source)
    except jinja2.TemplateSyntaxError as exc:
        _fail(
            path,
            f"{where} line {exc.lineno}",
            f"Jinja syntax error: {_first_line(exc.message or str(exc))}",
            "fix the template (transformers and vLLM compile it with the same sandboxed Jinja)",
        )


def _check_inline_templates(path: Path, value: Any) -> None:
    if isinstance(value, str):
        validate_template(path, "chat_template", value)
        return
    if value is None:
        return
    fix = "use a template string or a list of {'name': str, 'template': str}"
    if not isinstance(value, list):
        _fail(path, "chat_template", f"must be a string or a list, got {type(value).__name__}", fix)
    names: dict[str, int] = {}
    for i, item in enumerate(value):
        where = f"chat_template[{i}]"
        if not isinstance(item, dict) or not {"name", "template"} <= set(item):
            _fail(path, where, f"must be {{'name': ..., 'template': ...}}, got {_show(item)}", fix)
        if not isinstance(item["name"], str) or not isinstance(item["template"], str):
            _fail(path, where, "'name' and 'template' must both be strings", fix)
        if item["name"] in names:
            other = names[item["name"]]
            _fail(path, f"{where}.name", f"{item['name']!r} repeats chat_template[{other}]", "rename one")
        names[item["name"]] = i
        validate_template(path, f"{where} ({item['name']!r})", item["template"])


def validate_jinja_file(path: Path) -> None:
    validate_template(path, "template", decode_utf8(path, read_bytes(path)))


# ------------------------------------------------------ other JSON files
def validate_special_tokens_map(path: Path) -> None:
    data = _need_object(path, "top level", read_json(path), "special_tokens_map.json must be one JSON object")
    for key, value in data.items():
        if isinstance(value, list):
            _check_token_list(path, key, value)
        else:
            _check_token_value(path, key, value, allow_null=True)


def validate_added_tokens_json(path: Path) -> None:
    data = _need_object(path, "top level", read_json(path), "added_tokens.json must be {token: id}")
    for token, token_id in data.items():
        if not _is_int(token_id) or token_id < 0:
            _fail(path, f"[{token!r}]", f"id {_show(token_id)} is not a non-negative integer", "use the id")


def validate_chat_template_json(path: Path) -> None:
    data = _need_object(path, "top level", read_json(path), 'write {"chat_template": "..."}')
    if not isinstance(data.get("chat_template"), str):
        _fail(path, "chat_template", "must be a template string", 'write {"chat_template": "..."}')
    validate_template(path, "chat_template", data["chat_template"])


def validate_model_config(path: Path) -> None:
    """``config.json`` / ``generation_config.json``: an object, ``vocab_size``, ``*_token_id``."""
    data = _need_object(path, "top level", read_json(path), f"{Path(path).name} must be one JSON object")
    _check_config_ids(path, "", data)
    text = data.get("text_config")
    if isinstance(text, dict):
        _check_config_ids(path, "text_config.", text)


def _check_config_ids(path: Path, prefix: str, data: dict[str, Any]) -> None:
    if "vocab_size" in data:
        size = data["vocab_size"]
        if not _is_int(size) or size <= 0:
            _fail(path, f"{prefix}vocab_size", f"must be a positive integer, got {_show(size)}", "set it")
    for key, value in data.items():
        if not key.endswith("_token_id"):
            continue
        ok = value is None or _is_int(value) or isinstance(value, list) and all(map(_is_int, value))
        if not ok:
            _fail(
                path,
                f"{prefix}{key}",
                f"must be an integer id, null or a list of ids, got {_show(value)}",
                "write the token id(s)",
            )


# ------------------------------------------------------------------ tiktoken
def validate_tiktoken(path: Path) -> None:
    """Every line ``<base64> <rank>``; unique ranks and tokens; ranks 0..n-1; all 256 bytes."""
    rank_line: dict[int, int] = {}
    token_line: dict[bytes, int] = {}
    fix = "re-export it with `stacktok export` (one 'base64(token) rank' per line)"
    for lineno, line in enumerate(read_bytes(path).splitlines(), start=1):
        parts = line.split()
        if not parts:
            continue
        where = f"line {lineno}"
        if len(parts) != 2:
            _fail(path, where, f"{_show(line)} is not '<base64> <rank>'", fix)
        try:
            token = base64.b64decode(parts[0], validate=True)
        except binascii.Error as exc:
            _fail(path, where, f"{_show(parts[0])} is not valid base64 ({exc})", fix)
        if not parts[1].isdigit():
            _fail(path, where, f"rank {_show(parts[1])} is not a non-negative integer", fix)
        rank = int(parts[1])
        if rank in rank_line:
            _fail(
                path, where, f"rank {rank} is already used on line {rank_line[rank]}", "ranks must be unique"
            )
        if token in token_line:
            _fail(path, where, f"token {_show(token)} already appears on line {token_line[token]}", fix)
        rank_line[rank], token_line[token] = lineno, lineno
    _check_rank_table(path, rank_line, token_line)


def _check_rank_table(path: Path, rank_line: dict[int, int], token_line: dict[bytes, int]) -> None:
    if not rank_line:
        _fail(path, "file", "holds no '<base64> <rank>' lines", "re-export it with `stacktok export`")
    top = max(rank_line)
    if top != len(rank_line) - 1:
        missing = next(r for r in range(top + 1) if r not in rank_line)
        _fail(
            path,
            f"rank {missing}",
            f"is missing (ranks must be 0..n-1; highest is {top} on line {rank_line[top]})",
            "re-export it: tiktoken needs contiguous ranks",
        )
    absent = [b for b in range(256) if bytes([b]) not in token_line]
    if absent:
        _fail(
            path,
            "single bytes",
            f"{len(absent)} of the 256 single-byte tokens are missing, first 0x{absent[0]:02x}",
            "a byte-level BPE needs every byte as a token: re-export it",
        )


# ---------------------------------------------------------------------- GGUF
def validate_gguf(path: Path) -> None:
    """``gguf.GGUFReader`` reads it; tokens/token types/merges have the right types (needs ``gguf``)."""
    if importlib.util.find_spec("gguf") is None:
        return
    head = _head(path)
    if head != b"GGUF":
        what = f"starts with {head!r}, not" if len(head) == 4 else f"is {len(head)} bytes long, without"
        _fail(path, "header", f"{what} the magic b'GGUF'", "this is not a GGUF file: re-export it")
    fields = _gguf_fields(path)
    _check_gguf_array(path, fields, "tokenizer.ggml.tokens", {"STRING"})
    _check_gguf_array(path, fields, "tokenizer.ggml.token_type", _INT_TYPES)
    _check_gguf_array(path, fields, "tokenizer.ggml.merges", {"STRING"})
    tokens = fields.get("tokenizer.ggml.tokens")
    types = fields.get("tokenizer.ggml.token_type")
    if tokens is not None and types is not None and len(types[0]) != len(tokens[0]):
        _fail(
            path,
            "tokenizer.ggml.token_type",
            f"has {len(types[0])} entries for {len(tokens[0])} tokens",
            "give every token one type: rebuild the GGUF with `stacktok export`",
        )


def _head(path: Path) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read(4)
    except OSError as exc:
        _fail(path, "file", f"cannot be read ({exc.strerror or exc})", "check that it exists and is readable")


def _gguf_fields(path: Path) -> dict[str, tuple[Any, str]]:
    """The gate's one shared GGUF read (``conformance.core.layout.gguf_fields``), failing as input."""
    try:
        return gguf_fields(path)
    except BaseException as exc:  # numpy/struct errors on truncated files
        _rethrow_interrupts(exc)
        _fail(
            path,
            "file",
            f"gguf {dist_version('gguf')} cannot read its {Path(path).stat().st_size} bytes "
            f"({type(exc).__name__}: {_first_line(str(exc))})",
            "the file is truncated or corrupt: copy it again or rebuild it with `stacktok export`",
        )


def _check_gguf_array(
    path: Path, fields: dict[str, tuple[Any, str]], key: str, element_types: set[str] | frozenset[str]
) -> None:
    if key not in fields:
        return
    kind = fields[key][1]  # e.g. "ARRAY[STRING]"
    if not (kind.startswith("ARRAY[") and kind[6:-1] in element_types):
        want = "/".join(sorted(element_types)) if len(element_types) < 3 else "integer"
        shown = "untyped" if kind == "?" else kind
        _fail(path, key, f"is {shown}, not an array of {want}", "rebuild the GGUF with `stacktok export`")


# ---------------------------------------------------------------- directory
_JSON_VALIDATORS = (
    ("tokenizer_config.json", validate_tokenizer_config),
    ("special_tokens_map.json", validate_special_tokens_map),
    ("added_tokens.json", validate_added_tokens_json),
    ("chat_template.json", validate_chat_template_json),
    ("config.json", validate_model_config),
    ("generation_config.json", validate_model_config),
)


def validate_directory(exports: Exports, *, directory: Path | None = None, load: bool = True) -> None:
    """Raise :class:`InputError` for the first malformed file the gate would read.

    ``directory`` (default ``exports.hf_dir``) is where the HF/checkpoint files
    are looked for, so a directory without ``tokenizer.json`` is still checked.
    ``load=False`` skips the child process that loads ``tokenizer.json`` with
    tokenizers itself (the static schema checks still run).
    """
    folder = Path(directory) if directory is not None else exports.hf_dir
    tokenizer_json = folder / "tokenizer.json" if folder is not None else None
    if tokenizer_json is not None and tokenizer_json.is_file():
        validate_tokenizer_json(tokenizer_json, load=False)
    else:
        tokenizer_json = None
    if folder is not None:
        for name, check in _JSON_VALIDATORS:
            if (folder / name).is_file():
                check(folder / name)
        for jinja in [
            folder / "chat_template.jinja",
            *sorted(folder.glob("additional_chat_templates/*.jinja")),
        ]:
            if jinja.is_file():
                validate_jinja_file(jinja)
    if exports.tiktoken is not None:
        validate_tiktoken(exports.tiktoken)
    if exports.gguf is not None:
        validate_gguf(exports.gguf)
    if tokenizer_json is not None and load:
        _load_with_tokenizers(tokenizer_json)
