"""``stacktok audit [ARTIFACT_OR_DIR]``: a static audit of a byte-level BPE vocabulary.

Input: an artifact JSON (default: the shipped one), or a tokenizer directory
-- then the vocabulary in its ``tokenizer.json`` (merges + vocab, turned back
into bytes with the GPT-2 byte<->char table) *and* the artifact given by
``--artifact`` (default: shipped) are audited. Findings, one line each:

1. ``self_reachable`` -- merge-list BPE of every token's own bytes gives
   exactly that token. Only then do tiktoken's rank merging and HF/llama.cpp
   ``ignore_merges`` agree with the merge list (rten#453: 588 Llama-3 tokens
   unreachable; llama.cpp PR#7193 " Việt").
2. ``duplicate_bytes`` -- no two ids (specials included) have the same bytes
   (llama.cpp aborts on duplicate token strings).
3. ``merge_order`` -- every merge combines lower ids into a higher one, and
   (tokenizer.json) merges are listed in the order of their result ids.
4. ``specials_unreachable`` -- untrusted encoding of each special string in
   a few shapes gives no special id; no ordinary token spells or contains one.
5. ``long_tokens`` (info) -- tokens over 32 bytes (``Llama.detokenize``
   returns ``b''`` for them, llama-cpp-python#2362).
6. ``partial_utf8`` (info) -- tokens that are not valid UTF-8 on their own:
   what a streaming decoder must hold back.
7. ``unicode_tables`` (info) -- every code point (surrogates skipped, all
   planes) where an installed backend's pre-tokenizer splits differently from
   the reference's ``regex``, found by encoding blocks of probe shapes and
   bisecting the blocks that differ; plus each backend's apparent Unicode
   version (which sentinel code points it treats as letters). Disagreement is
   informational -- declared divergences cover it -- but always stated.

Exit 0: no violation of 1-4; 1: a violation; 2: usage error (one-line reason),
including an artifact that ``StackTokenizer.load`` refuses for any reason other
than its merge order (e.g. a recorded regex engine whose tables differ).
The JSON report has sorted keys and no timestamps or timings.

Out of scope: fixing anything; whether a directory's export files match the
artifact (``stacktok gate`` checks that -- ``unicode_tables`` compares the
libraries' tables through exports rendered from the artifact); non-byte-level
vocabularies (SentencePiece ``<0xNN>``); non-special added tokens; regex
differences that are not Unicode tables (llama.cpp's ``'[sS]`` vs case-folded
``'ſ``); white-space class changes, which are reported only when they change ids.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import regex

from stacktok_export import ArtifactError, StackTokenizer
from stacktok_export._atomic import write_text_atomic
from stacktok_export.bpe import shipped_artifact_path
from stacktok_export.drift import STAND_INS, Shape, choose_shape, hypothesis_ids
from stacktok_export.export.bytelevel import from_chars
from stacktok_export.pretokenize import LLAMA3_PATTERN, engine_info
from stacktok_export.progress import Progress

from conformance.core.declared import UNICODE_TABLES
from conformance.core.fixtures import FIXTURES, FixtureError, load_divergences, version_matches
from conformance.core.layout import Exports
from conformance.core.protocol import BackendMissing

LONG_TOKEN_BYTES = 32  # Llama.detokenize returns b'' above this (llama-cpp-python#2362)
CAP = 10  # list items shown per finding in human output
SCANNABLE = ("tiktoken", "tokenizers", "transformers", "llama.cpp")
DEFAULT_BACKENDS = ("tiktoken", "tokenizers", "llama.cpp")
BLOCK = 512  # code points per scanned block
#: one code point first assigned (as a letter) in each Unicode version, oldest first
SENTINELS: tuple[tuple[str, int], ...] = (
    ("13.0", 0x08BE),
    ("14.0", 0x0870),
    ("15.0", 0x11F04),
    ("15.1", 0x2EBF0),
    ("16.0", 0x1C89),
    ("17.0", 0x323B0),
    ("18.0", 0x3D000),
)
SANITY_TEXT = "Hello world, it's 2026!\n\tdef f(x):\n        return x ** 2  # ok\r\n"
VIOLATIONS = ("self_reachable", "duplicate_bytes", "merge_order", "specials_unreachable")

Say = Callable[[str], None]


class AuditUsageError(Exception):
    """Exit 2 with this one-line reason."""


@dataclass
class Finding:
    name: str
    subject: str  # "artifact" | "tokenizer.json" | "backends"
    status: str  # pass | fail | info | skip
    summary: str
    details: dict[str, Any] = field(default_factory=dict)
    lines: list[str] = field(default_factory=list)  # human detail lines (already capped)

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "subject": self.subject,
            "status": self.status,
            "summary": self.summary,
            "details": self.details,
        }


@dataclass
class Vocab:
    """One vocabulary under audit, reduced to bytes, specials, merges and an encoder."""

    subject: str
    source: str
    tokens: dict[int, bytes]  # ordinary ids -> bytes
    specials: dict[str, int]
    merged_ids: list[int]  # ids created by a merge (what self_reachable checks)
    bpe: Callable[[bytes], list[int]]
    encode: Callable[[str], list[int]]  # untrusted: specials are text
    merge_problems: list[str]
    n_merges: int
    missing_bytes: list[int] = field(default_factory=list)


# ------------------------------------------------------------------ helpers
def _hex(b: bytes) -> str:
    """A short printable form of token bytes (Python bytes literal, cut at 24 bytes)."""
    return repr(b) if len(b) <= 24 else repr(b[:24]) + "..."


def _cap(items: Sequence[str], cap: int = CAP) -> list[str]:
    shown = list(items[:cap])
    if len(items) > cap:
        shown.append(f"... and {len(items) - cap:,} more")
    return shown


def _u(cp: int) -> str:
    return f"U+{cp:04X}"


def _ranges(cps: Sequence[int]) -> list[tuple[int, int]]:
    """Consecutive runs of sorted code points as ``(first, last)``."""
    out: list[tuple[int, int]] = []
    for cp in cps:
        if out and cp == out[-1][1] + 1:
            out[-1] = (out[-1][0], cp)
        else:
            out.append((cp, cp))
    return out


def _span(first: int, last: int) -> str:
    return _u(first) if first == last else f"{_u(first)}..{_u(last)}"


# ------------------------------------------------------------ reading input
class MergeListBPE:
    """Merge-list BPE over arbitrary ids: the lowest-rank pair first, leftmost occurrences first.

    Used for ``tokenizer.json`` vocabularies, whose ids need not follow the
    stacktok layout. Bytes without a token become ``-1 - byte``.
    """

    def __init__(self, byte_ids: dict[int, int], merges: Iterable[tuple[int, int, int]]) -> None:
        self.byte_ids = byte_ids
        self.rank: dict[tuple[int, int], tuple[int, int]] = {}
        for r, (a, b, out) in enumerate(merges):
            self.rank.setdefault((a, b), (r, out))

    def __call__(self, data: bytes) -> list[int]:
        ids = [self.byte_ids.get(b, -1 - b) for b in data]
        rank = self.rank
        while len(ids) > 1:
            found = [(rank[p][0], p) for p in zip(ids, ids[1:]) if p in rank]
            if not found:
                break
            pair = min(found)[1]
            out, i, merged = rank[pair][1], 0, []
            while i < len(ids):
                if i + 1 < len(ids) and (ids[i], ids[i + 1]) == pair:
                    merged.append(out)
                    i += 2
                else:
                    merged.append(ids[i])
                    i += 1
            ids = merged
        return ids


def _read_json(path: Path, what: str) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise AuditUsageError(f"{path}: no such {what}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise AuditUsageError(f"{path}: cannot read {what} ({exc})") from None
    except json.JSONDecodeError as exc:
        raise AuditUsageError(f"{path}: malformed JSON at line {exc.lineno} ({exc.msg})") from None


def artifact_merge_problems(merges: Any) -> list[str]:
    """Forward references and repeated pairs in an artifact's raw merge list.

    Malformed entries are left to ``StackTokenizer.load`` (a usage error).
    """
    if not isinstance(merges, list):
        return []
    problems: list[str] = []
    seen: dict[tuple[int, int], int] = {}
    for i, m in enumerate(merges):
        if not (isinstance(m, list) and len(m) == 2 and all(type(x) is int for x in m)):
            return []
        new_id, pair = 256 + i, (m[0], m[1])
        if not all(0 <= x < new_id for x in pair):
            problems.append(
                f"merge #{i} -> id {new_id} combines {list(pair)}: a child id is not below {new_id}"
            )
        if pair in seen:
            problems.append(f"merge #{i} -> id {new_id} repeats the pair {list(pair)} of merge #{seen[pair]}")
        seen.setdefault(pair, i)
    return problems


def load_artifact_vocab(path: Path) -> tuple[Vocab | None, StackTokenizer | None, list[str]]:
    """The artifact as a :class:`Vocab` (``None`` if its merge list is broken) and its problems."""
    payload = _read_json(path, "artifact")
    problems = artifact_merge_problems(payload.get("merges") if isinstance(payload, dict) else None)
    if problems:
        return None, None, problems
    try:
        tok = StackTokenizer.load(path)
    except ArtifactError as exc:
        raise AuditUsageError(str(exc)) from None
    table = tok.token_bytes()
    vocab = Vocab(
        subject="artifact",
        source=str(path),
        tokens=dict(enumerate(table)),
        specials=dict(tok.special_to_id),
        merged_ids=list(range(256, len(table))),
        bpe=tok._bpe,
        encode=tok.encode,
        merge_problems=[],
        n_merges=len(tok.merges),
    )
    return vocab, tok, []


def _hf_pattern(pre: Any) -> str:
    """The Split regex of a tokenizer.json pre-tokenizer, else the Llama-3 pattern."""
    parts = pre.get("pretokenizers", [pre]) if isinstance(pre, dict) else []
    for p in parts:
        if isinstance(p, dict) and p.get("type") == "Split" and isinstance(p.get("pattern"), dict):
            if "Regex" in p["pattern"]:
                return str(p["pattern"]["Regex"])
    return LLAMA3_PATTERN


def _hf_merge(m: Any) -> tuple[str, str]:
    if isinstance(m, str) and m.count(" ") == 1:
        a, b = m.split(" ")
        return a, b
    if isinstance(m, list) and len(m) == 2 and all(isinstance(x, str) for x in m):
        return m[0], m[1]
    raise AuditUsageError(f"tokenizer.json merge {m!r} is neither 'a b' nor [a, b]")


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
        raise AuditUsageError(f"tokenizer.json model is {model.get('type')!r}, not a BPE with a vocab")
    vocab = model["vocab"]
    if not all(isinstance(v, int) for v in vocab.values()):
        raise AuditUsageError("tokenizer.json vocab ids must be integers")
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
            raise AuditUsageError(
                f"tokenizer.json token {s!r} is not byte-level (GPT-2 byte<->char)"
            ) from None
        if i in out:
            raise AuditUsageError(f"tokenizer.json gives id {i} to both {_hex(out[i])} and {_hex(b)}")
        out[i] = b
    return out


def load_hf_vocab(path: Path) -> Vocab:
    """A ``tokenizer.json`` BPE as a :class:`Vocab` (merge-list BPE over its own ids)."""
    doc = _read_json(path, "tokenizer.json")
    if not isinstance(doc, dict) or not isinstance(doc.get("model"), dict):
        raise AuditUsageError(f"{path}: not a tokenizer.json (no model)")
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
    split = regex.compile(_hf_pattern(doc.get("pre_tokenizer")))

    def encode(text: str) -> list[int]:
        return [i for piece in split.findall(text) for i in bpe(piece.encode("utf-8"))]

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
    )


# ------------------------------------------------------- vocabulary findings
def check_self_reachable(v: Vocab) -> Finding:
    """Merge-list BPE of each merged token's bytes must be exactly that token."""
    encoded = ((i, v.bpe(v.tokens[i])) for i in v.merged_ids)
    bad = [(i, got) for i, got in encoded if got != [i]]
    lines = [f"id {i} {_hex(v.tokens[i])} encodes as {got}" for i, got in bad]
    lines += [f"byte 0x{b:02x} has no single-byte token" for b in v.missing_bytes]
    details = {
        "checked": len(v.merged_ids),
        "unreachable": [{"id": i, "bytes": v.tokens[i].hex(), "encodes_as": got} for i, got in bad],
        "missing_bytes": v.missing_bytes,
    }
    if not lines:
        return Finding(
            "self_reachable",
            v.subject,
            "pass",
            f"all {len(v.merged_ids):,} merged tokens encode to themselves",
            details,
        )
    summary = (
        f"{len(bad):,} of {len(v.merged_ids):,} merged tokens are unreachable by the merge list"
        + (f", {len(v.missing_bytes)} bytes have no token" if v.missing_bytes else "")
        + " (tiktoken/ignore_merges would disagree)"
    )
    return Finding("self_reachable", v.subject, "fail", summary, details, _cap(lines))


def _all_tokens(v: Vocab) -> list[tuple[int, bytes]]:
    return sorted(list(v.tokens.items()) + [(i, s.encode("utf-8")) for s, i in v.specials.items()])


def check_duplicate_bytes(v: Vocab) -> Finding:
    """No two ids, specials included, may have the same bytes."""
    ids: dict[bytes, list[int]] = {}
    for i, b in _all_tokens(v):
        ids.setdefault(b, []).append(i)
    dups = sorted((sorted(set(i)), b) for b, i in ids.items() if len(set(i)) > 1)
    details = {"checked": len(_all_tokens(v)), "duplicates": [{"bytes": b.hex(), "ids": i} for i, b in dups]}
    if not dups:
        return Finding(
            "duplicate_bytes",
            v.subject,
            "pass",
            f"all {details['checked']:,} ids have distinct bytes",
            details,
        )
    lines = [f"ids {i} are all {_hex(b)}" for i, b in dups]
    return Finding(
        "duplicate_bytes",
        v.subject,
        "fail",
        f"{len(dups):,} byte strings belong to several ids (llama.cpp aborts on load)",
        details,
        _cap(lines),
    )


def check_merge_order(v: Vocab) -> Finding:
    """Each merge's children have lower ids than its result; merges are in id order."""
    details = {"merges": v.n_merges, "problems": v.merge_problems}
    if not v.merge_problems:
        return Finding(
            "merge_order",
            v.subject,
            "pass",
            f"all {v.n_merges:,} merges combine lower ids, in id order",
            details,
        )
    return Finding(
        "merge_order",
        v.subject,
        "fail",
        f"{len(v.merge_problems):,} merge-order problems",
        details,
        _cap(v.merge_problems),
    )


def special_shapes(s: str) -> tuple[str, ...]:
    return (s, "x" + s, s + s, " " + s)


def check_specials(v: Vocab) -> Finding:
    """Untrusted encoding never yields a special id; no ordinary token spells or contains a special."""
    special_ids = set(v.specials.values())
    leaks = [(t, sorted(set(v.encode(t)) & special_ids)) for s in v.specials for t in special_shapes(s)]
    leaks = [(t, ids) for t, ids in leaks if ids]
    spelled = [(i, s) for i, b in sorted(v.tokens.items()) for s in v.specials if s.encode("utf-8") in b]
    lines = [f"untrusted {t!r} encodes to special id(s) {ids}" for t, ids in leaks]
    lines += [
        f"ordinary id {i} {_hex(v.tokens[i])} {'is' if v.tokens[i] == s.encode() else 'contains'} {s!r}"
        for i, s in spelled
    ]
    details = {
        "specials": len(v.specials),
        "shapes": len(v.specials) * 4,
        "leaks": [{"text": t, "ids": ids} for t, ids in leaks],
        "ordinary_tokens_with_special_text": [{"id": i, "special": s} for i, s in spelled],
    }
    if not lines:
        return Finding(
            "specials_unreachable",
            v.subject,
            "pass",
            f"{len(v.specials)} specials x 4 shapes give no special id; no token spells one",
            details,
        )
    return Finding(
        "specials_unreachable",
        v.subject,
        "fail",
        f"{len(leaks)} untrusted shapes give special ids, {len(spelled)} tokens spell a special",
        details,
        _cap(lines),
    )


def check_long_tokens(v: Vocab) -> Finding:
    """Informational: tokens longer than 32 bytes."""
    long = [(i, b) for i, b in _all_tokens(v) if len(b) > LONG_TOKEN_BYTES]
    details = {"limit": LONG_TOKEN_BYTES, "tokens": [{"id": i, "length": len(b)} for i, b in long]}
    lines = [f"id {i} ({len(b)} bytes) {_hex(b)}" for i, b in long]
    summary = (
        (
            f"{len(long):,} tokens over {LONG_TOKEN_BYTES} bytes (Llama.detokenize returns b'' for them;"
            " decode by token_to_piece, llama-cpp-python#2362)"
        )
        if long
        else f"no token over {LONG_TOKEN_BYTES} bytes"
    )
    return Finding("long_tokens", v.subject, "info" if long else "pass", summary, details, _cap(lines))


def _utf8_ok(b: bytes) -> bool:
    try:
        b.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def check_partial_utf8(v: Vocab) -> Finding:
    """Informational: tokens that are not valid UTF-8 alone (streaming must hold them back)."""
    bad = [(i, b) for i, b in sorted(v.tokens.items()) if not _utf8_ok(b)]
    multi = [(i, b) for i, b in bad if len(b) > 1]
    details = {
        "count": len(bad),
        "multi_byte": len(multi),
        "examples": [{"id": i, "bytes": b.hex()} for i, b in multi[:CAP]],
    }
    lines = [f"id {i} {_hex(b)}" for i, b in multi]
    return Finding(
        "partial_utf8",
        v.subject,
        "info",
        f"{len(bad):,} tokens are not valid UTF-8 alone ({len(multi):,} of them multi-byte):"
        " streaming decoders must hold back incomplete characters",
        details,
        _cap(lines),
    )


def audit_vocab(v: Vocab) -> list[Finding]:
    return [
        check_self_reachable(v),
        check_duplicate_bytes(v),
        check_merge_order(v),
        check_specials(v),
        check_long_tokens(v),
        check_partial_utf8(v),
    ]


def broken_merges(subject: str, problems: list[str]) -> list[Finding]:
    """When the merge list cannot even be built: merge_order fails, the rest is skipped."""
    rows = [
        Finding(
            "merge_order",
            subject,
            "fail",
            f"{len(problems):,} merge-order problems; the vocabulary cannot be built",
            {"problems": problems},
            _cap(problems),
        )
    ]
    rows += [
        Finding(n, subject, "skip", "not checked: the merge list is broken")
        for n in ("self_reachable", "duplicate_bytes", "specials_unreachable", "long_tokens", "partial_utf8")
    ]
    return rows


# ------------------------------------------------------------ unicode tables
def all_code_points() -> list[int]:
    return [c for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF]


def reference_class(ch: str) -> str:
    """The reference regex's class of ``ch``: L, N, S (white space) or O."""
    for cls, pat in (("L", r"\p{L}"), ("N", r"\p{N}"), ("S", r"\s")):
        if regex.match(pat, ch):
            return cls
    return "O"


def backend_class(tok: StackTokenizer, shape: Shape, ch: str, ids: list[int]) -> str:
    """Which class(es) the backend's ids for ``ch`` are consistent with ("?" if none)."""
    fits = [c for c in STAND_INS if hypothesis_ids(tok, shape, ch, c) == ids]
    return "/".join(fits) or "?"


@dataclass
class Scan:
    """One backend's comparison against the reference."""

    name: str
    status: str  # agrees | disagrees | missing | error
    version: str = ""
    reason: str = ""
    seconds: float = 0.0
    leaves: list[tuple[int, list[int], list[int]]] = field(default_factory=list)  # (cp, ref ids, backend ids)
    sentinels: dict[str, str] = field(default_factory=dict)  # version -> backend class of its sentinel
    declared: list[str] = field(default_factory=list)


Encode = Callable[[str], list[int]]


def bisect_disagreements(
    cps: Sequence[int], shape: Shape, ref: Encode, be: Encode
) -> list[tuple[int, list[int], list[int]]]:
    """The single code points of a disagreeing run ``cps`` whose shapes encode differently.

    Should neither half differ (shapes interacting across their boundary, which
    :class:`Shape` rules out), the run's first code point stands for it.
    """
    if len(cps) == 1:
        text = shape.block(cps)
        return [(cps[0], ref(text), be(text))]
    out: list[tuple[int, list[int], list[int]]] = []
    for half in (cps[: len(cps) // 2], cps[len(cps) // 2 :]):
        text = shape.block(half)
        if ref(text) != be(text):
            out += bisect_disagreements(half, shape, ref, be)
    if not out:
        text = shape.block(cps)
        out = [(cps[0], ref(text), be(text))]
    return out


def scan_blocks(
    blocks: Sequence[Sequence[int]],
    texts: Sequence[str],
    ref_ids: Sequence[list[int]],
    shape: Shape,
    ref: Encode,
    be: Encode,
) -> list[tuple[int, list[int], list[int]]]:
    leaves: list[tuple[int, list[int], list[int]]] = []
    for cps, text, ids in zip(blocks, texts, ref_ids):
        if be(text) != ids:
            leaves += bisect_disagreements(cps, shape, ref, be)
    return leaves


def _writers(tok: StackTokenizer) -> dict[str, Callable[[], dict[str, bytes]]]:
    from stacktok_export.export.hf import hf_files
    from stacktok_export.export.tiktoken_fmt import tiktoken_text

    def gguf() -> dict[str, bytes]:
        from stacktok_export.export.gguf_fmt import gguf_bytes

        return {"audit.gguf": gguf_bytes(tok)}

    return {
        "tiktoken": lambda: {"audit.tiktoken": tiktoken_text(tok).encode("ascii")},
        "hf": lambda: {f"audit-hf/{k}": v for k, v in hf_files(tok).items()},
        "gguf": gguf,
    }


FORMAT_OF = {"tiktoken": "tiktoken", "tokenizers": "hf", "transformers": "hf", "llama.cpp": "gguf"}


def render_exports(
    tok: StackTokenizer, artifact: Path, dest: Path, names: Sequence[str]
) -> tuple[Exports, dict[str, str]]:
    """Write the exports ``names`` need into ``dest``; return them and the formats that failed."""
    failed: dict[str, str] = {}
    for fmt, write in _writers(tok).items():
        if fmt not in {FORMAT_OF[n] for n in names}:
            continue
        try:
            files = write()
        except (ImportError, ValueError) as exc:
            failed[fmt] = str(exc)
            continue
        for rel, data in files.items():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            (dest / rel).write_bytes(data)
    exports = Exports(
        artifact=artifact,
        hf_dir=dest / "audit-hf" if (dest / "audit-hf").is_dir() else None,
        tiktoken=dest / "audit.tiktoken" if (dest / "audit.tiktoken").is_file() else None,
        gguf=dest / "audit.gguf" if (dest / "audit.gguf").is_file() else None,
    )
    return exports, failed


def declared_divergences(name: str, version: str) -> list[str]:
    """Ids of the ``unicode_tables`` declarations for backend ``name`` at ``version``
    (``fixtures/divergences.jsonl``; the rule itself is ``conformance.core.declared``)."""
    try:
        divs = load_divergences(FIXTURES / "divergences.jsonl")
    except (FixtureError, OSError):
        return []
    return sorted(
        d.id
        for d in divs
        if d.backend == name and d.cause == UNICODE_TABLES and version_matches(version, d.versions)
    )


def _sentinels(tok: StackTokenizer, shape: Shape, be: Encode) -> dict[str, str]:
    return {v: backend_class(tok, shape, chr(cp), be(shape.text(chr(cp)))) for v, cp in SENTINELS}


def scan_backend(
    name: str,
    exports: Exports,
    tok: StackTokenizer,
    shape: Shape,
    blocks: Sequence[Sequence[int]],
    texts: Sequence[str],
    ref_ids: Sequence[list[int]],
) -> Scan:
    """Load backend ``name`` over ``exports`` and scan every block against the reference."""
    from conformance.backends import load_backend

    start = time.perf_counter()
    try:
        backend = load_backend(name, exports)
    except BackendMissing as exc:
        return Scan(name, "missing", reason=str(exc))
    be: Encode = lambda t: list(backend.encode(t, allow_special=False))  # noqa: E731
    scan = Scan(
        name,
        "agrees",
        version=str(backend.version),
        declared=declared_divergences(name, str(backend.version)),
    )
    if be(SANITY_TEXT) != tok.encode(SANITY_TEXT):
        scan.status, scan.reason = (
            "error",
            (
                "differs from the reference on plain ASCII text: the export or "
                "vocabulary differs (not a Unicode-table issue); run `stacktok gate`"
            ),
        )
        return scan
    scan.leaves = scan_blocks(blocks, texts, ref_ids, shape, tok.encode, be)
    scan.sentinels = _sentinels(tok, shape, be)
    scan.status = "disagrees" if scan.leaves else "agrees"
    scan.seconds = time.perf_counter() - start
    return scan


def apparent_version(sentinels: dict[str, str]) -> str:
    """The newest Unicode version whose sentinel (and every older one) the backend calls a letter."""
    known = "<" + SENTINELS[0][0]
    for version, _ in SENTINELS:
        cls = sentinels.get(version, "?")
        if "O" in cls or cls == "?":
            return known if cls == "O" else f"{known} (then undetermined)"
        known = version
    return known


def _version_key(v: str) -> tuple[int, ...]:
    return tuple(int(x) for x in v.split("."))


def undeclared_versions(scan: Scan) -> list[str]:
    """Sentinel versions the backend does not know and no declared divergence names."""
    if scan.declared:  # a unicode_tables declaration covers every code point the backend splits differently
        return []
    return [v for v, cls in scan.sentinels.items() if cls == "O"]


def grouped_ranges(tok: StackTokenizer, shape: Shape, scan: Scan) -> list[dict[str, Any]]:
    """Disagreeing code points as runs with the same (reference class, backend class)."""
    rows: list[dict[str, Any]] = []
    for cp, _, ids in scan.leaves:
        ch = chr(cp)
        key = (reference_class(ch), backend_class(tok, shape, ch, ids))
        last = rows[-1] if rows else None
        if last and last["last"] == cp - 1 and (last["reference"], last["backend"]) == key:
            last["last"], last["count"] = cp, last["count"] + 1
        else:
            rows.append({"first": cp, "last": cp, "count": 1, "reference": key[0], "backend": key[1]})
    return rows


def scan_details(tok: StackTokenizer, shape: Shape, scan: Scan) -> dict[str, Any]:
    d: dict[str, Any] = {"status": scan.status, "version": scan.version, "reason": scan.reason}
    if scan.status not in ("agrees", "disagrees"):
        return d
    rows = grouped_ranges(tok, shape, scan)
    d.update(
        disagreeing_code_points=len(scan.leaves),
        ranges=[{**r, "first": _u(r["first"]), "last": _u(r["last"])} for r in rows],
        compressed=[_span(a, b) for a, b in _ranges([c for c, _, _ in scan.leaves])],
        sentinels=scan.sentinels,
        apparent_unicode=apparent_version(scan.sentinels),
        declared=scan.declared,
        undeclared_versions=undeclared_versions(scan),
    )
    if scan.leaves:
        cp, ref_ids, be_ids = scan.leaves[0]
        d["example"] = {
            "code_point": _u(cp),
            "text": shape.text(chr(cp)),
            "reference_ids": ref_ids,
            "backend_ids": be_ids,
        }
    return d


def _scan_line(name: str, d: dict[str, Any]) -> str:
    head = f"{name} {d['version']}".strip()
    if d["status"] in ("missing", "error"):
        return f"{head}: {d['status'].upper()} ({d['reason']})"
    if d["status"] == "agrees":
        return f"{head}: agrees on every code point (apparent Unicode {d['apparent_unicode']})"
    undeclared = (
        f"; no declared divergence names Unicode {', '.join(d['undeclared_versions'])}"
        if d["undeclared_versions"]
        else ""
    )
    count, ranges, declared = d["disagreeing_code_points"], len(d["compressed"]), ", ".join(d["declared"])
    return (
        f"{head}: DISAGREES on {count:,} code points in {ranges:,} ranges "
        f"(apparent Unicode {d['apparent_unicode']}; declared: {declared or 'none'}{undeclared})"
    )


def _scan_lines(name: str, d: dict[str, Any]) -> list[str]:
    lines = [_scan_line(name, d)]
    if d.get("ranges"):
        lines += [
            "  " + s
            for s in _cap(
                [
                    f"{_span(int(r['first'][2:], 16), int(r['last'][2:], 16))} "
                    f"({r['count']:,}): reference {r['reference']}, {name} {r['backend']}"
                    for r in d["ranges"]
                ]
            )
        ]
        ex = d["example"]
        lines.append(f"  e.g. {ex['text']!r}: reference {ex['reference_ids']} vs {name} {ex['backend_ids']}")
    return lines


def unicode_finding(tok: StackTokenizer, shape: Shape, scans: Sequence[Scan]) -> Finding:
    """The ``unicode_tables`` finding: pass if every checked backend agrees, else info (stated)."""
    installed = engine_info()
    ref = {
        "installed": installed,
        "recorded": tok.engine,
        "shape": shape.text("{c}"),
        "strong_shape": shape.strong,
    }
    per = {s.name: scan_details(tok, shape, s) for s in scans}
    lines = [
        f"reference: regex {installed['version']} (Unicode {installed['unicode_version']}); artifact "
        f"recorded regex {tok.engine.get('version', '?')} (Unicode {tok.engine.get('unicode_version', '?')})"
    ]
    if not shape.strong:
        lines.append(
            "weak probe: the vocabulary lacks a contraction or 3-digit token; some differences may not show"
        )
    for name, d in per.items():
        lines += _scan_lines(name, d)
    disagree = [
        f"{n} {d['disagreeing_code_points']:,} (apparent Unicode {d['apparent_unicode']})"
        for n, d in per.items()
        if d["status"] == "disagrees"
    ]
    other = [f"{n} {d['status']}" for n, d in per.items() if d["status"] in ("missing", "error")]
    if disagree:
        summary = (
            f"backends split differently from the reference (Unicode {installed['unicode_version']}) on "
            f"code points: {', '.join(disagree)} -- informational, see declared divergences"
        )
    elif checked := [n for n, d in per.items() if d["status"] == "agrees"]:
        summary = f"{', '.join(checked)} split every code point like the reference"
    else:
        summary = "no backend could be checked"
    if other:
        summary += f"; {', '.join(other)}"
    return Finding(
        "unicode_tables",
        "backends",
        "info" if disagree or other else "pass",
        summary,
        {"reference": ref, "backends": per},
        lines,
    )


def reference_blocks(tok: StackTokenizer, shape: Shape) -> tuple[list[list[int]], list[str], list[list[int]]]:
    cps = all_code_points()
    blocks = [cps[i : i + BLOCK] for i in range(0, len(cps), BLOCK)]
    texts = [shape.block(b) for b in blocks]
    return blocks, texts, [tok.encode(t) for t in texts]


def audit_unicode(
    tok: StackTokenizer, artifact: Path, names: Sequence[str], say: Say
) -> tuple[Finding, dict[str, float]]:
    """Scan every backend in ``names``; return the finding and per-step seconds."""
    timings: dict[str, float] = {}
    shape = choose_shape(tok)
    start = time.perf_counter()
    say(f"unicode_tables: reference over {len(all_code_points()):,} code points")
    blocks, texts, ref_ids = reference_blocks(tok, shape)
    timings["reference"] = time.perf_counter() - start
    scans: list[Scan] = []
    with tempfile.TemporaryDirectory(prefix="stacktok-audit-") as tmp:
        exports, failed = render_exports(tok, artifact, Path(tmp), names)
        for name in names:
            if FORMAT_OF[name] in failed:
                scans.append(Scan(name, "error", reason=f"cannot export: {failed[FORMAT_OF[name]]}"))
                continue
            say(f"unicode_tables: {name}")
            scans.append(scan_backend(name, exports, tok, shape, blocks, texts, ref_ids))
            timings[name] = scans[-1].seconds
    return unicode_finding(tok, shape, scans), timings


def skipped_unicode(reason: str) -> Finding:
    return Finding("unicode_tables", "backends", "skip", f"not checked: {reason}")


# ------------------------------------------------------------------ command
@dataclass(frozen=True)
class Target:
    artifact: Path
    directory: Path | None


def resolve_target(path: Path | None, artifact: Path | None) -> Target:
    """ARTIFACT_OR_DIR (+ ``--artifact``) -> what to audit; usage errors name the fix."""
    if path is None:
        return Target(artifact or shipped_artifact_path(), None)
    if path.is_dir():
        if not (path / "tokenizer.json").is_file():
            raise AuditUsageError(
                f"{path} has no tokenizer.json; pass a tokenizer directory or an artifact JSON"
            )
        return Target(artifact or shipped_artifact_path(), path)
    if path.is_file():
        if artifact is not None:
            raise AuditUsageError("--artifact is for directory input; pass the artifact JSON once")
        return Target(path, None)
    raise AuditUsageError(f"{path}: no such file or directory")


def _subject_label(f: Finding, target: Target) -> str:
    if f.subject == "artifact":
        return target.artifact.name
    if f.subject == "tokenizer.json" and target.directory is not None:
        return f"{target.directory.name}/tokenizer.json"
    return ""


def render_human(findings: Sequence[Finding], target: Target) -> str:
    mark = {"pass": "PASS", "fail": "FAIL", "info": "INFO", "skip": "SKIP"}
    width = max(len(f.name) for f in findings)
    rows = []
    for f in findings:
        label = _subject_label(f, target)
        rows.append(f"{mark[f.status]:4s}  {f.name:{width}s}  {label + ': ' if label else ''}{f.summary}")
    details = [
        f"\n{f.name} ({_subject_label(f, target) or f.subject}):\n" + "\n".join("  " + x for x in f.lines)
        for f in findings
        if f.lines
    ]
    return "\n".join(rows) + ("\n" + "\n".join(details) if details else "")


def vocab_findings(target: Target, say: Say) -> tuple[list[Finding], StackTokenizer | None]:
    findings: list[Finding] = []
    if target.directory is not None:
        say("vocabulary: tokenizer.json")
        findings += audit_vocab(load_hf_vocab(target.directory / "tokenizer.json"))
    say(f"vocabulary: {target.artifact.name}")
    vocab, tok, problems = load_artifact_vocab(target.artifact)
    findings += broken_merges("artifact", problems) if vocab is None else audit_vocab(vocab)
    return findings, tok


def run_audit(args: argparse.Namespace) -> int:
    say: Say = Progress(quiet=args.quiet)  # the one progress view every long command uses
    start = time.perf_counter()
    target = resolve_target(args.path, args.artifact)
    findings, tok = vocab_findings(target, say)
    vocab_seconds = time.perf_counter() - start
    timings: dict[str, float] = {}
    dup = any(
        f.name == "duplicate_bytes" and f.subject == "artifact" and f.status == "fail" for f in findings
    )
    if tok is None:
        findings.append(skipped_unicode("the artifact's merge list is broken"))
    elif dup:
        findings.append(
            skipped_unicode("the artifact has duplicate token bytes, which the exports cannot hold")
        )
    elif not args.backends:
        findings.append(skipped_unicode("no backend selected (--backends none)"))
    else:
        unicode, timings = audit_unicode(tok, target.artifact, args.backends, say)
        findings.append(unicode)
    code = 1 if any(f.status == "fail" and f.name in VIOLATIONS for f in findings) else 0
    seconds = time.perf_counter() - start
    print(render_human(findings, target))
    steps = ", ".join(f"{k} {v:.1f}s" for k, v in timings.items())
    print(
        f"\naudit: {'FAIL' if code else 'PASS'} in {seconds:.1f}s (vocabulary {vocab_seconds:.1f}s"
        f"{', unicode_tables: ' + steps if steps else ''})"
    )
    if args.json:
        write_text_atomic(
            args.json,
            json.dumps(report(findings, target, tok, code), indent=2, sort_keys=True, ensure_ascii=True)
            + "\n",
        )
    return code


def report(
    findings: Sequence[Finding], target: Target, tok: StackTokenizer | None, code: int
) -> dict[str, Any]:
    return {
        "verdict": "FAIL" if code else "PASS",
        "exit_code": code,
        "artifact": str(target.artifact),
        "directory": None if target.directory is None else str(target.directory),
        "fingerprint": tok.fingerprint if tok else None,
        "findings": [f.to_json() for f in findings],
    }


def _names(value: str) -> list[str]:
    names = [n.strip() for n in value.split(",") if n.strip()]
    if names == ["none"]:
        return []
    unknown = [n for n in names if n not in SCANNABLE]
    if unknown:
        raise argparse.ArgumentTypeError(
            f"unknown backend(s) {unknown}; choose from {', '.join(SCANNABLE)} or none"
        )
    return list(dict.fromkeys(names))


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "path",
        nargs="?",
        type=Path,
        default=None,
        metavar="ARTIFACT_OR_DIR",
        help="artifact JSON, or a tokenizer directory (default: the shipped artifact)",
    )
    p.add_argument(
        "--artifact",
        type=Path,
        default=None,
        help="with a directory: the artifact to audit too (default: the shipped one)",
    )
    p.add_argument("--json", type=Path, default=None, help="write the findings as JSON")
    p.add_argument(
        "--backends",
        type=_names,
        default=list(DEFAULT_BACKENDS),
        help=f"comma list for unicode_tables, or 'none' (default: {','.join(DEFAULT_BACKENDS)})",
    )
    p.add_argument("--quiet", action="store_true", help="no progress lines")


def main(args: argparse.Namespace) -> int:
    try:
        return run_audit(args)
    except AuditUsageError as exc:
        print(f"stacktok audit: error: {exc}", file=sys.stderr)
        return 2
