"""Where two sequences first part ways: the one ``first_difference`` of the project.

The packer's verification (``pack.encode``) and the conformance suite's windows
(``conformance.checks.windows``) both call this function, so "the first differing
id" means the same position everywhere a mismatch is reported.

Out of scope: showing the difference (the suite's ``first_window`` renders the ids
around it) and any notion of edit distance.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def first_difference(a: Sequence[Any], b: Sequence[Any]) -> int:
    """Index of the first differing element (the shorter length if one is a prefix).

    >>> first_difference([1, 2, 3], [1, 9, 3])
    1
    >>> first_difference(b"abc", b"ab")
    2
    >>> first_difference([], [])
    0
    """
    return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
