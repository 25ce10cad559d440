"""Text-shaped generators: white space, digit runs, contractions and code-like lines.

Each one builds text the split regex has rules for -- runs of (Unicode) white space,
digit runs in several scripts, English contractions in random case and apostrophes
(with ``'ſ``, U+017F LONG S), indented lines of identifiers, operators and literals.

Out of scope: real programs or natural language (``code`` is code-*like*), random
code points (``conformance.fuzz.gen_unicode``) and vocabulary-driven inputs
(``conformance.fuzz.gen_vocab``).
"""

from __future__ import annotations

import random

from conformance.fuzz.alphabets import (
    APOSTROPHES,
    CODE_TOKENS,
    CONTRACTIONS,
    DIGITS,
    KEYWORDS,
    WHITESPACE,
    WORDS,
)
from conformance.fuzz.gen_context import GenContext


def gen_whitespace(rng: random.Random, ctx: GenContext) -> str:
    """Runs of spaces, tabs, CR/LF and Unicode white space between words, digits, punctuation."""
    parts: list[str] = []
    for _ in range(rng.randint(1, 6)):
        run = "".join(
            rng.choice(WHITESPACE[: rng.choice((3, 8, len(WHITESPACE)))]) for _ in range(rng.randint(1, 12))
        )
        parts.append(run)
        r = rng.random()
        if r < 0.5:
            parts.append(rng.choice(WORDS))
        elif r < 0.7:
            parts.append(rng.choice(CODE_TOKENS))
        elif r < 0.85:
            parts.append(str(rng.randint(0, 99999)))
    if rng.random() < 0.5:
        parts.reverse()
    return "".join(parts)


def gen_digits(rng: random.Random, ctx: GenContext) -> str:
    """Digit runs of length 1-20 (ASCII and other scripts) with separators and letters."""
    parts: list[str] = []
    for _ in range(rng.randint(1, 5)):
        alphabet = rng.choice(DIGITS)
        parts.append("".join(rng.choice(alphabet) for _ in range(rng.randint(1, 20))))
        parts.append(rng.choice((" ", "", ".", ",", "-", "e", "x", "a", "\n", "/", ":", "_", "%")))
    return "".join(parts)


def _random_case(rng: random.Random, text: str) -> str:
    return "".join(c.upper() if rng.random() < 0.5 else c for c in text)


def gen_contractions(rng: random.Random, ctx: GenContext) -> str:
    """'s 't 're 've 'm 'll 'd in random case and apostrophes, with 'ſ (U+017F LONG S)."""
    parts: list[str] = []
    for _ in range(rng.randint(1, 4)):
        if rng.random() < 0.6:
            parts.append(rng.choice(("", "", " ", "it", "I", "you", "x", "He", "DON", "we", "1", "'")))
        tail = _random_case(rng, rng.choice(CONTRACTIONS))
        if rng.random() < 0.15:
            tail = tail.replace("s", "\u017f").replace("S", "\u017f") or "\u017f"
        parts.append(rng.choice(APOSTROPHES) + tail)
        if rng.random() < 0.4:
            parts.append(rng.choice(("", " ", "t", "s", "'", "x", ".", "\n", "ſt", "K")))
    return "".join(parts)


def _identifier(rng: random.Random) -> str:
    r = rng.random()
    if r < 0.3:
        return rng.choice(KEYWORDS)
    words = [
        rng.choice(("get", "set", "value", "x", "i", "self", "data", "node", "max", "tmp", "ID"))
        for _ in range(rng.randint(1, 3))
    ]
    if r < 0.6:
        return "_".join(words)
    suffix = str(rng.randint(0, 99)) if rng.random() < 0.3 else ""
    return words[0] + "".join(w.capitalize() for w in words[1:]) + suffix


def _literal(rng: random.Random) -> str:
    return rng.choice(
        (
            str(rng.randint(0, 10 ** rng.randint(1, 9))),
            hex(rng.getrandbits(24)),
            f"{rng.random():.4g}",
            "1_000_000",
            "1e-9",
            '"' + _identifier(rng) + '\\n"',
            "'" + rng.choice(WORDS) + "'",
            'f"{' + _identifier(rng) + '}"',
            "0b1010",
            "True",
            "[]",
            "{}",
            "()",
        )
    )


def _operator(rng: random.Random) -> str:
    return rng.choice(CODE_TOKENS)


def gen_code(rng: random.Random, ctx: GenContext) -> str:
    """Code-like lines: indentation, identifiers, operators, literals, comments."""
    lines: list[str] = []
    for _ in range(rng.randint(1, 4)):
        indent = rng.choice(("", "", "    ", "        ", "\t", "\t\t", "  "))
        toks: list[str] = []
        for _ in range(rng.randint(1, 8)):
            r = rng.random()
            pick_one = _identifier if r < 0.45 else _literal if r < 0.65 else _operator
            toks.append(pick_one(rng))
        sep = rng.choice((" ", "", " ", "  "))
        line = indent + sep.join(toks)
        if rng.random() < 0.2:
            line += rng.choice(("  # ", " // ", " /* ", " -- ")) + rng.choice(WORDS)
        lines.append(line)
    return rng.choice(("\n", "\r\n", "\n\n")).join(lines) + rng.choice(("", "\n", ":\n", ";\n"))
