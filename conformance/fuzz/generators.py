"""Input generators for ``stacktok fuzz``, in the spirit of llama.cpp's
``tests/test-tokenizer-random.py``.

Every generator is a named function ``gen_NAME(rng, ctx) -> str``: ``rng`` is
a ``random.Random`` seeded for one example and ``ctx`` a :class:`GenContext`
holding what the generators draw from (the reference tokenizer's vocabulary
and special strings, the shipped probes, code-point pools). A generator's
output depends only on ``rng``'s state and ``ctx``, never on set order, time
or hashing, so ``(seed, example index)`` reproduces every input.

Generated text is valid Unicode (no lone surrogates). Code points assigned
after the standard library's ``unicodedata`` tables are drawn on purpose only
from the version-labelled ``unicode_new`` probes
(:attr:`GenContext.new_code_points`), and rarely, so the fuzzer knows which
Unicode version assigned them; random bytes and vocabulary bytes can produce
others by chance (``conformance.fuzz`` explains how either decides *declared*).

Out of scope: checking anything (``conformance.fuzz`` compares and shrinks),
real programs or natural language (``code`` is code-*like*, ``codepoints`` is
random), and inputs over a few thousand characters (the gate's ``long`` probes
cover those; short inputs fuzz faster and shrink faster).
"""

from __future__ import annotations

import functools
import random
import unicodedata
from array import array
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import regex

from stacktok_export import StackTokenizer

from conformance.core.fixtures import Probe

#: probes longer than this are not mutated (they are cut to a window anyway)
PROBE_MAX_CHARS = 4000
#: a mutated probe is first cut to a window of at most this many characters
PROBE_WINDOW = 240

SEPARATORS: tuple[str, ...] = (
    " ",
    " ",
    " ",
    "",
    "",
    "\n",
    "\t",
    "  ",
    "\r\n",
    ".",
    ",",
    "-",
    "_",
    "/",
    "'",
    '"',
    "(",
    ")",
    ":",
    ";",
    "0",
    "1",
    "\u00a0",
    "\u3000",
    "\n\n",
    " \n",
)
WHITESPACE: tuple[str, ...] = (
    " ",
    " ",
    " ",
    "\t",
    "\n",
    "\n",
    "\r",
    "\r\n",
    "\x0b",
    "\x0c",
    "\x1c",
    "\x1f",
    "\u0085",
    "\u00a0",
    "\u1680",
    "\u2000",
    "\u2003",
    "\u2007",
    "\u2009",
    "\u200a",
    "\u2028",
    "\u2029",
    "\u202f",
    "\u205f",
    "\u3000",
    "\u200b",
    "\u200d",
    "\u2060",
    "\ufeff",
    "\u180e",
)
DIGITS: tuple[str, ...] = (
    "0123456789",
    "0123456789",
    "0123456789",
    "\u0660\u0661\u0662\u0663\u0669",
    "\u0966\u0967\u0968\u096f",
    "\uff10\uff11\uff12\uff19",
    "\U0001d7ce\U0001d7cf\U0001d7d0",
    "\u00b2\u00b3\u00b9\u00bc\u00bd",
    "\u2160\u2161\u216b\u3007",
    "\u0e50\u0e51\u0e59",
    "\u2460\u2461\u2473",
)
WORDS: tuple[str, ...] = (
    "the",
    "The",
    "THE",
    "a",
    "I",
    "is",
    "to",
    "of",
    "and",
    "in",
    "it",
    "hello",
    "world",
    "token",
    "x",
    "y",
    "self",
    "def",
    "return",
    "None",
    "café",
    "naïve",
    "Straße",
    "İstanbul",
    "Ωmega",
    "мир",
    "日本語",
    "中文",
    "한국어",
    "ไทย",
    "עברית",
    "العربية",
    "हिन्दी",
    "🚀",
    "👍🏽",
)
CONTRACTIONS: tuple[str, ...] = ("s", "t", "re", "ve", "m", "ll", "d")
APOSTROPHES: tuple[str, ...] = ("'", "'", "'", "'", "\u2019", "\u02bc", "`", "''")
CODE_TOKENS: tuple[str, ...] = (
    "==",
    "!=",
    "<=",
    ">=",
    "->",
    "=>",
    "::",
    "+=",
    "-=",
    "**",
    "//",
    "&&",
    "||",
    ">>=",
    "<<",
    "...",
    "#",
    "/*",
    "*/",
    "{",
    "}",
    "[",
    "]",
    "(",
    ")",
    ";",
    ",",
    ".",
    ":",
    "=",
    "+",
    "-",
    "*",
    "/",
    "%",
    "@",
    "&",
    "|",
    "^",
    "~",
    "!",
    "?",
    "<",
    ">",
    "\\",
    "$",
    "`",
)
KEYWORDS: tuple[str, ...] = (
    "def",
    "class",
    "return",
    "if",
    "else",
    "elif",
    "for",
    "while",
    "import",
    "from",
    "const",
    "let",
    "var",
    "function",
    "int",
    "char",
    "void",
    "struct",
    "static",
    "fn",
    "pub",
    "impl",
    "true",
    "false",
    "None",
    "null",
    "self",
    "this",
    "async",
    "await",
    "yield",
    "lambda",
)
#: scripts / blocks the ``codepoints`` generator draws from (name, first, last)
SCRIPTS: tuple[tuple[str, int, int], ...] = (
    ("latin", 0x0041, 0x024F),
    ("latin-ext", 0x1E00, 0x1EFF),
    ("ipa", 0x0250, 0x02FF),
    ("combining", 0x0300, 0x036F),
    ("greek", 0x0370, 0x03FF),
    ("cyrillic", 0x0400, 0x052F),
    ("armenian", 0x0530, 0x058F),
    ("hebrew", 0x0590, 0x05FF),
    ("arabic", 0x0600, 0x06FF),
    ("devanagari", 0x0900, 0x097F),
    ("bengali", 0x0980, 0x09FF),
    ("tamil", 0x0B80, 0x0BFF),
    ("thai", 0x0E00, 0x0E7F),
    ("georgian", 0x10A0, 0x10FF),
    ("ethiopic", 0x1200, 0x137F),
    ("mongolian", 0x1800, 0x18AF),
    ("punctuation", 0x2000, 0x206F),
    ("letterlike", 0x2100, 0x218F),
    ("math", 0x2200, 0x22FF),
    ("kana", 0x3040, 0x30FF),
    ("cjk", 0x4E00, 0x9FFF),
    ("hangul", 0xAC00, 0xD7A3),
    ("fullwidth", 0xFF00, 0xFFEF),
    ("math-alnum", 0x1D400, 0x1D7FF),
    ("emoji", 0x1F300, 0x1FAFF),
    ("cjk-ext-b", 0x20000, 0x2A6DF),
    ("controls", 0x0000, 0x00A0),
)


# --------------------------------------------------------------------- context
@dataclass(frozen=True)
class GenContext:
    """What generators draw from; build it once with :meth:`build`."""

    tok: StackTokenizer
    vocab_texts: tuple[str, ...]  # ordinary tokens whose bytes are valid UTF-8 alone
    vocab_bytes: tuple[bytes, ...]  # every ordinary token's bytes
    specials: tuple[str, ...]
    probes: tuple[Probe, ...]  # shipped probes short enough to mutate
    new_code_points: tuple[tuple[str, int], ...]  # (Unicode version, code point), sorted

    @classmethod
    def build(cls, tok: StackTokenizer, probes: Sequence[Probe]) -> GenContext:
        token_bytes = tuple(tok.token_bytes())
        texts = tuple(t for b in token_bytes[32:] if (t := _utf8(b)) is not None)
        return cls(
            tok=tok,
            vocab_texts=texts,
            vocab_bytes=token_bytes,
            specials=tuple(sorted(tok.special_to_id, key=tok.special_to_id.__getitem__)),
            probes=tuple(p for p in probes if len(p.text) <= PROBE_MAX_CHARS),
            new_code_points=tuple(sorted((v, cp) for cp, v in code_point_ages(probes).items())),
        )


def _utf8(data: bytes) -> str | None:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def code_point_ages(probes: Sequence[Probe]) -> dict[int, str]:
    """Code point -> the Unicode version that assigned it, from the ``unicode_new`` probes.

    Probe ids are ``unicode_new-v{VERSION}-...``; a non-ASCII character that
    occurs in the probes of exactly one version is that version's new code
    point (context characters occur under every version).
    """
    seen: dict[int, set[str]] = {}
    for p in probes:
        if p.category != "unicode_new" or not p.id.startswith("unicode_new-v"):
            continue
        version = p.id.split("-")[1][1:]
        for ch in p.text:
            if ord(ch) > 0x7F:
                seen.setdefault(ord(ch), set()).add(version)
    return {cp: next(iter(vs)) for cp, vs in seen.items() if len(vs) == 1}


@functools.lru_cache(maxsize=1)
def category_pools() -> dict[str, array]:
    """General category -> code points the stdlib ``unicodedata`` knows (no Cs, no Cn)."""
    pools: dict[str, array] = {}
    for cp in range(0x110000):
        cat = unicodedata.category(chr(cp))
        if cat in ("Cs", "Cn"):
            continue
        pools.setdefault(cat, array("I")).append(cp)
    return dict(sorted(pools.items()))


def _known(cp: int) -> bool:
    return unicodedata.category(chr(cp)) not in ("Cs", "Cn")


@functools.lru_cache(maxsize=1)
def script_pools() -> dict[str, array]:
    """Script/block name -> its code points that the stdlib ``unicodedata`` knows."""
    return {name: array("I", (cp for cp in range(lo, hi + 1) if _known(cp))) for name, lo, hi in SCRIPTS}


_UNASSIGNED = regex.compile(r"\p{Cn}")


def _never_assigned(rng: random.Random) -> str:
    """A code point unassigned in both the stdlib's and ``regex``'s tables (same everywhere)."""
    while True:
        cp = rng.randrange(0x0378, 0x3FFFF)
        ch = chr(cp)
        if not 0xD800 <= cp <= 0xDFFF and unicodedata.category(ch) == "Cn" and _UNASSIGNED.match(ch):
            return ch


# ------------------------------------------------------------------ generators
def gen_codepoints(rng: random.Random, ctx: GenContext) -> str:
    """Random code points by general category or by script, with separators;
    rarely (4 %) one new in Unicode 15.1+ from the labelled probes (declared divergences)."""
    n = rng.randint(1, 24)
    if rng.random() < 0.5:
        pools = category_pools()
        chosen = [pools[c] for c in rng.sample(sorted(pools), k=rng.randint(1, 3))]
    else:
        pools = script_pools()
        chosen = [pools[s] for s in rng.sample(sorted(pools), k=rng.randint(1, 2))]
    out: list[str] = []
    for _ in range(n):
        r = rng.random()
        if r < 0.25:
            out.append(rng.choice(SEPARATORS))
        elif r < 0.27:
            out.append(_never_assigned(rng))
        else:
            out.append(chr(rng.choice(rng.choice(chosen))))
    if ctx.new_code_points and rng.random() < 0.04:
        for _ in range(rng.randint(1, 2)):
            out.insert(rng.randint(0, len(out)), chr(rng.choice(ctx.new_code_points)[1]))
    return "".join(out)


def gen_vocab_concat(rng: random.Random, ctx: GenContext) -> str:
    """Random vocabulary tokens glued together, with no separator or with separators:
    every merge is the last step of some token, so this reaches rare merges."""
    k = rng.randint(1, 10)
    style = rng.random()
    if style < 0.15:  # raw bytes of any tokens (incomplete UTF-8 too), decoded lossily
        data = b"".join(rng.choice(ctx.vocab_bytes) for _ in range(k))
        return data.decode("utf-8", errors="replace")
    pieces = [rng.choice(ctx.vocab_texts) for _ in range(k)]
    if style < 0.55:
        return "".join(pieces)
    if style < 0.8:
        return rng.choice(SEPARATORS).join(pieces)
    return "".join(p + rng.choice(SEPARATORS) for p in pieces)


def gen_vocab_single(rng: random.Random, ctx: GenContext) -> str:
    """One vocabulary token's text, bare or between short contexts (its merge chain exactly)."""
    tok = rng.choice(ctx.vocab_texts)
    before = rng.choice(("", "", " ", "\n", "x", "'", "1", "  "))
    after = rng.choice(("", "", " ", "\n", "s", ".", "'s", "1"))
    return before + tok + after


def _broken_special(rng: random.Random, special: str) -> str:
    forms = (
        special,
        special,
        special[:-1],
        special[1:],
        special[:-2],
        special.upper(),
        special[:2] + " " + special[2:],
        "<|" + special + "|>",
        special + special,
        special.replace("|", ""),
        special[: len(special) // 2],
        "<" + special,
        special + ">",
    )
    return rng.choice(forms)


def gen_specials(rng: random.Random, ctx: GenContext) -> str:
    """Special-token strings, broken ones and separators mixed; checked trusted *and* untrusted."""
    parts: list[str] = []
    for _ in range(rng.randint(1, 8)):
        r = rng.random()
        if r < 0.45:
            parts.append(_broken_special(rng, rng.choice(ctx.specials)))
        elif r < 0.7:
            parts.append(rng.choice(SEPARATORS))
        elif r < 0.85:
            parts.append(rng.choice(WORDS))
        else:
            parts.append(rng.choice(("<", "|", ">", "<|", "|>", "<||>", "||", "<<", ">>", "< |")))
    return "".join(parts)


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


def gen_random_bytes(rng: random.Random, ctx: GenContext) -> str:
    """Random bytes (ASCII-heavy or uniform) decoded with ``errors="replace"``."""
    n = rng.randint(1, 40)
    if rng.random() < 0.5:
        data = bytes(rng.getrandbits(8) for _ in range(n))
    else:
        data = bytes(
            rng.randrange(0x20, 0x7F) if rng.random() < 0.8 else rng.getrandbits(8) for _ in range(n)
        )
    return data.decode("utf-8", errors="replace")


def _mutation_char(rng: random.Random, ctx: GenContext) -> str:
    r = rng.random()
    if r < 0.4:
        return rng.choice(SEPARATORS) or " "
    if r < 0.7:
        return rng.choice("aZ0'sS\n\t ſ<|>é中🚀\u00a0\u200d\u0301")
    pools = category_pools()
    return chr(rng.choice(pools[rng.choice(sorted(pools))]))


def _window(rng: random.Random, text: str) -> str:
    if len(text) <= PROBE_WINDOW:
        return text
    start = rng.randrange(0, len(text) - PROBE_WINDOW)
    return text[start : start + rng.randint(1, PROBE_WINDOW)]


def mutate(rng: random.Random, text: str, ctx: GenContext) -> str:
    """One edit: insert, delete, replace, swap adjacent, duplicate a slice, or append a probe."""
    op = rng.randrange(6)
    i = rng.randint(0, len(text))
    if op == 0 or not text:
        return text[:i] + _mutation_char(rng, ctx) + text[i:]
    i = min(i, len(text) - 1)
    if op == 1:
        return text[:i] + text[i + 1 :]
    if op == 2:
        return text[:i] + _mutation_char(rng, ctx) + text[i + 1 :]
    if op == 3 and len(text) > 1:
        j = min(i + 1, len(text) - 1)
        i = j - 1
        return text[:i] + text[j] + text[i] + text[j + 1 :]
    if op == 4:
        j = min(len(text), i + rng.randint(1, 8))
        return text[:j] + text[i:j] + text[j:]
    return text + _window(rng, rng.choice(ctx.probes).text)


def gen_probe_mutation(rng: random.Random, ctx: GenContext) -> str:
    """A shipped probe (a window of it) with 1-4 random edits, or two probes concatenated."""
    text = _window(rng, rng.choice(ctx.probes).text)
    for _ in range(rng.randint(1, 4)):
        text = mutate(rng, text, ctx)
    return text


Generator = Callable[[random.Random, GenContext], str]

#: name -> (generator, relative weight); order is part of the seed's meaning
GENERATORS: dict[str, tuple[Generator, float]] = {
    "codepoints": (gen_codepoints, 1.0),
    "vocab_concat": (gen_vocab_concat, 1.5),
    "vocab_single": (gen_vocab_single, 1.0),
    "specials": (gen_specials, 1.0),
    "whitespace": (gen_whitespace, 1.0),
    "digits": (gen_digits, 0.7),
    "contractions": (gen_contractions, 0.8),
    "code": (gen_code, 1.0),
    "random_bytes": (gen_random_bytes, 0.6),
    "probe_mutation": (gen_probe_mutation, 1.4),
}


def pick(rng: random.Random, names: Sequence[str]) -> str:
    """Choose a generator name among ``names`` by weight."""
    weights = [GENERATORS[n][1] for n in names]
    return rng.choices(names, weights=weights, k=1)[0]


__all__ = ["GENERATORS", "GenContext", "code_point_ages", "mutate", "pick"]
