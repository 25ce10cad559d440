"""One fuzz example and its reference ids: a pure function of (seed, index).

Example ``i`` of seed ``S`` is drawn with ``random.Random(f"{S}/{i}")`` (generator
choice, then text), so ``--examples N`` checks exactly examples ``0 .. N-1``. An
input is checked in the untrusted mode (``allow_special=False`` vs ``encode(text)``)
and, when it contains ``"<|"`` or one of the artifact's specials, also in the trusted mode
(``allow_special=True`` vs ``encode(text, allowed_special="all")``).

Out of scope: the generators (``conformance.fuzz.generators``) and comparing with a
backend (``conformance.fuzz.oracle``).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

from conformance.fuzz.generators import GENERATORS, GenContext, pick
from stacktok_export import StackTokenizer

UNTRUSTED, TRUSTED = "untrusted", "trusted"
MODES = (UNTRUSTED, TRUSTED)


@dataclass(frozen=True)
class Example:
    index: int
    generator: str
    text: str
    modes: tuple[str, ...]


def make_example(seed: int, index: int, names: Sequence[str], ctx: GenContext) -> Example:
    """Example ``index`` of ``seed``: a pure function of its arguments."""
    rng = random.Random(f"{seed}/{index}")
    name = pick(rng, names)
    text = GENERATORS[name][0](rng, ctx)
    # trusted too when it may hold a special (v1: every special has "<|"; imported ones any text)
    modes = MODES if "<|" in text or any(s in text for s in ctx.specials) else (UNTRUSTED,)
    return Example(index, name, text, modes)


def reference_ids(ref: StackTokenizer, text: str, mode: str) -> list[int]:
    return ref.encode(text, allowed_special="all" if mode == TRUSTED else frozenset())
