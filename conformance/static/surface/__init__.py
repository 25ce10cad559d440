"""The whole vocabulary surface, id by id: every token any file defines or implies vs the artifact.

The artifact's id layout is the truth: ids ``0 .. 256+M-1`` are ordinary tokens
(their bytes from :meth:`StackTokenizer.token_bytes`), the top ids are the
specials (``special_to_id``). One row per file, always emitted:

- ``surface.tokenizer_json``: ``model.vocab`` (GPT-2 byte-level strings) is the
  artifact's id -> bytes for every ordinary id and nothing else; ``added_tokens``
  hold each special at its id with its exact content and nothing else (an added
  ``<think>`` at 32768, or a second token at an existing id, fails).
- ``surface.tokenizer_config`` / ``surface.special_tokens_map``:
  every ``added_tokens_decoder`` entry (when present; transformers 5.x
  re-saves drop it) is the artifact's special at that id; every named ``*_token`` value and
  every ``additional_special_tokens`` / ``extra_special_tokens`` entry (list,
  or the name -> token object transformers 5.x writes) is an artifact special.
- ``surface.gguf_tokens``: ``tokenizer.ggml.tokens`` and ``token_type`` id by
  id (byte-level strings / NORMAL for ordinary ids, the special's text /
  CONTROL for specials), count included.
- ``surface.gguf_keys``: every ``tokenizer.ggml.*`` key is one ``stacktok
  export`` writes (others change what llama.cpp does: an ``eom_token_id`` adds
  an end-of-generation token, ``add_space_prefix`` strips or adds spaces), and every
  id-valued key points at an id the artifact defines.
- ``surface.tiktoken``: the ``.tiktoken`` file's rank -> bytes is the
  artifact's ordinary id -> bytes, rank by rank.

A row is ``skip`` when its file is absent and ``missing`` when the ``gguf``
package is not installed; a file of an unexpected shape is a ``fail`` row,
never an exception. Messages name the file, the first differing ids/keys and
the total count.

Out of scope: added-token flags (``special``, ``normalized``, ...), merges,
pre-tokenizer and the special ids' roles (bos/eos/pad) -- ``conformance.static``
checks those; behaviour (ids for text) is the conformance runner's job; GGUF
keys outside ``tokenizer.ggml.*``.
"""

from __future__ import annotations

from typing import Any

from conformance.core.layout import Exports
from conformance.core.rows import Row
from conformance.static.surface.common import REEXPORT, Expected, as_warning, json_row
from conformance.static.surface.config import added_tokens_json_diffs, config_diffs
from conformance.static.surface.gguf import gguf_fix, gguf_rows
from conformance.static.surface.tiktoken import tiktoken_row
from conformance.static.surface.tokenizer_json import tokenizer_json_diffs
from stacktok_export import StackTokenizer

__all__ = ["gguf_fix", "surface_rows"]


def surface_rows(exports: Exports, ref: StackTokenizer, *, files: Any = None) -> list[Row]:
    """One row per vocabulary surface (seven rows, always), comparing each file with ``ref`` id by id;
    ``files`` is what validation read (each file is taken from it, not read again)."""
    exp = Expected(ref)
    hf = exports.hf_dir
    config_fix = f"{REEXPORT}, or name only the artifact's specials ({exp.special_list()}) at their ids"
    return [
        json_row(
            "surface.tokenizer_json",
            hf,
            "tokenizer.json",
            exp,
            tokenizer_json_diffs,
            fix=f"{REEXPORT}: model.vocab must map "
            + (f"ids 0..{exp.ordinary_count - 1}" if exp.ours else f"the {exp.ordinary_count} ordinary ids")
            + " to the artifact's bytes and added_tokens must be exactly its specials",
            files=files,
        ),
        json_row(
            "surface.tokenizer_config",
            hf,
            "tokenizer_config.json",
            exp,
            config_diffs,
            fix=config_fix,
            files=files,
        ),
        json_row(
            "surface.special_tokens_map",
            hf,
            "special_tokens_map.json",
            exp,
            config_diffs,
            fix=config_fix,
            files=files,
        ),
        as_warning(
            json_row(
                "surface.added_tokens_json",
                hf,
                "added_tokens.json",
                exp,
                added_tokens_json_diffs,
                fix=f"{REEXPORT}, or delete added_tokens.json",
                files=files,
            ),
            "transformers' fast tokenizer ignores added_tokens.json beside tokenizer.json (measured on "
            "4.57.6 and 5.24.0), so ids are unchanged there; a slow tokenizer or another tool would add it",
        ),
        *gguf_rows(exports.gguf, exp),
        tiktoken_row(exports.tiktoken, exp, files=files),
    ]
