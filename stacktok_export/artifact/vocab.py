"""The general id layout (artifact v2): any byte-level BPE as a frozen reference, as data.

Our own layout (v1: bytes at 0..255 in byte order, merge ``r`` -> id ``256 + r``, specials on
the top ids, the Llama-3 split) is one case of it. A v2 vocabulary gives the bytes of every
id in any order, the merges by rank as id pairs, the specials at any ids, the roles by id
(bos / eos / eot / pad), whether the source adds BOS/EOS, the pre-tokenizer as a sequence of
isolated regex splits, whether the source encodes with ``ignore_merges`` (a whole pre-token
that is a vocabulary token is that token), the source's chat template, and which specials the
source matches even in ordinary text (HF added tokens with ``special=False``, GGUF
user-defined tokens).

:func:`check` validates a vocabulary and returns it as a :class:`Vocabulary` (whether its ids
are v1's: :meth:`Vocabulary.v1_layout`); the model builds its tokenizer from one
(``StackTokenizer.from_vocab``). :func:`canonical` / :func:`dumps` / :func:`read_payload` are
the v2 artifact's JSON form (keys sorted, one token and one merge per line, token bytes as hex):
what they read off a tokenizer is the :class:`Layout` protocol.

Out of scope: building a tokenizer (``models/bpe``), an unk token or byte fallback (a missing
single byte is dropped, as HF's BPE without ``unk_token`` does), holes in the id space (every id
is a token), non-byte-level models (SentencePiece, WordPiece, Unigram), normalizers.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from ..split.pretokenize import compile_pattern

FORMAT_V2 = "stacktok-bpe-v2"
MAX_IDS = 1 << 31
ROLE_NAMES = ("bos", "eos", "eot", "pad")
#: v1's roles, by special-token name (the fixed layout names them)
V1_ROLES = {"bos": "<|bos|>", "eos": "<|eos|>", "eot": "<|end|>", "pad": "<|pad|>"}


class VocabError(ValueError):
    """A vocabulary that cannot be a frozen reference; the message names the field."""


class Layout(Protocol):
    """What the v2 JSON form reads (a :class:`Vocabulary`, and every ``StackTokenizer``)."""

    merges: list[tuple[int, int]]
    special_to_id: dict[str, int]
    in_text: frozenset[str]
    roles: dict[str, int]
    add_bos: bool
    add_eos: bool
    patterns: tuple[str, ...]
    ignore_merges: bool
    chat_template: str | None

    @property
    def vocab_size(self) -> int: ...

    @property
    def id_to_special(self) -> dict[int, str]: ...

    def id_bytes(self) -> list[bytes]: ...


@dataclass(frozen=True)
class Vocabulary:
    """A validated byte-level BPE (:func:`check`): everything its tokenizer is built from."""

    table: list[bytes]  # the bytes of every id (a special: its UTF-8 string)
    merges: list[tuple[int, int]]  # by rank, as id pairs
    results: list[int]  # the id each merge makes
    special_to_id: dict[str, int]  # in id order
    patterns: tuple[str, ...]
    ignore_merges: bool
    roles: dict[str, int]  # sorted by role
    add_bos: bool
    add_eos: bool
    chat_template: str | None
    in_text: frozenset[str]
    plain: dict[bytes, int]  # bytes -> id of every ordinary token
    format: str = FORMAT_V2

    @property
    def vocab_size(self) -> int:
        return len(self.table)

    @property
    def id_to_special(self) -> dict[int, str]:
        return {i: s for s, i in self.special_to_id.items()}

    def id_bytes(self) -> list[bytes]:
        return list(self.table)

    def v1_layout(self) -> bool:
        """Whether the ids are v1's: one split, bytes at 0..255 in byte order, merge ``r`` makes
        ``256 + r``, the specials (at least one) on the top ids."""
        table, m = self.table, len(self.merges)
        if (
            len(self.patterns) != 1
            or not self.special_to_id
            or len(table) != 256 + m + len(self.special_to_id)
        ):
            return False
        if any(table[i] != bytes([i]) for i in range(256)) or self.results != list(range(256, 256 + m)):
            return False
        # v1 builds its table merge by merge: each merge's parts exist before it (a list may rank a
        # merge above the merge that makes one of its parts -- such a vocabulary is v2)
        if any(a >= 256 + r or b >= 256 + r for r, (a, b) in enumerate(self.merges)):
            return False
        return list(self.special_to_id.values()) == list(range(256 + m, len(table)))

    def v1_behaviour(self) -> bool:
        """Whether the source adds nothing v1 does not (BOS/EOS, specials in text) and names no
        role otherwise than v1 (the template and ``ignore_merges`` are the model's to judge)."""
        if self.add_bos or self.add_eos or self.in_text:
            return False
        implied = v1_roles(self.special_to_id)
        return all(implied.get(role) == i for role, i in self.roles.items())


def v1_roles(special_to_id: Mapping[str, int]) -> dict[str, int]:
    """The roles v1 implies by name (only those whose special exists)."""
    return {role: special_to_id[s] for role, s in V1_ROLES.items() if s in special_to_id}


# ------------------------------------------------------------------ validate
def _check_tokens(tokens: Sequence[bytes]) -> list[bytes]:
    if not 256 <= len(tokens) <= MAX_IDS:
        raise VocabError(f"tokens: {len(tokens)} ids; a byte-level BPE has 256 to {MAX_IDS} ids")
    out = list(tokens)
    for i, t in enumerate(out):
        if not isinstance(t, bytes) or not t:
            raise VocabError(f"tokens[{i}] is {t!r}: every id needs its non-empty bytes")
    return out


def _check_specials(specials: Mapping[str, int], tokens: list[bytes]) -> dict[str, int]:
    out: dict[str, int] = {}
    seen: dict[int, str] = {}
    for s, i in specials.items():
        if not isinstance(s, str) or not s:
            raise VocabError(f"special token {s!r} is not a non-empty string")
        if type(i) is not int or not 0 <= i < len(tokens):
            raise VocabError(f"special token {s!r} has id {i!r}, outside 0..{len(tokens) - 1}")
        if i in seen:
            raise VocabError(f"special tokens {seen[i]!r} and {s!r} share id {i}")
        if tokens[i] != s.encode("utf-8"):
            raise VocabError(f"special token {s!r} at id {i}: tokens[{i}] is {tokens[i]!r}, not its UTF-8")
        seen[i] = s
        out[s] = i
    return dict(sorted(out.items(), key=lambda kv: kv[1]))


def _plain_ids(tokens: list[bytes], special_ids: Collection[int]) -> dict[bytes, int]:
    """bytes -> id of every non-special token; two ids with the same bytes are refused.

    Single bytes may be missing (DeepSeek, StarCoder, Falcon have no token for bytes that
    never occur in UTF-8): the source drops them, HF's BPE without an unk token as llama.cpp,
    and so does the reference (``StackTokenizer.missing_bytes``).
    """
    ids: dict[bytes, int] = {}
    for i, t in enumerate(tokens):
        if i in special_ids:
            continue
        if t in ids:
            raise VocabError(f"tokens[{ids[t]}] and tokens[{i}] are both {t!r}; token bytes must be unique")
        ids[t] = i
    return ids


def _check_merges(merges: Sequence[Sequence[int]], tokens: list[bytes], plain: dict[bytes, int]) -> list[int]:
    """The result id of every merge (validated: non-special parts, result in the vocabulary).

    Checked in bulk (Llama-3's 280,147 merges: ~0.1 s); on any failure the merges are walked one
    by one to name the first bad one.
    """
    n = len(tokens)
    get = plain.get
    try:
        ok = all(type(a) is int and type(b) is int and 0 <= a < n and 0 <= b < n for a, b in merges)
    except (TypeError, ValueError):
        ok = False
    if ok:  # each part once: an ordinary token's id (a special's bytes map elsewhere or nowhere)
        ok = all(get(tokens[i]) == i for i in set(itertools.chain.from_iterable(merges)))
    results = [get(tokens[a] + tokens[b]) for a, b in merges] if ok else []
    if not ok or None in results:
        results = _merge_results_one_by_one(merges, tokens, get)
    if len(set(map(tuple, merges))) != len(merges):
        seen: dict[tuple[int, int], int] = {}
        for r, m in enumerate(merges):
            if tuple(m) in seen:
                raise VocabError(f"merges[{r}] = {list(m)} duplicates merges[{seen[tuple(m)]}]")
            seen[tuple(m)] = r
    return results


def _merge_results_one_by_one(
    merges: Sequence[Sequence[int]], tokens: list[bytes], get: Callable[[bytes], int | None]
) -> list[int]:
    """The slow walk: each merge checked in turn, the first bad one named (``VocabError``)."""
    n = len(tokens)
    results: list[int] = []
    for r, m in enumerate(merges):
        try:
            a, b = m
            if not (type(a) is int and type(b) is int and 0 <= a < n and 0 <= b < n):
                raise ValueError
        except (TypeError, ValueError):
            raise VocabError(f"merges[{r}] is {m!r}, not a [left, right] pair of ids below {n}") from None
        left, right = tokens[a], tokens[b]
        if get(left) != a or get(right) != b:
            raise VocabError(f"merges[{r}] = {[a, b]} uses a special token id")
        result = get(left + right)
        if result is None:
            raise VocabError(f"merges[{r}] = {[a, b]}: {left + right!r} is not a token of the vocabulary")
        results.append(result)
    return results


def _check_roles(roles: Mapping[str, int], n: int) -> dict[str, int]:
    out = {}
    for role, i in roles.items():
        if role not in ROLE_NAMES:
            raise VocabError(f"roles: unknown role {role!r}; roles are {', '.join(ROLE_NAMES)}")
        if type(i) is not int or not 0 <= i < n:
            raise VocabError(f"roles[{role!r}] = {i!r} is outside 0..{n - 1}")
        out[role] = i
    return dict(sorted(out.items()))


def _check_patterns(patterns: Sequence[str]) -> tuple[str, ...]:
    if isinstance(patterns, str) or not patterns:
        raise VocabError("patterns: a non-empty list of regexes (isolated splits, applied in order)")
    for i, p in enumerate(patterns):
        if not isinstance(p, str) or not p:
            raise VocabError(f"patterns[{i}] is {p!r}, not a regex")
        try:
            compile_pattern(p)
        except ValueError as exc:
            raise VocabError(f"patterns[{i}]: {exc}") from None
    return tuple(patterns)


# --------------------------------------------------------------------- check
def check(
    *,
    tokens: Sequence[bytes],
    merges: Sequence[Sequence[int]],
    specials: Mapping[str, int],
    patterns: Sequence[str],
    ignore_merges: bool = False,
    roles: Mapping[str, int] | None = None,
    add_bos: bool = False,
    add_eos: bool = False,
    chat_template: str | None = None,
    in_text: Collection[str] = (),
) -> Vocabulary:
    """Validate a vocabulary (``VocabError`` names the first bad field) and return it as data."""
    table = _check_tokens(tokens)
    special_to_id = _check_specials(specials, table)
    plain = _plain_ids(table, set(special_to_id.values()))
    results = _check_merges(merges, table, plain)
    pairs = [(a, b) for a, b in merges]
    checked_patterns = _check_patterns(patterns)
    role_ids = _check_roles(roles or {}, len(table))
    unknown = set(in_text) - special_to_id.keys()
    if unknown:
        raise VocabError(f"in_text lists {sorted(unknown)}, which are not special tokens")
    for flag, value in (("ignore_merges", ignore_merges), ("add_bos", add_bos), ("add_eos", add_eos)):
        if type(value) is not bool:
            raise VocabError(f"{flag} must be true or false, got {value!r}")
    if chat_template is not None and not isinstance(chat_template, str):
        raise VocabError("chat_template must be a string or null")
    return Vocabulary(
        table=table,
        merges=pairs,
        results=results,
        special_to_id=special_to_id,
        patterns=checked_patterns,
        ignore_merges=ignore_merges,
        roles=role_ids,
        add_bos=add_bos,
        add_eos=add_eos,
        chat_template=chat_template,
        in_text=frozenset(in_text),
        plain=plain,
    )


# ---------------------------------------------------------------- JSON form
def canonical(tok: Layout) -> dict[str, Any]:
    """Everything that decides ids (the fingerprint's input)."""
    tokens: list[str | None] = list(map(bytes.hex, tok.id_bytes()))
    for i in tok.id_to_special:
        tokens[i] = None
    return {
        "format": FORMAT_V2,
        "vocab_size": tok.vocab_size,
        "tokens": tokens,
        "merges": [[a, b] for a, b in tok.merges],
        "special_tokens": [[s, i] for s, i in tok.special_to_id.items()],
        "in_text": sorted(tok.in_text),
        "roles": dict(sorted(tok.roles.items())),
        "add_bos": tok.add_bos,
        "add_eos": tok.add_eos,
        "patterns": list(tok.patterns),
        "ignore_merges": tok.ignore_merges,
        "chat_template": tok.chat_template,
    }


def dumps(payload: dict[str, Any]) -> str:
    """The v2 artifact's exact text: sorted keys, ASCII, one token and one merge per line."""
    parts = []
    for key in sorted(payload):
        value = payload[key]
        if key in ("tokens", "merges") and value:
            body = ",\n    ".join(json.dumps(v, separators=(", ", ": ")) for v in value)
            text = f"[\n    {body}\n  ]"
        else:
            text = json.dumps(value, sort_keys=True, ensure_ascii=True)
        parts.append(f"  {json.dumps(key)}: {text}")
    return "{\n" + ",\n".join(parts) + "\n}\n"


_V2_KEYS = ("vocab_size", "tokens", "merges", "special_tokens", "patterns")


def read_payload(payload: dict[str, Any]) -> Vocabulary:
    """The vocabulary of a parsed v2 artifact (``VocabError`` names a bad field)."""
    missing = [k for k in _V2_KEYS if k not in payload]
    if missing:
        raise VocabError(f"missing key(s) {missing} of a {FORMAT_V2} artifact")
    raw_tokens, raw_specials = payload["tokens"], payload["special_tokens"]
    if not isinstance(raw_tokens, list) or not isinstance(raw_specials, list):
        raise VocabError("tokens and special_tokens must be lists")
    try:
        specials = {str(s): int(i) for s, i in raw_specials}
    except (TypeError, ValueError):
        raise VocabError("special_tokens must be [content, id] pairs") from None
    by_id = {i: s for s, i in specials.items()}
    tokens: list[bytes] = []
    for i, t in enumerate(raw_tokens):
        if t is None and i in by_id:
            tokens.append(by_id[i].encode("utf-8"))
            continue
        try:
            tokens.append(bytes.fromhex(t))
        except (TypeError, ValueError):
            raise VocabError(f"tokens[{i}] is {t!r}, not the hex of the token's bytes") from None
    if payload["vocab_size"] != len(tokens):
        raise VocabError(f"vocab_size is {payload['vocab_size']} but tokens lists {len(tokens)} ids")
    merges = payload["merges"]
    if not isinstance(merges, list) or not all(isinstance(m, list) for m in merges):
        raise VocabError("merges must be a list of [left, right] id pairs")
    return check(
        tokens=tokens,
        merges=merges,
        specials=specials,
        patterns=payload["patterns"],
        ignore_merges=payload.get("ignore_merges", False),
        roles=payload.get("roles") or {},
        add_bos=payload.get("add_bos", False),
        add_eos=payload.get("add_eos", False),
        chat_template=payload.get("chat_template"),
        in_text=payload.get("in_text") or (),
    )


def unsafe_ranks(merges: list[tuple[int, int]], results: list[int], n: int) -> list[int]:
    """Ranks whose merge may create a pair of *lower* rank (merges that are not topological).

    Merging every occurrence of the lowest-rank pair at once (the str passes, the numpy batch)
    is the textbook rule (one leftmost merge at a time) unless a merge makes a token that a
    lower-rank merge uses: then the new pair must merge before the next occurrence. Llama-3's
    merges, converted from tiktoken ranks, have tens of thousands of such ranks (a token is
    made by several merges); for those the fast paths merge one occurrence at a time.
    """
    first_use = [len(merges)] * n
    for r in range(len(merges) - 1, -1, -1):  # backwards: the last write is the first use
        a, b = merges[r]
        first_use[a] = first_use[b] = r
    return [r for r, t in enumerate(results) if first_use[t] < r]
