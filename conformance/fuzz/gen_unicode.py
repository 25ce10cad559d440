"""Unicode edge-case generators: random code points by category or script, random bytes.

``gen_codepoints`` draws from pools of the code points the standard library's
``unicodedata`` knows (:func:`category_pools`, :func:`script_pools`; never ``Cs``
or ``Cn``), mixes in separators and code points unassigned everywhere, and rarely
(4 %) one assigned after the stdlib's tables, taken only from the version-labelled
``unicode_new`` probes (``GenContext.new_code_points``) so the fuzzer knows which
Unicode version assigned it. ``gen_random_bytes`` decodes random bytes lossily.

Out of scope: text-shaped inputs (``conformance.fuzz.gen_text``), vocabulary-driven
ones (``conformance.fuzz.gen_vocab``) and deciding what is declared (``conformance.fuzz``).
"""

from __future__ import annotations

import functools
import random
import unicodedata
from array import array

import regex

from conformance.fuzz.alphabets import SCRIPTS, SEPARATORS
from conformance.fuzz.gen_context import GenContext


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
