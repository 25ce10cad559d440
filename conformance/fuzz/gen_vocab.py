"""Generators driven by the reference's own vocabulary: token texts, token bytes, specials.

``gen_vocab_concat`` glues random tokens together (every merge is the last step of
some token, so this reaches rare merges), ``gen_vocab_single`` puts one token between
short contexts (its merge chain exactly), ``gen_specials`` mixes special-token strings,
broken ones and separators (these inputs are checked trusted *and* untrusted).

Out of scope: Unicode pools (``conformance.fuzz.gen_unicode``), text-shaped inputs
(``conformance.fuzz.gen_text``) and the registry (``conformance.fuzz.generators``).
"""

from __future__ import annotations

import random

from conformance.fuzz.alphabets import SEPARATORS, WORDS
from conformance.fuzz.gen_context import GenContext


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
