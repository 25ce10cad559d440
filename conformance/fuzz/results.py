"""What a fuzz run found: per-backend runs, counterexamples, and the report with its rows.

A :class:`BackendRun`'s ``status`` is a word of :data:`conformance.core.rows.STATUSES`:
``pass`` while it runs and when nothing undeclared was found, ``fail`` once a shrunk
counterexample is kept, ``skip`` (declares no encode capability), ``missing`` (library
absent) or ``error`` (cannot load the export, or its adapter crashed).
:meth:`FuzzReport.rows` turns the runs into one ``fuzz.encode`` row per backend, and its
exit code is the shared rule's (:func:`conformance.core.rows.exit_code`).
:meth:`Counterexample.probe` is the probe-JSONL line ``--out`` writes.

Out of scope: finding (``conformance.fuzz.engine``), shrinking (``conformance.fuzz.minimize``)
and rendering (``conformance.fuzz.output``).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

from conformance.core.rows import Row, exit_code
from conformance.fuzz.config import FuzzConfig
from conformance.fuzz.examples import TRUSTED
from conformance.fuzz.shrink import Shrunk

#: BackendRun statuses that mean "did not run", each already a row status
NOT_RUN = ("missing", "skip")


@dataclass(frozen=True)
class Raw:
    """A divergent example as found, before shrinking."""

    index: int
    generator: str
    mode: str
    kind: str
    text: str  # what gets shrunk (declared code points already removed if undeclared)
    original: str
    declared: str | None


@dataclass
class Counterexample:
    backend: str
    mode: str
    generator: str
    index: int
    kind: str
    original: str
    text: str
    declared: str | None
    window: dict[str, Any] | None
    detail: str
    shrunk: Shrunk

    def probe(self, seed: int) -> dict[str, Any]:
        digest = hashlib.sha256(f"{self.backend}\0{self.mode}\0{self.text}".encode("utf-8", "surrogatepass"))
        return {
            "id": f"fuzz-{self.backend}-{digest.hexdigest()[:12]}",
            "category": "fuzz",
            "text": self.text,
            "allow_special": self.mode == TRUSTED,
            "source": f"stacktok fuzz seed={seed} backend={self.backend} generator={self.generator}",
        }


@dataclass
class BackendRun:
    name: str
    version: str = ""
    status: str = "pass"  # pass | fail | skip | missing | error (conformance.core.rows.STATUSES)
    reason: str = ""
    examples: int = 0
    checks: int = 0
    seconds: float = 0.0
    undeclared: int = 0
    declared: int = 0
    raises: int = 0
    kept: dict[tuple[str, str], list[Raw]] = field(default_factory=dict)
    first_declared: Raw | None = None
    counterexamples: list[Counterexample] = field(default_factory=list)
    declared_examples: list[Counterexample] = field(default_factory=list)

    @property
    def rate(self) -> float:
        return self.examples / self.seconds if self.seconds > 0 else 0.0


@dataclass
class FuzzReport:
    config: FuzzConfig
    runs: list[BackendRun]
    examples: int
    loop_seconds: float
    shrink_seconds: float
    reference_seconds: float

    @property
    def counterexamples(self) -> list[Counterexample]:
        return [cx for r in self.runs for cx in r.counterexamples]

    def rows(self) -> list[Row]:
        """One ``fuzz.encode`` row per backend (the shared row model)."""
        out = []
        for r in self.runs:
            if r.status in (*NOT_RUN, "error"):
                out.append(Row("fuzz.encode", r.name, r.status, r.reason))
            elif r.status == "fail":
                first = r.counterexamples[0]
                out.append(
                    Row(
                        "fuzz.encode",
                        r.name,
                        "fail",
                        f"{r.undeclared} undeclared divergence(s) in {r.examples} examples, "
                        f"minimal: {first.text!r:.80} ({first.mode})",
                        "feed the counterexamples back with `stacktok gate --probes`, then re-export "
                        "or declare a cited divergence",
                    )
                )
            else:
                out.append(Row("fuzz.encode", r.name, "pass", f"{r.examples} examples", declared=r.declared))
        return out

    @property
    def exit_code(self) -> int:
        return exit_code(self.rows())
