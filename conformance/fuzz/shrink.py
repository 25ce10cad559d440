"""A greedy, deterministic delta-debugging shrinker: the smallest, simplest input that still fails.

``shrink(text, fails, split=...)`` drops whole pieces (``split``: the pre-tokens), then
chunks of halving size down to single characters, then replaces characters by simpler
ones (:data:`SIMPLE_CHARS`, simplest first), repeated to a fixpoint, with at most
``budget`` oracle calls (memoised). The same input and predicate give the same result.

Out of scope: what "fails" means (the caller's predicate: same backend, mode and kind,
see ``conformance.fuzz.minimize``) and any randomness (there is none).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

SHRINK_CALLS = 4000  # oracle calls one shrink may make
SIMPLE_CHARS = "a 0\n.A'"  # replacement candidates, simplest first


@dataclass(frozen=True)
class Shrunk:
    text: str
    calls: int
    seconds: float


def _simplicity(ch: str) -> int:
    i = SIMPLE_CHARS.find(ch)
    return i if i >= 0 else len(SIMPLE_CHARS) + ord(ch)


def _drop_pieces(s: str, test: Callable[[str], bool], split: Callable[[str], list[str]]) -> str:
    pieces = split(s)
    i = 0
    while i < len(pieces) and len(pieces) > 1:
        cand = pieces[:i] + pieces[i + 1 :]
        if test("".join(cand)):
            pieces = cand
        else:
            i += 1
    return "".join(pieces)


def _drop_chunks(s: str, test: Callable[[str], bool]) -> str:
    n = len(s) // 2
    while n >= 1:
        i, removed = 0, False
        while i < len(s):
            cand = s[:i] + s[i + n :]
            if cand and test(cand):
                s, removed = cand, True
            else:
                i += n
        n = min(n, len(s) // 2) if removed else n // 2
    return s


def _simplify_chars(s: str, test: Callable[[str], bool]) -> str:
    for i in range(len(s)):
        for ch in SIMPLE_CHARS:
            if _simplicity(ch) >= _simplicity(s[i]):
                break
            cand = s[:i] + ch + s[i + 1 :]
            if test(cand):
                s = cand
                break
    return s


def shrink(
    text: str, fails: Callable[[str], bool], *, split: Callable[[str], list[str]], budget: int = SHRINK_CALLS
) -> Shrunk:
    """Greedy, deterministic delta debugging: the smallest, simplest input that still fails."""
    start = time.perf_counter()
    memo: dict[str, bool] = {text: True}

    def test(cand: str) -> bool:
        if cand not in memo:
            memo[cand] = len(memo) <= budget and fails(cand)
        return memo[cand]

    s = text
    while True:
        before = s
        s = _drop_pieces(s, test, split)
        s = _drop_chunks(s, test)
        s = _simplify_chars(s, test)
        if s == before or len(memo) > budget:
            break
    return Shrunk(s, len(memo) - 1, time.perf_counter() - start)
