"""``tokenizer.json`` id by id: ``model.vocab`` is the artifact's ordinary ids and nothing else,
``added_tokens`` hold each special at its id with its exact content and nothing else.

Out of scope: the added tokens' flags and every other section (``conformance.static.hf_files``).
"""

from __future__ import annotations

from typing import Any

from conformance.static.surface.common import Diff, Expected, compare_ids, is_int, shorten, show_chars


def _vocab_diffs(vocab: Any, exp: Expected) -> list[Diff]:
    if not isinstance(vocab, dict):
        return [Diff(f"model.vocab is {shorten(vocab)}, not a {{string: id}} object")]
    want = exp.chars_by_id
    if not exp.ours:  # a source's own tokenizer.json may list a special in model.vocab at its id
        vocab = {t: i for t, i in vocab.items() if not (is_int(i) and exp.id_to_special.get(i) == t)}
    if vocab == {t: i for i, t in want.items()}:
        return []
    out: list[Diff] = []
    by_id: dict[int, list[str]] = {}
    for text, token_id in vocab.items():
        if not is_int(token_id):
            out.append(Diff(f"model.vocab[{text!r}] is {shorten(token_id)}, not an integer id"))
            continue
        by_id.setdefault(token_id, []).append(text)
    out += compare_ids(
        "model.vocab id", by_id, want, show=show_chars, describe=exp.describe, remove="the vocab entry"
    )
    return out


def _added_token_diffs(added: Any, exp: Expected) -> list[Diff]:
    if added is None:
        added = []
    if not isinstance(added, list):
        return [Diff(f"added_tokens is {shorten(added)}, not a list")]
    out: list[Diff] = []
    by_id: dict[int, list[str]] = {}
    for n, entry in enumerate(added):
        token_id = entry.get("id") if isinstance(entry, dict) else None
        content = entry.get("content") if isinstance(entry, dict) else None
        if not is_int(token_id) or not isinstance(content, str):
            out.append(Diff(f"added_tokens[{n}] is {shorten(entry)}, not an {{id, content}} entry"))
            continue
        by_id.setdefault(token_id, []).append(content)
    out += compare_ids(
        "added_tokens id",
        by_id,
        exp.id_to_special,
        show=repr,
        describe=exp.describe,
        remove="the added token",
    )
    return out


def tokenizer_json_diffs(data: Any, exp: Expected) -> list[Diff]:
    if not isinstance(data, dict):
        return [Diff(f"the top level is {shorten(data)}, not an object")]
    model = data.get("model")
    if isinstance(model, dict):
        out = _vocab_diffs(model.get("vocab"), exp)
    else:
        out = [Diff(f"model is {shorten(model)}, not an object with a vocab")]
    return out + _added_token_diffs(data.get("added_tokens"), exp)
