"""A ``tokenizer.json`` BPE read back into a :class:`~conformance.audit.vocab.Vocab`.

The file is the one validation read and parsed (``conformance.validate``, through the audit's
input plan): never read again here. Tokens are turned back into bytes with the GPT-2
byte<->char table; ids need not follow the stacktok layout, so the vocabulary is encoded by the
textbook merge-list BPE over its own ids (``stacktok_export.models.bpe.textbook``), split by the
pre-tokenizer's ``Split`` regexes (else Llama-3's; several: each an isolated split,
``stacktok_export.split.pretokenize.isolated_split``). Merge entries are parsed by the floor's one
parser (``stacktok_export.importers.common.merge_pair``). Merge-order problems (missing parts,
a result not above its children, merges out of id order, repeated merges) are collected here
for the ``merge_order`` finding.

Out of scope: non-byte-level vocabularies (SentencePiece ``<0xNN>``), non-special added tokens,
the other files of the directory (``stacktok gate`` checks those). Anything that is not a
byte-level BPE ``tokenizer.json`` is a usage error (exit 2).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import regex

from conformance.audit.findings import hex_bytes
from conformance.audit.vocab import Vocab
from conformance.core.errors import UsageError
from conformance.validate import ReadFile
from stacktok_export.importers.common import merge_pair
from stacktok_export.models.bpe.textbook import MergeListBPE
from stacktok_export.split.bytelevel import from_chars
from stacktok_export.split.pretokenize import LLAMA3_PATTERN, isolated_split


def _hf_patterns(pre: Any) -> list[str]:
    """Every Split regex of a tokenizer.json pre-tokenizer, in order, else the Llama-3 pattern."""
    parts = pre.get("pretokenizers", [pre]) if isinstance(pre, dict) else []
    found = [
        str(p["pattern"]["Regex"])
        for p in parts
        if isinstance(p, dict)
        and p.get("type") == "Split"
        and isinstance(p.get("pattern"), dict)
        and "Regex" in p["pattern"]
    ]
    return found or [LLAMA3_PATTERN]


def _splitter(patterns: list[str]) -> Callable[[str], list[str]]:
    """One pattern: its matches (v1); several: isolated splits in order, gaps kept as pieces."""
    compiled = [regex.compile(p) for p in patterns]
    if len(compiled) == 1:
        return compiled[0].findall

    def split(text: str) -> list[str]:
        pieces = [text]
        for rx in compiled:
            pieces = [p for piece in pieces for p in isolated_split(rx, piece)]
        return pieces

    return split


def _hf_merge(m: Any) -> tuple[str, str]:
    pair = merge_pair(m)
    if pair is None:
        raise UsageError(f"tokenizer.json merge {m!r} is neither 'a b' nor [a, b]")
    return pair


def hf_merge_problems(merges: list[tuple[str, str]], vocab: dict[str, int]) -> list[str]:
    """Merges whose parts or result are missing, not below the result, out of id order, or repeated."""
    problems: list[str] = []
    prev, seen = -1, set()
    for i, (a, b) in enumerate(merges):
        ia, ib, ir = vocab.get(a), vocab.get(b), vocab.get(a + b)
        where = f"merge #{i} {a!r} + {b!r}"
        if (a, b) in seen:
            problems.append(f"{where} is listed twice")
        seen.add((a, b))
        if ia is None or ib is None or ir is None:
            missing = [s for s, x in ((a, ia), (b, ib), (a + b, ir)) if x is None]
            problems.append(f"{where}: {missing} not in the vocab")
            continue
        if ir <= max(ia, ib):
            problems.append(f"{where} -> id {ir} is not above its children ({ia}, {ib})")
        if ir <= prev:
            problems.append(
                f"{where} -> id {ir} comes after a merge creating id {prev}: merges not in id order"
            )
        prev = max(prev, ir)
    return problems


def _hf_strings(model: dict[str, Any]) -> tuple[dict[str, int], list[tuple[str, str]]]:
    if model.get("type") != "BPE" or not isinstance(model.get("vocab"), dict):
        raise UsageError(f"tokenizer.json model is {model.get('type')!r}, not a BPE with a vocab")
    vocab = model["vocab"]
    if not all(isinstance(v, int) for v in vocab.values()):
        raise UsageError("tokenizer.json vocab ids must be integers")
    return vocab, [_hf_merge(m) for m in model.get("merges") or []]


def _hf_specials(doc: dict[str, Any]) -> dict[str, int]:
    return {
        t["content"]: t["id"]
        for t in doc.get("added_tokens") or []
        if isinstance(t, dict) and t.get("special") and isinstance(t.get("content"), str)
    }


def _to_bytes(vocab: dict[str, int], specials: dict[str, int]) -> dict[int, bytes]:
    """Ordinary tokens (ids not taken by a special) as bytes; two strings on one id is a duplicate."""
    special_ids = set(specials.values())
    out: dict[int, bytes] = {}
    for s, i in vocab.items():
        if i in special_ids:
            continue
        try:
            b = from_chars(s)
        except KeyError:
            raise UsageError(f"tokenizer.json token {s!r} is not byte-level (GPT-2 byte<->char)") from None
        if i in out:
            raise UsageError(f"tokenizer.json gives id {i} to both {hex_bytes(out[i])} and {hex_bytes(b)}")
        out[i] = b
    return out


def hf_vocab(read: ReadFile) -> Vocab:
    """Validation's ``tokenizer.json`` (``Validated.hf["tokenizer.json"]``) as a :class:`Vocab`
    (merge-list BPE over its own ids)."""
    path, doc = read.path, read.value
    if not isinstance(doc, dict) or not isinstance(doc.get("model"), dict):
        raise UsageError(f"{path}: not a tokenizer.json (no model)")
    strings, merges = _hf_strings(doc["model"])
    specials = _hf_specials(doc)
    tokens = _to_bytes(strings, specials)
    by_bytes = {b: i for i, b in sorted(tokens.items(), reverse=True)}
    byte_ids = {b[0]: i for b, i in by_bytes.items() if len(b) == 1}
    rows = [
        (strings[a], strings[b], strings[a + b])
        for a, b in merges
        if a in strings and b in strings and a + b in strings
    ]
    bpe = MergeListBPE(byte_ids, rows)
    split = _splitter(_hf_patterns(doc.get("pre_tokenizer")))

    def encode(text: str) -> list[int]:
        return [i for piece in split(text) for i in bpe(piece.encode("utf-8"))]

    return Vocab(
        subject="tokenizer.json",
        source=str(path),
        tokens=tokens,
        specials=specials,
        merged_ids=sorted(i for i, b in tokens.items() if len(b) > 1),
        bpe=bpe,
        encode=encode,
        merge_problems=hf_merge_problems(merges, strings),
        n_merges=len(merges),
        missing_bytes=[b for b in range(256) if b not in byte_ids],
        ignore_merges=bool(doc["model"].get("ignore_merges")),
    )
