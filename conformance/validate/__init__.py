"""Validate first: parse and schema-check every file the gate reads, before any backend runs.

:func:`validate_directory` raises :class:`InputError` on the first malformed
file, as one line ``"<path>: <field or line>: <what is wrong>; <fix>"`` (the
gate maps it to exit code 2), and otherwise returns a :class:`Validated`: every
file it read, as bytes and parsed value, so later stages never read a file
again, and ``not_checked``: the checks a missing library prevented. What is
checked (only files that exist), one module each:

- ``jsonfile``: every JSON file is valid UTF-8 (names the byte offset), valid
  JSON (names line and column), no key twice in one object, no ``NaN``/``Infinity``;
- ``tokenizer_json``: the keys tokenizers knows (a renamed key is named), a BPE
  ``model`` with a ``vocab`` of unique non-negative ids, ``merges`` in one form
  (``"a b"`` strings or ``[a, b]`` pairs) whose parts and results are in the
  vocab, a ``continuing_subword_prefix`` that tokenizers can apply without
  panicking, complete ``added_tokens`` (``tokens``), typed sections;
- ``tokenizers_load``: then tokenizers itself loads the file in a child process
  (a panic there can abort the interpreter, and Rust prints a backtrace to
  stderr), and its own message is quoted;
- ``configs``: ``tokenizer_config.json``, ``special_tokens_map.json``,
  ``added_tokens.json``, ``chat_template.json``: the types transformers expects
  for tokens, templates, ``added_tokens_decoder``, ``model_max_length``,
  ``auto_map``; ``config.json``, ``generation_config.json``: objects,
  ``vocab_size`` a positive int, ``*_token_id`` an int, null or a list of ints;
- ``template``: chat templates (``chat_template.jinja``,
  ``additional_chat_templates/*.jinja`` and every inline template): UTF-8 and
  compilable by the one sandboxed Jinja environment
  (``conformance.core.template``), ``{% generation %}`` included;
- ``tiktoken_file``: ``*.tiktoken``: ``<base64> <rank>`` lines, strict base64,
  unique ranks and tokens, ranks ``0..n-1``, all 256 single bytes (tiktoken
  asserts or panics);
- ``gguf_file``: ``*.gguf`` (when ``gguf`` is installed): readable as
  ``gguf.GGUFReader`` reads it, token list, token types and merges of the right types and
  lengths;
- ``directory``: :func:`validate_directory`, the order and the one read per file;
  ``files``: :class:`Validated` / :class:`ReadFile`, what it returns.

Out of scope: whether the content is *right* (ids, flags, templates equal to the
artifact's) -- the gate's checks decide that; security of ``auto_map``/remote
code; model weights; files the gate does not read.
"""

from __future__ import annotations

from conformance.core.errors import InputError, input_errors
from conformance.validate.configs import (
    check_added_tokens_json,
    check_chat_template_json,
    check_model_config,
    check_special_tokens_map,
    check_tokenizer_config,
)
from conformance.validate.directory import validate_directory
from conformance.validate.files import ReadFile, Validated
from conformance.validate.gguf_file import read_gguf_checked
from conformance.validate.jsonfile import decode_utf8, parse_json, read_bytes, read_json
from conformance.validate.template import validate_template
from conformance.validate.tiktoken_file import parse_tiktoken
from conformance.validate.tokenizer_json import check_tokenizer_json
from conformance.validate.tokenizers_load import load_with_tokenizers

#: the name tests/test_validate.py imports
_load_with_tokenizers = load_with_tokenizers

__all__ = [
    "InputError",
    "ReadFile",
    "Validated",
    "check_added_tokens_json",
    "check_chat_template_json",
    "check_model_config",
    "check_special_tokens_map",
    "check_tokenizer_config",
    "check_tokenizer_json",
    "decode_utf8",
    "input_errors",
    "load_with_tokenizers",
    "parse_json",
    "parse_tiktoken",
    "read_bytes",
    "read_gguf_checked",
    "read_json",
    "validate_directory",
    "validate_template",
]
