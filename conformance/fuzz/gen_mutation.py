"""The probe-mutation generator: a window of a shipped probe with 1-4 random edits.

:func:`mutate` makes one edit (insert, delete, replace, swap adjacent, duplicate a
slice, or append a window of another probe); :func:`gen_probe_mutation` applies a few
to a window of at most :data:`PROBE_WINDOW` characters of a random shipped probe.

Out of scope: which probes are short enough to mutate (``GenContext.build``) and the
other generators (``conformance.fuzz.generators`` lists them all).
"""

from __future__ import annotations

import random

from conformance.fuzz.alphabets import SEPARATORS
from conformance.fuzz.gen_context import GenContext
from conformance.fuzz.gen_unicode import category_pools

#: a mutated probe is first cut to a window of at most this many characters
PROBE_WINDOW = 240


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
