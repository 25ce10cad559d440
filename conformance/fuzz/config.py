"""What one fuzz run is asked to do: :class:`FuzzConfig` and its defaults.

``examples`` and ``seconds`` are the budget: ``examples=N`` checks exactly examples
``0 .. N-1`` (deterministic), ``seconds=T`` a time-dependent prefix of the same stream
(``examples=None`` then). ``keep`` is how many divergent examples are shrunk per
backend, mode and generator.

Out of scope: parsing and checking command-line values (``conformance.fuzz.command``)
and running (``conformance.fuzz.engine``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from conformance.backends import REFERENCE, REGISTRY
from conformance.core.hub import Target
from conformance.fuzz.generators import GENERATORS

DEFAULT_BACKENDS = tuple(n for n in REGISTRY if n != REFERENCE)
DEFAULT_EXAMPLES = 20_000


@dataclass
class FuzzConfig:
    directory: Path
    artifact: Path
    backends: Sequence[str]
    seed: int = 0
    examples: int | None = DEFAULT_EXAMPLES
    seconds: float | None = None
    generators: Sequence[str] = tuple(GENERATORS)
    keep: int = 1
    out: Path | None = None
    #: what DIR named when it was a Hub id (then ``directory`` is its snapshot); None: a local path
    target: Target | None = None
