"""The one checkpoint builder: a private copy of the shipped export, laid out as a test needs.

``build_checkpoint(dest)`` copies ``tokenizer/stack100m-32768-hf`` to ``dest``; options add the
sibling exports (``exports="inside"``: the ``.gguf`` and ``.tiktoken`` in the directory, as a
checkpoint holds them; ``"beside"``: next to it, as ``tokenizer/`` holds them, so ``dest`` must be
named ``*-hf``), the model's ``config.json`` / ``generation_config.json`` (``model_config=True``),
and then each edit in ``edits`` (a callable on the directory: :func:`json_edit`, :func:`remove`,
:func:`replace`, :func:`symlink`, or a test's own). ``source=None`` builds around tokenizer files
already in ``dest`` (a re-save). :func:`resave` is what a user does with ``save_pretrained``.

Example::

    ckpt = build_checkpoint(tmp_path / "ckpt", exports="inside", model_config=True,
                            edits=[json_edit("tokenizer_config.json", set={"add_bos_token": True})])

:func:`snapshot` hashes every file under a directory, to show a command never wrote into it.

Out of scope: running anything on the result (:mod:`tests.helpers.gate`); the shipped files are
only ever read.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Literal

from .paths import GGUF, ROOT, SHIPPED_HF, TIKTOKEN

Edit = Callable[[Path], None]

#: a Llama model's config beside the tokenizer: the ids the export declares, the full vocabulary
MODEL_CONFIG = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "vocab_size": 32768,
    "bos_token_id": 32759,
    "eos_token_id": 32760,
    "pad_token_id": 32761,
}
GENERATION_CONFIG = {"bos_token_id": 32759, "eos_token_id": [32760, 32765], "pad_token_id": 32761}


def build_checkpoint(
    dest: Path,
    *,
    source: Path | None = SHIPPED_HF,
    exports: Literal["none", "inside", "beside"] = "none",
    model_config: bool = False,
    edits: Iterable[Edit] = (),
) -> Path:
    """Copy ``source`` to ``dest``, add what is asked, apply ``edits`` in order; returns ``dest``."""
    if source is not None:
        shutil.copytree(source, dest)
    if exports != "none":
        where = dest if exports == "inside" else dest.parent
        for name in (GGUF, TIKTOKEN):
            shutil.copy(ROOT / "tokenizer" / name, where / name)
    if model_config:
        for name, value in (("config.json", MODEL_CONFIG), ("generation_config.json", GENERATION_CONFIG)):
            (dest / name).write_text(json.dumps(value, indent=2) + "\n", encoding="utf-8")
    for edit in edits:
        edit(dest)
    return dest


def remove(*names: str) -> Edit:
    """Delete ``DIR/name`` for each name."""

    def edit(directory: Path) -> None:
        for name in names:
            (directory / name).unlink()

    return edit


def replace(name: str, content: str | bytes) -> Edit:
    """Write ``content`` as ``DIR/name`` (a new file or over the exported one)."""

    def edit(directory: Path) -> None:
        path = directory / name
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")

    return edit


def symlink(name: str, target: Path) -> Edit:
    """Make ``DIR/name`` a symlink to ``target`` (replacing the file there)."""

    def edit(directory: Path) -> None:
        path = directory / name
        path.unlink(missing_ok=True)
        path.symlink_to(target)

    return edit


def resave(dest: Path, *, source: Path = SHIPPED_HF) -> Path:
    """What a user does: load ``source`` with ``AutoTokenizer``, ``save_pretrained`` it to ``dest``."""
    from transformers import AutoTokenizer

    AutoTokenizer.from_pretrained(str(source)).save_pretrained(str(dest))
    return dest


def demote_merge(tokenizer_json: dict, merge: str = "Ġ t") -> None:
    """Move ``merge`` to the end of ``model.merges`` (tokenizers#1297 / llama.cpp#9692: a damaged
    merge list); the default ``"Ġ t"`` changes every word starting " t"."""
    merges = tokenizer_json["model"]["merges"]
    merges.append(merges.pop(merges.index(merge)))


def unreachable_merge(tok) -> tuple[int, int]:  # noqa: ANN001 -- a StackTokenizer
    """A pair ``(a, b)`` to append to ``tok``'s merges whose bytes its earlier merges split
    otherwise: the new token is not self-reachable (tiktoken would take it whole)."""
    table, pairs = tok.token_bytes(), set(tok.merges)
    return next(
        (a, b)
        for b in range(256, len(table))
        for a in b"etaoins "
        if (a, b) not in pairs
        and table[a] + table[b] not in table
        and tok._bpe(table[a] + table[b]) != [a, b]
    )


def snapshot(directory: Path) -> dict[str, str]:
    """``{relative path: sha256}`` of every file under ``directory`` (compare before and after a run)."""
    return {
        str(p.relative_to(directory)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(directory.rglob("*"))
        if p.is_file()
    }
