"""The registry of input generators for ``stacktok fuzz``, in the spirit of llama.cpp's
``tests/test-tokenizer-random.py``.

Every generator is a named function ``gen_NAME(rng, ctx) -> str``: ``rng`` is
a ``random.Random`` seeded for one example and ``ctx`` a :class:`GenContext`
holding what the generators draw from (the reference tokenizer's vocabulary
and special strings, the shipped probes, code-point pools). A generator's
output depends only on ``rng``'s state and ``ctx``, never on set order, time
or hashing, so ``(seed, example index)`` reproduces every input. They live by
family: ``gen_unicode`` (code points, random bytes), ``gen_vocab`` (vocabulary
tokens, specials), ``gen_text`` (white space, digits, contractions, code) and
``gen_mutation`` (edited shipped probes); their tables are in ``alphabets``.

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

import random
from collections.abc import Callable, Sequence

from conformance.fuzz.gen_context import GenContext, code_point_ages
from conformance.fuzz.gen_mutation import gen_probe_mutation, mutate
from conformance.fuzz.gen_text import gen_code, gen_contractions, gen_digits, gen_whitespace
from conformance.fuzz.gen_unicode import gen_codepoints, gen_random_bytes
from conformance.fuzz.gen_vocab import gen_specials, gen_vocab_concat, gen_vocab_single

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


__all__ = ["GENERATORS", "GenContext", "Generator", "code_point_ages", "mutate", "pick"]
