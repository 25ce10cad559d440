"""The pre-tokenizer: the Llama-3 split regex, compiled with the ``regex`` engine,
and a record of that engine's Unicode tables.

A byte-level BPE never merges across pre-token boundaries, so the boundaries
are part of the frozen tokenizer. They depend on which code points the engine
classifies as letters (``\\p{L}``), numbers (``\\p{N}``) and white space, and
those tables move with Unicode releases. :func:`engine_info` records the
engine, its Unicode version and a hash of exactly those classes; an artifact
stores it, and loading under tables that classify any code point differently
is an error, never a silent change of tokenization.

:func:`split_sequence` applies a sequence of patterns as isolated splits (every match and every
stretch between matches a piece), the pre-tokenizer of any imported vocabulary; the Llama-3 and
Qwen2 patterns alone take the faster :mod:`.ascii_split`.

Out of scope: other regex engines (Oniguruma, fancy-regex, llama.cpp's
hand-written splitter) -- the conformance suite compares those by behaviour.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Sequence
from typing import Any

import regex

#: The Llama-3 split pattern (case-insensitive contractions, words with one
#: optional leading non-letter, digit groups of at most three, punctuation
#: runs with trailing newlines, newline runs, white space).
LLAMA3_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)"
    r"|[^\r\n\p{L}\p{N}]?\p{L}+"
    r"|\p{N}{1,3}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+"
    r"|\s+(?!\S)"
    r"|\s+"
)
#: Qwen2's split (Qwen2, Qwen2.5, Qwen3): the Llama-3 pattern with single digits (``\p{N}``).
QWEN2_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)"
    r"|[^\r\n\p{L}\p{N}]?\p{L}+"
    r"|\p{N}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+"
    r"|\s+(?!\S)"
    r"|\s+"
)
#: GPT-2's split (its ``encoder.py``; what Hugging Face's ByteLevel ``use_regex=True`` means).
GPT2_PATTERN = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"

# One code point first assigned in each Unicode version (all letters or
# numbers), newest first: the newest one the engine knows names its version.
_UNICODE_SENTINELS: tuple[tuple[str, int], ...] = (
    ("18.0", 0x3D000),  # SEAL script block (first code point)
    ("17.0", 0x323B0),  # CJK Unified Ideographs Extension J
    ("16.0", 0x1C89),  # CYRILLIC CAPITAL LETTER TJE
    ("15.1", 0x2EBF0),  # CJK Unified Ideographs Extension I
    ("15.0", 0x11F04),  # KAWI LETTER A
    ("14.0", 0x0870),  # ARABIC LETTER ALEF WITH ATTACHED FATHA
    ("13.0", 0x08BE),  # ARABIC LETTER PEH WITH SMALL V
)

# Only these classes decide where the Llama-3 pattern splits.
_CLASSES = (r"\p{L}+", r"\p{N}+", r"\s+")


def compile_pattern(pattern: str) -> regex.Pattern[str]:
    """Compile ``pattern`` with ``regex``; raise ``ValueError`` naming the problem."""
    try:
        return regex.compile(pattern)
    except (regex.error, TypeError) as exc:
        raise ValueError(f"pre-tokenizer pattern does not compile with regex: {exc}") from exc


def unicode_version() -> str:
    """The Unicode version of the installed ``regex`` tables (by sentinel code points)."""
    for version, cp in _UNICODE_SENTINELS:
        if regex.match(r"\P{Cn}", chr(cp)):
            return version
    return "<13.0"


@functools.lru_cache(maxsize=1)
def classes_sha256() -> str:
    """sha256 over the code point ranges of ``\\p{L}``, ``\\p{N}`` and ``\\s``.

    Two engines with the same hash split every input identically under the
    Llama-3 pattern. Takes about a second; cached per process.
    """
    text = "".join(chr(c) for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF)
    digest = hashlib.sha256()
    for cls in _CLASSES:
        for m in regex.finditer(cls, text):
            digest.update(f"{ord(m.group()[0]):x}-{ord(m.group()[-1]):x},".encode())
        digest.update(b"|")
    return digest.hexdigest()


def engine_info(*, with_classes: bool = True) -> dict[str, Any]:
    """What the artifact records about the engine that defines its splits."""
    info: dict[str, Any] = {
        "name": "regex",
        "version": regex.__version__,
        "unicode_version": unicode_version(),
    }
    if with_classes:
        info["classes_sha256"] = classes_sha256()
    return info


def check_engine(recorded: dict[str, Any]) -> str | None:
    """Return ``None`` if the installed engine splits like ``recorded``, else why not."""
    if recorded.get("name") != "regex":
        return f"artifact was written with regex engine {recorded.get('name')!r}, not 'regex'"
    if recorded.get("version") == regex.__version__:
        return None
    want = recorded.get("classes_sha256")
    if want is None or want == classes_sha256():
        return None
    return (
        f"the installed regex {regex.__version__} (Unicode {unicode_version()}) classifies "
        f"letters/numbers/white space differently from regex {recorded.get('version')} "
        f"(Unicode {recorded.get('unicode_version')}) that the artifact was trained with; "
        f"install regex=={recorded.get('version')} or pass allow_engine_mismatch=True "
        f"if you accept different splits on the changed code points"
    )


def isolated_split(split_re: regex.Pattern[str], text: str) -> list[str]:
    """Every match of ``split_re`` and every stretch between matches, in order."""
    out: list[str] = []
    at = 0
    for m in split_re.finditer(text):
        if m.start() > at:
            out.append(text[at : m.start()])
        if m.end() > m.start():
            out.append(m.group())
        at = m.end()
    if at < len(text):
        out.append(text[at:])
    return out


def split_sequence(split_res: Sequence[regex.Pattern[str]], text: str) -> list[str]:
    """Pre-tokens of ``text``: each pattern an isolated split of the pieces before it, in order
    (a pattern that matches every character, as the Llama-3 one does, is its ``findall``)."""
    pieces = [text]
    for split_re in split_res:
        out: list[str] = []
        covers = split_re.pattern == LLAMA3_PATTERN  # matches every character: findall is the split
        for piece in pieces:
            found = split_re.findall(piece)
            if not covers and sum(map(len, found)) != len(piece):  # text between matches
                found = isolated_split(split_re, piece)
            out += found
        pieces = out
    return pieces
