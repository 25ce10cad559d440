"""``tokenizer.json`` schema: the checks that run before tokenizers itself ever sees the file.

The keys tokenizers knows (a renamed key is named), a BPE ``model`` with a ``vocab`` of unique
non-negative ids, ``merges`` in one form (``"a b"`` strings or ``[a, b]`` pairs) whose parts
and results are in the vocab, a ``continuing_subword_prefix`` tokenizers can apply without
panicking, complete ``added_tokens``, typed sections. :func:`check_tokenizer_json` takes the
value already parsed by ``conformance.validate.jsonfile``.

Out of scope: loading the file with tokenizers (``conformance.validate.tokenizers_load``);
whether ids and flags equal the artifact's (the gate's static checks).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from conformance.validate.common import U32_MAX, fail, is_int, need_object, show, unknown_keys
from conformance.validate.tokens import check_token_entry
from stacktok_export.importers.common import merge_pair
from stacktok_export.util import limits

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


def check_tokenizer_json(path: Path, value: Any) -> dict[str, Any]:
    """Schema-check the parsed ``tokenizer.json`` (BPE); returns it as the object it is."""
    data = need_object(path, "top level", value, "tokenizer.json must be one JSON object")
    unknown_keys(path, "", data, TOKENIZER_JSON_KEYS, "tokenizer.json")
    model = need_object(path, "model", data.get("model"), "add the BPE model section")
    unknown_keys(path, "model", model, BPE_KEYS, "tokenizers' BPE model")
    if model.get("type") != "BPE":
        what = f"is {show(model['type'])}, not 'BPE'" if "type" in model else "is missing"
        fail(path, "model.type", what, "set it to 'BPE' (stacktok exports a BPE model)")
    _check_model_options(path, model)
    vocab = _check_vocab(path, model)
    _check_merges(path, model, vocab)
    _check_added_tokens(path, data.get("added_tokens", []))
    _check_sections(path, data)
    return data


def _check_model_options(path: Path, model: dict[str, Any]) -> None:
    for key in ("unk_token", "continuing_subword_prefix", "end_of_word_suffix"):
        if model.get(key) is not None and not isinstance(model[key], str):
            fail(path, f"model.{key}", f"must be a string or null, got {show(model[key])}", "set it to null")
    for key in ("fuse_unk", "byte_fallback", "ignore_merges"):
        if key in model and not isinstance(model[key], bool):
            fail(path, f"model.{key}", f"must be true or false, got {show(model[key])}", "set it to false")
    dropout = model.get("dropout")
    if dropout is not None and (isinstance(dropout, bool) or not isinstance(dropout, (int, float))):
        fail(path, "model.dropout", f"must be a number or null, got {show(dropout)}", "set it to null")
    if dropout is not None and not 0.0 <= dropout <= 1.0:
        fail(path, "model.dropout", f"{dropout} is outside 0..1", "set it to null (no dropout)")


def _check_vocab(path: Path, model: dict[str, Any]) -> dict[str, int]:
    if "vocab" not in model:
        fail(path, "model.vocab", "is missing", "add the vocab object {token: id}")
    vocab = need_object(path, "model.vocab", model["vocab"], "write the vocab as {token: id}")
    most = limits.current().vocab_entries
    if len(vocab) > most:
        fail(
            path,
            "model.vocab",
            f"holds {len(vocab):,} tokens, over the limit of {most:,} (real vocabularies: up to ~900k)",
            "if this is a real vocabulary, raise the limit with --max-file-mb",
        )
    owner: dict[int, str] = {}
    for token, token_id in vocab.items():
        if not is_int(token_id) or not 0 <= token_id <= U32_MAX:
            fail(
                path,
                f"model.vocab[{token!r}]",
                f"id {show(token_id)} is not a non-negative integer",
                "give every token an integer id 0..n-1",
            )
        if token_id in owner:
            fail(
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
        fail(
            path,
            where,
            f"is a {type(item).__name__} but model.merges[0] is a {form.__name__}",
            "write every merge in one form: all 'a b' strings or all [a, b] pairs (tokenizers rejects a mix)",
        )
    pair = merge_pair(item)  # the one parser of merge entries (the importers use it too)
    if pair is not None and all(pair):
        return pair
    if isinstance(item, str):
        fail(
            path,
            where,
            f"{item!r} is not two tokens separated by exactly one space",
            "write it as 'left right' (one U+0020), or use [left, right] pairs",
        )
    fail(path, where, f"{show(item)} is not a pair of two non-empty strings", "write it as [left, right]")


def _check_merges(path: Path, model: dict[str, Any], vocab: dict[str, int]) -> None:
    merges = model.get("merges")
    if not isinstance(merges, list):
        fail(
            path, "model.merges", f"must be a list, got {show(merges)}", "add the merges list (may be empty)"
        )
    if not merges:
        return
    form = str if isinstance(merges[0], str) else list
    prefix = model.get("continuing_subword_prefix") or ""
    seen: dict[tuple[str, str], int] = {}
    for i, item in enumerate(merges):
        left, right = _merge_parts(path, i, item, form)
        if prefix and not right.startswith(prefix):
            fail(
                path,
                "model.continuing_subword_prefix",
                f"is {prefix!r} but the right part {right!r} of merge {i} does not start with it "
                "(tokenizers slices the prefix off every right part and panics or corrupts the token)",
                "set it to null: a byte-level BPE has no subword prefix",
            )
        for part in (left, right, left + right[len(prefix) :]):
            if part not in vocab:
                fail(
                    path,
                    f"model.merges[{i}]",
                    f"{part!r} (from merge {left!r} + {right!r}) is not in model.vocab",
                    "every merge's parts and result must be vocab tokens: re-export the tokenizer",
                )
        if (left, right) in seen:
            fail(path, f"model.merges[{i}]", f"repeats merges[{seen[left, right]}]", "remove the duplicate")
        seen[left, right] = i


def _check_added_tokens(path: Path, added: Any) -> None:
    if not isinstance(added, list):
        fail(path, "added_tokens", f"must be a list, got {show(added)}", "use [] when there are none")
    ids: dict[int, int] = {}
    contents: dict[str, int] = {}
    for i, entry in enumerate(added):
        where = f"added_tokens[{i}]"
        entry = check_token_entry(path, where, entry, require_flags=True)
        token_id = entry.get("id")
        if not is_int(token_id) or not 0 <= token_id <= U32_MAX:
            fail(path, f"{where}.id", f"must be a non-negative integer, got {show(token_id)}", "set its id")
        if token_id in ids:
            fail(
                path,
                f"{where}.id",
                f"{token_id} is also added_tokens[{ids[token_id]}]'s id",
                "use unique ids",
            )
        if entry["content"] in contents:
            other = contents[entry["content"]]
            fail(path, f"{where}.content", f"{entry['content']!r} repeats added_tokens[{other}]", "keep one")
        ids[token_id], contents[entry["content"]] = i, i


def _check_sections(path: Path, data: dict[str, Any]) -> None:
    for key in SECTIONS:
        section = data.get(key)
        if section is None:
            continue
        need_object(path, key, section, f"set {key} to null or an object with a 'type'")
        if not isinstance(section.get("type"), str):
            fail(path, f"{key}.type", f"must be a string, got {show(section.get('type'))}", "name its type")
    for key in ("truncation", "padding"):
        if data.get(key) is not None and not isinstance(data[key], dict):
            fail(path, key, f"must be null or an object, got {show(data[key])}", "set it to null")
