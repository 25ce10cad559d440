"""Reading a pack back: :class:`PackReader` for training, :func:`check_pack` for ``stacktok pack --check``.

A pack needs nothing of stacktok to be read (``numpy.memmap`` on each
``.bin`` with the manifest's ``dtype``, ``<u2`` or ``<u4``, ``numpy.load`` on
each ``.offsets.npy``); this reader adds the
safety a training loop wants: the manifest must be complete and its tokenizer
fingerprint must be the tokenizer in use.

Out of scope: shuffling, distributed sampling, padding (windows are dense).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from ..models.bpe.bpe import StackTokenizer, load_tokenizer
from .encode import sampled
from .pipeline import MANIFEST, READS, PackError
from .writer import megatron_index, sha256_file


def read_manifest(directory: str | os.PathLike[str]) -> dict[str, Any]:
    path = Path(directory) / MANIFEST
    if not path.is_file():
        if Path(directory).is_dir() and any(Path(directory).glob("part-*.json")):
            raise PackError(f"{directory}: the pack is unfinished (part-*.json); rerun the same pack command")
        raise PackError(f"{directory}: no {MANIFEST}; not a pack directory")
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise PackError(f"{path}: unreadable ({exc})") from None
    if not isinstance(manifest, dict) or manifest.get("format") not in READS or "shards" not in manifest:
        raise PackError(f"{path}: not a complete {READS[-1]} manifest")
    return manifest


def dtype_of(manifest: dict[str, Any]) -> str:
    """The token dtype of a pack (``<u2``; ``<u4`` for a vocabulary over 65,536 ids)."""
    return str(manifest.get("dtype", "<u2"))


class PackReader:
    """The documents and tokens of a finished pack, checked against ``tokenizer`` (if given)."""

    def __init__(self, directory: str | os.PathLike[str], *, tokenizer: StackTokenizer | None = None) -> None:
        self.directory = Path(directory)
        self.manifest = read_manifest(directory)
        self.dtype = dtype_of(self.manifest)
        want = self.manifest["tokenizer"]["fingerprint"]
        if tokenizer is not None and tokenizer.fingerprint != want:
            raise PackError(
                f"{directory} was packed with tokenizer {self.manifest['tokenizer']['name']} "
                f"(fingerprint {want[:16]}), not {tokenizer.name} ({tokenizer.fingerprint[:16]}); "
                "train with the tokenizer the pack was made with, or pack again"
            )

    def shards(self) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """``(tokens memmap, document offsets)`` per shard, in order."""
        for shard in self.manifest["shards"]:
            base = self.directory / shard["name"]
            tokens = (
                np.memmap(f"{base}.bin", dtype=self.dtype, mode="r") if shard["tokens"] else _none(self.dtype)
            )
            yield tokens, np.load(f"{base}.offsets.npy")

    def documents(self) -> Iterator[np.ndarray]:
        """Each document's ids, ``<|bos|>`` ... ``<|eos|>``, in corpus order."""
        for tokens, offsets in self.shards():
            for a, b in zip(offsets[:-1].tolist(), offsets[1:].tolist()):
                yield tokens[a:b]

    def windows(self, length: int) -> Iterator[np.ndarray]:
        """Dense training windows of ``length`` tokens over all documents back to back (the rest dropped)."""
        if length < 1:
            raise ValueError(f"window length must be at least 1, got {length}")
        carry = np.zeros(0, dtype=self.dtype)  # the tail of the previous shard (< length tokens)
        for tokens, _ in self.shards():
            start = 0
            if len(carry):
                start = min(length - len(carry), len(tokens))
                carry = np.concatenate([carry, tokens[:start]])
                if len(carry) < length:
                    continue
                yield carry
            full = start + (len(tokens) - start) // length * length
            for i in range(start, full, length):
                yield np.asarray(tokens[i : i + length])  # a view of the memory map, no copy of the shard
            carry = np.array(tokens[full:])

    @property
    def tokens(self) -> int:
        return int(self.manifest["totals"]["tokens"])


def check_pack(
    directory: str | os.PathLike[str], *, artifact: str | None = None, rate: float = 0.01
) -> list[str]:
    """Problems found re-hashing every shard, re-checking its layout and re-encoding a sample."""
    manifest = read_manifest(directory)
    tok = load_tokenizer(artifact)
    if tok.fingerprint != manifest["tokenizer"]["fingerprint"]:
        theirs = manifest["tokenizer"]["fingerprint"][:16]
        return [f"{directory}: packed with another tokenizer (fingerprint {theirs}); pass its --artifact"]
    problems: list[str] = []
    for k, shard in enumerate(manifest["shards"]):
        problems += _check_shard(Path(directory), k, shard, manifest, tok, rate)
    return problems


def _check_shard(
    out: Path, k: int, shard: dict[str, Any], manifest: dict[str, Any], tok: StackTokenizer, rate: float
) -> list[str]:
    base = out / shard["name"]
    name = shard["name"]
    try:
        if sha256_file(Path(f"{base}.bin")) != shard["sha256"]:
            return [f"{name}.bin: sha256 differs from the manifest (the file changed or is truncated)"]
        dtype = dtype_of(manifest)
        tokens = np.memmap(f"{base}.bin", dtype=dtype, mode="r") if shard["tokens"] else _none(dtype)
        offsets = np.load(f"{base}.offsets.npy")
    except (OSError, ValueError) as exc:
        return [f"{name}: unreadable ({exc})"]
    if len(offsets) != shard["documents"] + 1 or offsets[0] != 0 or offsets[-1] != len(tokens):
        return [f"{name}.offsets.npy: does not match {shard['documents']} documents of {len(tokens)} tokens"]
    lengths = np.diff(offsets.astype(np.int64))
    if manifest["options"]["format"] == "megatron":
        idx = Path(f"{base}.idx")
        if not idx.is_file() or idx.read_bytes() != megatron_index(lengths, dtype):
            return [f"{name}.idx: missing or not the Megatron index of {name}.bin"]
    problems = _check_specials(name, tokens, offsets, tok)
    for d in range(shard["documents"]):
        if not problems and sampled(k, d, rate):
            ids = tokens[offsets[d] + 1 : offsets[d + 1] - 1].tolist()
            if tok.encode(tok.decode(ids)) != ids:
                problems.append(f"{name}: document {d} does not re-encode to its ids with this tokenizer")
    return problems


def _check_specials(name: str, tokens: np.ndarray, offsets: np.ndarray, tok: StackTokenizer) -> list[str]:
    if len(tokens) and int(tokens.max()) >= tok.vocab_size:
        return [f"{name}: id {int(tokens.max())} is outside the vocabulary ({tok.vocab_size})"]
    starts, ends = offsets[:-1], offsets[1:] - 1
    if (tokens[starts] != tok.bos_id).any() or (tokens[ends] != tok.eos_id).any():
        return [f"{name}: a document does not start with <|bos|> and end with <|eos|>"]
    # in_text tokens (Qwen3's <think>, llama.cpp's [PAD...]) are split out of plain text by the
    # source's own rule: their ids in a document are what every runtime gives, not an injection
    # (the sampled re-encode still checks those documents)
    control = [i for s, i in tok.special_to_id.items() if s not in tok.in_text]
    specials = int(np.isin(tokens, np.array(control, dtype=np.int64)).sum())
    if specials != 2 * len(starts):
        inside = specials - 2 * len(starts)
        return [f"{name}: {inside} special ids inside documents (corpus text became control tokens)"]
    return []


def _none(dtype: str) -> np.ndarray:
    return np.zeros(0, dtype=dtype)
